package ember

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const testPrompt = "Once upon a time"

func modelPath(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("EMBER_REPO_MODELS")
	if dir == "" {
		dir = filepath.Join("..", "..", "models")
	}
	p := filepath.Join(dir, "stories15M-q8_0.gguf")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("model not found (%v): set EMBER_REPO_MODELS", err)
	}
	return p
}

func loadModel(t *testing.T) *Model {
	t.Helper()
	m, err := Load(modelPath(t), nil)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func openSession(t *testing.T, m *Model) *Session {
	t.Helper()
	s, err := m.NewSession(&SessionOptions{NCtx: 256, NThreads: 2})
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func greedy(t *testing.T) *Sampler {
	t.Helper()
	s, err := NewSampler(GreedySamplerOptions())
	if err != nil {
		t.Fatalf("NewSampler: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// prompted is a session that has been fed the test prompt.
func prompted(t *testing.T, m *Model) *Session {
	t.Helper()
	toks, err := m.Tokenize(testPrompt, TokenizeAddSpecial)
	if err != nil {
		t.Fatalf("Tokenize: %v", err)
	}
	s := openSession(t, m)
	if err := s.Feed(context.Background(), toks); err != nil {
		t.Fatalf("Feed: %v", err)
	}
	return s
}

func asError(t *testing.T, err error, want *Error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want an *ember.Error, got %T %v", err, err)
	}
	if !errors.Is(err, want) {
		t.Fatalf("want %v, got %v", want.Status, err)
	}
	return e
}

func TestSessionSaysItsBackend(t *testing.T) {
	m := loadModel(t)
	s, err := m.NewSession(&SessionOptions{NCtx: 256, NThreads: 1, Backend: BackendCPU})
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	defer s.Close()
	b, n, err := s.Backend()
	if err != nil || b != BackendCPU || n != 1 {
		t.Fatalf("Backend() = %v, %d, %v; want CPU, 1, nil", b, n, err)
	}
	if DefaultThreadCount() < 1 {
		t.Fatalf("DefaultThreadCount() = %d", DefaultThreadCount())
	}
}

func TestLoadMissingFileNamesThePath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no-such-model.gguf")
	m, err := Load(path, nil)
	if m != nil {
		t.Fatal("Load of a missing file returned a model")
	}
	e := asError(t, err, ErrIO)
	if e.Status != StatusIO || !strings.Contains(e.Message, path) {
		t.Fatalf("want StatusIO and a message naming %s, got %+v", path, e)
	}
	if errors.Is(err, ErrInvalidModel) {
		t.Fatal("an IO error must not match ErrInvalidModel")
	}
	if !strings.Contains(err.Error(), "EMBER_ERR_IO") {
		t.Fatalf("Error() should name the status: %q", err.Error())
	}
}

func TestBadArgumentsGiveErrors(t *testing.T) {
	_, err := Load("bad\x00path", nil)
	asError(t, err, ErrInvalidArgument)

	opts := DefaultSamplerOptions()
	opts.TopP = 0
	_, err = NewSampler(opts)
	if e := asError(t, err, ErrInvalidArgument); e.Message == "" {
		t.Fatal("the library's message is missing")
	}

	m := loadModel(t)
	s := prompted(t, m)
	sampler := greedy(t)
	asError(t, s.Feed(context.Background(), []Token{1 << 30}), ErrInvalidArgument)
	asError(t, s.Truncate(-1), ErrInvalidArgument)
	pos, _ := s.Position()
	asError(t, s.Truncate(pos+10), ErrInvalidArgument)
	_, err = s.Generate(context.Background(), nil, 5, nil)
	asError(t, err, ErrInvalidArgument)
	_, err = s.Generate(context.Background(), sampler, -1, nil)
	asError(t, err, ErrInvalidArgument)
	_, err = sampler.Sample(nil)
	asError(t, err, ErrInvalidArgument)
	_, err = m.TokenToPiece(-5, 0)
	asError(t, err, ErrInvalidArgument)
	_, err = m.Meta("no.such.key")
	asError(t, err, ErrNotFound)
	asError(t, s.Restore([]byte("not a saved state")), ErrCorruptData)

	// nil handles and a nil context: errors or defaults, never a panic.
	var nilSession *Session
	asError(t, nilSession.Feed(context.Background(), nil), ErrInvalidArgument)
	var nilModel *Model
	_, err = nilModel.NewSession(nil)
	asError(t, err, ErrInvalidArgument)
	_, err = nilModel.Tokenize("x", 0)
	asError(t, err, ErrInvalidArgument)
	if _, err := s.Generate(nil, sampler, 1, nil); err != nil { // nil on purpose
		t.Fatalf("a nil context means no cancellation: %v", err)
	}
}

func TestModelInfoAndTokenizer(t *testing.T) {
	m := loadModel(t)
	info, err := m.Info()
	if err != nil {
		t.Fatal(err)
	}
	if info.Architecture != "llama" || info.NVocab != 32000 || info.NLayer == 0 {
		t.Fatalf("unexpected info %+v", info)
	}
	toks, err := m.Tokenize(testPrompt, TokenizeAddSpecial)
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) < 2 || toks[0] != m.BOS() {
		t.Fatalf("want BOS first, got %v (BOS %d)", toks, m.BOS())
	}
	text, err := m.Detokenize(toks, 0)
	if err != nil || text != testPrompt {
		t.Fatalf("Detokenize = %q, %v; want %q", text, err, testPrompt)
	}
	piece, err := m.TokenToPiece(toks[1], 0)
	if err != nil || len(piece) == 0 {
		t.Fatalf("TokenToPiece = %q, %v", piece, err)
	}
	if !m.IsEOG(m.EOS()) || m.IsEOG(toks[1]) {
		t.Fatal("IsEOG is wrong for EOS or a word")
	}
	if Version() == "" || LibraryABIVersion() != ABIVersion {
		t.Fatalf("version %q ABI %d", Version(), LibraryABIVersion())
	}
}

// referenceIDs runs ember-greedy-ref, the C API's own greedy continuation.
func referenceIDs(t *testing.T, model string, n int) []Token {
	t.Helper()
	ref := os.Getenv("EMBER_GREEDY_REF")
	if ref == "" {
		t.Skip("EMBER_GREEDY_REF is not set (ctest sets it)")
	}
	out, err := exec.Command(ref, model, testPrompt, strconv.Itoa(n)).Output()
	if err != nil {
		t.Fatalf("%s: %v", ref, err)
	}
	var ids []Token
	for _, line := range strings.Fields(string(out)) {
		v, err := strconv.Atoi(line)
		if err != nil {
			t.Fatalf("reference output %q: %v", line, err)
		}
		ids = append(ids, Token(v))
	}
	if len(ids) == 0 {
		t.Fatal("the reference printed no tokens")
	}
	return ids
}

func equalTokens(a, b []Token) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestGreedyMatchesCReference(t *testing.T) {
	const n = 24
	m := loadModel(t)
	want := referenceIDs(t, modelPath(t), n)

	// Generate with the callback.
	s := prompted(t, m)
	var got []Token
	count, err := s.Generate(context.Background(), greedy(t), n, func(p Piece) bool {
		if !p.End {
			got = append(got, p.Token)
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if !equalTokens(got, want) || count < len(want) {
		t.Fatalf("Generate: got %v (count %d), the C reference %v", got, count, want)
	}

	// The pull API.
	s2 := prompted(t, m)
	sampler := greedy(t)
	got = nil
	for i := 0; i < n; i++ {
		p, err := s2.Next(sampler)
		if err != nil {
			t.Fatal(err)
		}
		if p.End {
			break
		}
		got = append(got, p.Token)
	}
	if !equalTokens(got, want) {
		t.Fatalf("Next: got %v, the C reference %v", got, want)
	}

	// The stream.
	s3 := prompted(t, m)
	pieces, wait := s3.GenerateStream(context.Background(), greedy(t), n)
	got = nil
	for p := range pieces {
		if !p.End {
			got = append(got, p.Token)
		}
	}
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if !equalTokens(got, want) {
		t.Fatalf("GenerateStream: got %v, the C reference %v", got, want)
	}
}

func TestCancelStopsGeneration(t *testing.T) {
	m := loadModel(t)
	s := prompted(t, m)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := 0
	start := time.Now()
	n, err := s.Generate(ctx, greedy(t), 0, func(p Piece) bool {
		seen++
		if seen == 3 {
			cancel() // from the token callback; the watcher goroutine calls ember_session_cancel
		}
		return true
	})
	asError(t, err, ErrCancelled)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("the error should wrap context.Canceled: %v", err)
	}
	if n < 3 || n > 10 {
		t.Fatalf("generation went on for %d tokens after the cancel at 3", n)
	}
	t.Logf("stopped after %d tokens in %v", n, time.Since(start))
	pos, err := s.Position()
	if err != nil || pos == 0 {
		t.Fatalf("the session should stay usable: %d %v", pos, err)
	}

	// A context that is already done: nothing is fed, the position stays.
	toks, _ := m.Tokenize(" and they lived happily", 0)
	err = s.Feed(ctx, toks)
	asError(t, err, ErrCancelled)
	if p2, _ := s.Position(); p2 != pos {
		t.Fatalf("a cancelled feed changed the position %d -> %d", pos, p2)
	}

	// A deadline during a long generation.
	s2 := prompted(t, m)
	dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer dcancel()
	_, err = s2.Generate(dctx, greedy(t), 0, nil)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want nil (the story ended first) or a deadline error, got %v", err)
	}
}

// A long prompt is stopped between chunks; the session is then as before the call.
func TestCancelStopsLongFeed(t *testing.T) {
	m := loadModel(t)
	s, err := m.NewSession(&SessionOptions{NCtx: 256, NThreads: 2, NBatch: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	story := strings.Repeat("The little dog ran to the park and played with a red ball. ", 30)
	toks, err := m.Tokenize(story, TokenizeAddSpecial)
	if err != nil {
		t.Fatal(err)
	}
	toks = toks[:160]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = s.Feed(ctx, toks)
	took := time.Since(start)
	if err == nil {
		t.Skipf("the feed of %d tokens finished in %v, before the 5 ms deadline", len(toks), took)
	}
	asError(t, err, ErrCancelled)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want context.DeadlineExceeded wrapped: %v", err)
	}
	if pos, _ := s.Position(); pos != 0 {
		t.Fatalf("a cancelled feed left %d tokens", pos)
	}
	// The full feed takes far longer than the time the cancelled one took.
	start = time.Now()
	if err := s.Feed(context.Background(), toks); err != nil {
		t.Fatal(err)
	}
	full := time.Since(start)
	t.Logf("cancelled after %v; the whole feed takes %v", took, full)
	if took > full/2+50*time.Millisecond {
		t.Fatalf("the cancel took effect late: %v of %v", took, full)
	}
}

func settleGoroutines(t *testing.T, base int) {
	t.Helper()
	for i := 0; i < 200; i++ {
		if runtime.NumGoroutine() <= base {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("goroutines leaked: %d, before %d", runtime.NumGoroutine(), base)
}

func TestStreamConsumerStopsEarlyOrCancels(t *testing.T) {
	m := loadModel(t)
	base := runtime.NumGoroutine()

	s := prompted(t, m)
	pieces, wait := s.GenerateStream(context.Background(), greedy(t), 100)
	read := 0
	for range pieces {
		read++
		if read == 3 {
			break // the consumer leaves; wait stops the producer
		}
	}
	if err := wait(); err != nil {
		t.Fatalf("an early stop by the consumer is not an error: %v", err)
	}
	if err := wait(); err != nil {
		t.Fatal("wait twice must give the same result")
	}
	settleGoroutines(t, base)
	pos, err := s.Position() // the session is free again
	if err != nil || pos == 0 {
		t.Fatalf("Position after the stream: %d %v", pos, err)
	}

	s2 := prompted(t, m)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pieces, wait = s2.GenerateStream(ctx, greedy(t), 0)
	read = 0
	for range pieces {
		read++
		if read == 3 {
			cancel()
		}
	}
	err = wait()
	asError(t, err, ErrCancelled)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled wrapped: %v", err)
	}
	settleGoroutines(t, base)
}

func TestCloseTwiceAndUseAfterClose(t *testing.T) {
	m, err := Load(modelPath(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.NewSession(&SessionOptions{NCtx: 64, NThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	fork, err := s.Fork()
	if err != nil {
		t.Fatal(err)
	}
	sampler := greedy(t)

	// The model stays open while sessions on it are.
	err = m.Close()
	asError(t, err, ErrInvalidState)
	if _, err := m.Info(); err != nil {
		t.Fatalf("a refused Close must leave the model usable: %v", err)
	}

	for i := 0; i < 2; i++ {
		if err := s.Close(); err != nil {
			t.Fatalf("Session.Close #%d: %v", i+1, err)
		}
	}
	_, err = s.Position()
	asError(t, err, ErrInvalidState)
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("want ErrClosed: %v", err)
	}
	asError(t, s.Feed(context.Background(), []Token{1}), ErrInvalidState)
	_, err = s.Generate(context.Background(), sampler, 1, nil)
	asError(t, err, ErrInvalidState)
	_, err = s.Fork()
	asError(t, err, ErrInvalidState)

	asError(t, m.Close(), ErrInvalidState) // the fork is still open
	fork.Close()
	for i := 0; i < 2; i++ {
		if err := m.Close(); err != nil {
			t.Fatalf("Model.Close #%d: %v", i+1, err)
		}
	}
	_, err = m.Tokenize("x", 0)
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("Tokenize after Close: %v", err)
	}
	if m.BOS() != -1 || m.IsEOG(2) {
		t.Fatal("BOS/IsEOG on a closed model should be -1/false")
	}
	_, err = m.NewSession(nil)
	asError(t, err, ErrInvalidState)

	sampler.Close()
	sampler.Close()
	_, err = sampler.Sample([]float32{1, 2})
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("Sample after Close: %v", err)
	}
}

func TestSaveRestoreForkTruncate(t *testing.T) {
	m := loadModel(t)
	s := prompted(t, m)
	start, _ := s.Position()
	state, err := s.Save()
	if err != nil || len(state) == 0 {
		t.Fatalf("Save: %d bytes, %v", len(state), err)
	}
	fork, err := s.Fork()
	if err != nil {
		t.Fatal(err)
	}
	defer fork.Close()

	gen := func(sess *Session) []Token {
		var out []Token
		if _, err := sess.Generate(context.Background(), greedy(t), 8, func(p Piece) bool {
			out = append(out, p.Token)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	a := gen(s)
	if err := s.Restore(state); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.Position(); p != start {
		t.Fatalf("Restore: position %d, want %d", p, start)
	}
	b := gen(s)
	c := gen(fork)
	if !equalTokens(a, b) || !equalTokens(a, c) {
		t.Fatalf("first %v, after Restore %v, fork %v", a, b, c)
	}
	if err := s.Truncate(start); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Logits(); !errors.Is(err, ErrInvalidState) {
		t.Fatalf("logits right after Truncate: %v", err)
	}
	file := filepath.Join(t.TempDir(), "state.bin")
	if err := fork.SaveFile(file); err != nil {
		t.Fatal(err)
	}
	if err := s.RestoreFile(file); err != nil {
		t.Fatal(err)
	}
	logits, err := s.Logits()
	if err != nil || len(logits) != 32000 {
		t.Fatalf("Logits: %d values, %v", len(logits), err)
	}
	asError(t, s.RestoreFile(filepath.Join(t.TempDir(), "missing")), ErrIO)
}

func TestProgressCallback(t *testing.T) {
	calls := 0
	m, err := Load(modelPath(t), &LoadOptions{Progress: func(p float32) bool {
		if p < 0 || p > 1 {
			t.Errorf("progress %v outside [0, 1]", p)
		}
		calls++
		return true
	}})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if calls == 0 {
		t.Fatal("the progress callback was never called")
	}
	_, err = Load(modelPath(t), &LoadOptions{Progress: func(float32) bool { return false }})
	asError(t, err, ErrCancelled)

	defer func() {
		if r := recover(); r != "boom" {
			t.Fatalf("a panic in the callback should reach the caller, got %v", r)
		}
	}()
	Load(modelPath(t), &LoadOptions{Progress: func(float32) bool { panic("boom") }})
}

// Sessions on one model run concurrently; one session used from two goroutines is serialized.
func TestConcurrency(t *testing.T) {
	m := loadModel(t)
	var wg sync.WaitGroup
	results := make([][]Token, 3)
	for i := range results {
		s := prompted(t, m)
		sampler := greedy(t)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			s.Generate(context.Background(), sampler, 10, func(p Piece) bool {
				results[i] = append(results[i], p.Token)
				return true
			})
		}(i)
	}
	// Misuse: the first session from several goroutines at once.
	shared := prompted(t, m)
	sampler := greedy(t)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 3; j++ {
				if _, err := shared.Next(sampler); err != nil {
					t.Error(err)
				}
				shared.Position()
			}
		}()
	}
	wg.Wait()
	for i := 1; i < len(results); i++ {
		if !equalTokens(results[i], results[0]) || len(results[0]) == 0 {
			t.Fatalf("concurrent sessions differ: %v vs %v", results[0], results[i])
		}
	}
	if p, _ := shared.Position(); p != 5+12 {
		t.Logf("shared session position %d", p)
	}
}

func TestEngineRequest(t *testing.T) {
	m := loadModel(t)
	e, err := m.NewEngine(&EngineOptions{NCtx: 128, NSeqMax: 2, NThreads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	asError(t, m.Close(), ErrInvalidState)
	toks, _ := m.Tokenize(testPrompt, TokenizeAddSpecial)
	r, err := e.Submit(toks, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, state, err := r.Poll()
	if err != nil || state != RequestDone || len(got) == 0 {
		t.Fatalf("Poll: %v %v %v", got, state, err)
	}
	s := prompted(t, m)
	var want []Token
	s.Generate(context.Background(), greedy(t), 8, func(p Piece) bool { want = append(want, p.Token); return true })
	if !equalTokens(got, want) {
		t.Fatalf("engine greedy %v, session greedy %v", got, want)
	}
	if text, err := r.Text(); err != nil || text == "" {
		t.Fatalf("Text: %q %v", text, err)
	}
	_, err = e.Submit(nil, 8, nil)
	asError(t, err, ErrInvalidArgument)
	e.Close()
	e.Close()
	_, err = e.Submit(toks, 1, nil)
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("Submit after Close: %v", err)
	}
}

func TestLoggers(t *testing.T) {
	path := modelPath(t)
	var mu sync.Mutex
	var global, own []string
	SetLogger(func(level LogLevel, msg string) {
		mu.Lock()
		global = append(global, msg)
		mu.Unlock()
	}, LogInfo)
	defer SetLogger(nil, LogInfo)

	m, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	m, err = Load(path, &LoadOptions{Log: func(level LogLevel, msg string) {
		mu.Lock()
		own = append(own, msg)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	SetLogger(nil, LogInfo)
	m, err = Load(path, &LoadOptions{Log: func(LogLevel, string) { panic("a logger panics") }})
	if err != nil {
		t.Fatalf("a panicking logger must not break the load: %v", err)
	}
	m.Close()

	mu.Lock()
	defer mu.Unlock()
	count := func(msgs []string) int {
		n := 0
		for _, s := range msgs {
			if strings.Contains(s, "loaded") && strings.Contains(s, path) {
				n++
			}
		}
		return n
	}
	if count(global) != 1 || count(own) != 1 {
		t.Fatalf("want one load line each: process-wide %q, the model's own %q", global, own)
	}
}

// DefaultSamplerOptions are what ember_sampler_params_init sets (the values ember.h documents).
func TestDefaultSamplerOptions(t *testing.T) {
	want := SamplerOptions{Temperature: 1, TopK: 0, TopP: 1, MinP: 0, RepeatPenalty: 1, FrequencyPenalty: 0,
		PresencePenalty: 0, PenaltyLastN: 64, Seed: 0}
	if got := DefaultSamplerOptions(); got != want {
		t.Fatalf("DefaultSamplerOptions() = %+v, want %+v", got, want)
	}
	if g := GreedySamplerOptions(); g.Temperature != 0 || g.TopP != 1 {
		t.Fatalf("GreedySamplerOptions() = %+v", g)
	}
}
