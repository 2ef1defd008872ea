package ember

// Session.SetPrecision: PrecisionHigh changes the logits of a quantized model (stories15M is Q8_0) a
// little, not the greedy token; a value that is no Precision constant is refused.

import (
	"context"
	"errors"
	"math"
	"reflect"
	"testing"
)

// argmax is the highest logit's index (ties: the lowest, as the greedy sampler picks).
func argmax(logits []float32) int {
	best := 0
	for i, l := range logits {
		if l > logits[best] {
			best = i
		}
	}
	return best
}

// precisionLogits feeds the test prompt to a new CPU session, after SetPrecision(*p) unless p is nil.
func precisionLogits(t *testing.T, m *Model, p *Precision) []float32 {
	t.Helper()
	s, err := m.NewSession(&SessionOptions{NCtx: 64, NThreads: 1, Backend: BackendCPU})
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	defer s.Close()
	if p != nil {
		if err := s.SetPrecision(*p); err != nil {
			t.Fatalf("SetPrecision(%d): %v", *p, err)
		}
	}
	toks, err := m.Tokenize(testPrompt, TokenizeAddSpecial)
	if err != nil {
		t.Fatalf("Tokenize: %v", err)
	}
	if err := s.Feed(context.Background(), toks); err != nil {
		t.Fatalf("Feed: %v", err)
	}
	logits, err := s.Logits()
	if err != nil {
		t.Fatalf("Logits: %v", err)
	}
	return logits
}

func TestHighPrecisionMovesLogitsNotTheGreedyToken(t *testing.T) {
	m := loadModel(t)
	def := precisionLogits(t, m, nil)
	high, explicitDefault := PrecisionHigh, PrecisionDefault
	hi := precisionLogits(t, m, &high)
	// Setting the default explicitly is the same as not setting it, bit for bit.
	if !reflect.DeepEqual(precisionLogits(t, m, &explicitDefault), def) {
		t.Fatal("SetPrecision(PrecisionDefault) changed the logits")
	}
	if len(hi) != len(def) {
		t.Fatalf("%d logits at high precision, %d at the default", len(hi), len(def))
	}
	maxDiff, lo, top := 0.0, math.Inf(1), math.Inf(-1)
	for i := range def {
		maxDiff = math.Max(maxDiff, math.Abs(float64(hi[i]-def[i])))
		lo, top = math.Min(lo, float64(def[i])), math.Max(top, float64(def[i]))
	}
	if maxDiff == 0 {
		t.Fatal("PrecisionHigh gave the default's logits on a Q8_0 model")
	}
	// A rounding change, not another computation: far below the spread of the logits.
	if maxDiff >= 0.05*(top-lo) {
		t.Fatalf("logits moved by %g (range %g..%g)", maxDiff, lo, top)
	}
	if argmax(hi) != argmax(def) {
		t.Fatalf("greedy token %d at high precision, %d at the default", argmax(hi), argmax(def))
	}
}

func TestUnknownPrecisionIsInvalidArgument(t *testing.T) {
	m := loadModel(t)
	s, err := m.NewSession(&SessionOptions{NCtx: 16, NThreads: 1, Backend: BackendCPU})
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	defer s.Close()
	for _, p := range []Precision{2, -1, 1000} {
		e := asError(t, s.SetPrecision(p), ErrInvalidArgument)
		if e.Op != "ember_session_set_precision" {
			t.Errorf("SetPrecision(%d): error names %q", p, e.Op)
		}
	}
	s.Close()
	if err := s.SetPrecision(PrecisionHigh); !errors.Is(err, ErrClosed) {
		t.Fatalf("SetPrecision after Close: %v, want ErrClosed", err)
	}
}
