package ember

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// Structured output through the binding on stories15M: a JSON Schema on Generate and on an engine
// request gives JSON that parses and validates; stop strings end Generate, Next and requests without
// emitting the stop text; logprobs are log-probabilities, sorted, and name the sampled token.

const npcSchema = `{"type":"object","properties":{
  "say":{"type":"string","maxLength":30},
  "action":{"enum":["wave","attack","flee"]}},
  "required":["say","action"]}`

// validNPC parses text as the schema's object and checks it against the schema.
func validNPC(t *testing.T, text string) {
	t.Helper()
	var v map[string]interface{}
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("constrained output %q is not JSON: %v", text, err)
	}
	say, ok := v["say"].(string)
	if !ok || utf8.RuneCountInString(say) > 30 {
		t.Fatalf("%q: say missing, not a string or longer than 30", text)
	}
	switch v["action"] {
	case "wave", "attack", "flee":
	default:
		t.Fatalf("%q: action %v is not one of the enum", text, v["action"])
	}
	if len(v) != 2 {
		t.Fatalf("%q: properties beyond the schema's", text)
	}
}

func TestJSONSchemaOnGenerateAndRequest(t *testing.T) {
	m := loadModel(t)
	g, err := NewGrammarJSONSchema(m, npcSchema)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for _, temp := range []float32{0, 1} {
		opts := DefaultSamplerOptions()
		opts.Temperature, opts.Seed = temp, 7
		sampler, err := NewSampler(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer sampler.Close()
		s := prompted(t, m)
		var text strings.Builder
		ended := false
		if _, err := s.GenerateWith(context.Background(), sampler, GenerateOptions{MaxTokens: 120, Grammar: g},
			func(p Piece) bool {
				text.WriteString(p.Text)
				ended = ended || p.End
				return true
			}); err != nil {
			t.Fatal(err)
		}
		if !ended {
			t.Fatalf("temperature %v: no end of generation within 120 tokens: %q", temp, text.String())
		}
		validNPC(t, text.String())
	}

	// On an engine request; the request keeps its own reference to the grammar.
	e, err := m.NewEngine(&EngineOptions{NCtx: 256, NSeqMax: 2, NThreads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	prompt, _ := m.Tokenize(testPrompt, TokenizeAddSpecial)
	g2, err := NewGrammarJSONSchema(m, npcSchema)
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.SubmitWith(prompt, RequestOptions{MaxTokens: 120, Grammar: g2})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	g2.Close()
	if err := r.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	text, err := r.Text()
	if err != nil {
		t.Fatal(err)
	}
	validNPC(t, text)

	// A closed grammar is refused, not used.
	if _, err := e.SubmitWith(prompt, RequestOptions{Grammar: g2}); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed grammar: %v", err)
	}
}

// stopCase is greedy text from the test prompt and a stop string from its middle (first occurring at
// cut): what every stop-string test expects is full[:cut].
func stopCase(t *testing.T, m *Model) (full, stop string, cut int) {
	t.Helper()
	var b strings.Builder
	if _, err := prompted(t, m).Generate(context.Background(), greedy(t), 40, func(p Piece) bool {
		b.WriteString(p.Text)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	full = b.String()
	if len(full) < 40 {
		t.Fatalf("greedy text too short: %q", full)
	}
	stop = full[len(full)/2 : len(full)/2+4]
	return full, stop, strings.Index(full, stop)
}

func TestStopStrings(t *testing.T) {
	m := loadModel(t)
	full, stop, cut := stopCase(t, m)

	// Generate: ends there, successfully, without the stop text.
	var b strings.Builder
	if _, err := prompted(t, m).GenerateWith(context.Background(), greedy(t),
		GenerateOptions{MaxTokens: 40, Stop: []string{"never appears", stop}}, func(p Piece) bool {
			b.WriteString(p.Text)
			return true
		}); err != nil {
		t.Fatal(err)
	}
	if b.String() != full[:cut] {
		t.Fatalf("Generate with stop %q: %q, want %q", stop, b.String(), full[:cut])
	}

	// GenerateStreamWith: the same, as a channel.
	stream, wait := prompted(t, m).GenerateStreamWith(context.Background(), greedy(t), GenerateOptions{MaxTokens: 40, Stop: []string{stop}})
	b.Reset()
	for p := range stream {
		b.WriteString(p.Text)
	}
	if err := wait(); err != nil || b.String() != full[:cut] {
		t.Fatalf("GenerateStreamWith with stop %q: %q (%v), want %q", stop, b.String(), err, full[:cut])
	}

	// Next: the step completing the stop string ends generation.
	s := prompted(t, m)
	if err := s.SetStop(stop); err != nil {
		t.Fatal(err)
	}
	sampler := greedy(t)
	b.Reset()
	ended := false
	for i := 0; i < 40 && !ended; i++ {
		p, err := s.Next(sampler)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(p.Text)
		ended = p.End
	}
	if !ended || b.String() != full[:cut] {
		t.Fatalf("Next with stop %q: %q (ended %v), want %q", stop, b.String(), ended, full[:cut])
	}

	// Next, ended by the caller while a possible start of a stop string is held: FlushStop gives it.
	// The stop string begins with the last two bytes of the 10th step's text and never completes.
	var pieces []string
	s = prompted(t, m)
	sampler = greedy(t)
	for len(pieces) < 10 || len(pieces[len(pieces)-1]) < 2 {
		p, err := s.Next(sampler)
		if err != nil || p.End {
			t.Fatalf("Next: %v (end %v)", err, p.End)
		}
		pieces = append(pieces, p.Text)
	}
	last := pieces[len(pieces)-1]
	held := last[len(last)-2:]
	s = prompted(t, m)
	sampler = greedy(t)
	if err := s.SetStop(held + "\x01"); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	for range pieces {
		p, err := s.Next(sampler)
		if err != nil || p.End {
			t.Fatalf("Next: %v (end %v)", err, p.End)
		}
		b.WriteString(p.Text)
	}
	rest, err := s.FlushStop()
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Join(pieces, ""); rest != held || b.String()+rest != want {
		t.Fatalf("Next gave %q and FlushStop %q; want %q and %q", b.String(), rest, strings.TrimSuffix(want, held), held)
	}
	if err := s.SetStop(make([]string, 17)...); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("17 stop strings: %v", err)
	}

	// An engine request: its text ends before the stop string.
	e, err := m.NewEngine(&EngineOptions{NCtx: 256, NSeqMax: 2, NThreads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	prompt, _ := m.Tokenize(testPrompt, TokenizeAddSpecial)
	requestText := func(opts RequestOptions) string {
		r, err := e.SubmitWith(prompt, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if err := r.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		text, err := r.Text()
		if err != nil {
			t.Fatal(err)
		}
		return text
	}
	whole := requestText(RequestOptions{MaxTokens: 40})
	i := strings.Index(whole, stop)
	if i < 0 {
		t.Skipf("the engine's greedy text %q lacks %q", whole, stop)
	}
	if got := requestText(RequestOptions{MaxTokens: 40, Stop: []string{stop}}); got != whole[:i] {
		t.Fatalf("request with stop %q: %q, want %q", stop, got, whole[:i])
	}
}

// checkLogprobs: log-probabilities <= 0, best first, n of them, and the sampled token's is its own.
func checkLogprobs(t *testing.T, sampled TokenLogprob, top []TokenLogprob, n int, token Token) {
	t.Helper()
	if sampled.Token != token || sampled.Logprob > 0 {
		t.Fatalf("sampled %+v for token %d", sampled, token)
	}
	if len(top) != n {
		t.Fatalf("%d top logprobs, want %d", len(top), n)
	}
	for i, lp := range top {
		if lp.Logprob > 0 || (i > 0 && lp.Logprob > top[i-1].Logprob) {
			t.Fatalf("top logprobs not <= 0 and sorted: %+v", top)
		}
		if lp.Token == token && lp.Logprob != sampled.Logprob {
			t.Fatalf("token %d: %v in top, %v sampled", token, lp.Logprob, sampled.Logprob)
		}
	}
}

func TestLogprobs(t *testing.T) {
	m := loadModel(t)
	opts := DefaultSamplerOptions()
	opts.Seed, opts.NLogprobs = 3, 5
	sampler, err := NewSampler(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer sampler.Close()
	if _, _, err := sampler.Logprobs(); !errors.Is(err, ErrInvalidState) {
		t.Fatalf("before any sample: %v", err)
	}
	s := prompted(t, m)
	for i := 0; i < 8; i++ {
		p, err := s.Next(sampler)
		if err != nil {
			t.Fatal(err)
		}
		sampled, top, err := sampler.Logprobs()
		if err != nil {
			t.Fatal(err)
		}
		checkLogprobs(t, sampled, top, 5, p.Token)
	}
	// Greedy: the sampled token is the most probable one.
	g := GreedySamplerOptions()
	g.NLogprobs = 3
	gs, err := NewSampler(g)
	if err != nil {
		t.Fatal(err)
	}
	defer gs.Close()
	p, err := prompted(t, m).Next(gs)
	if err != nil {
		t.Fatal(err)
	}
	sampled, top, err := gs.Logprobs()
	if err != nil {
		t.Fatal(err)
	}
	checkLogprobs(t, sampled, top, 3, p.Token)
	if top[0].Token != p.Token {
		t.Fatalf("greedy sampled %d, most probable %d", p.Token, top[0].Token)
	}

	// Per token of an engine request.
	e, err := m.NewEngine(&EngineOptions{NCtx: 256, NSeqMax: 2, NThreads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	prompt, _ := m.Tokenize(testPrompt, TokenizeAddSpecial)
	r, err := e.SubmitWith(prompt, RequestOptions{MaxTokens: 6, Sampling: &opts})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	toks, _, err := r.Poll()
	if err != nil || len(toks) != 6 {
		t.Fatalf("poll: %v %v", toks, err)
	}
	for i, tok := range toks {
		sampled, top, err := r.Logprobs(i)
		if err != nil {
			t.Fatal(err)
		}
		checkLogprobs(t, sampled, top, 5, tok)
	}
	if _, _, err := r.Logprobs(len(toks)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("token past the end: %v", err)
	}
}
