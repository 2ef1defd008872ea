package ember

// SessionOptions.KVType: each cache type makes a session whose saved state the others refuse; the
// quantized ones save fewer bytes than f16, KVQ4_0 fewer than KVQ8_0.

import (
	"context"
	"testing"
)

// kvSession is a new CPU session with the cache type kv, fed the test prompt.
func kvSession(t *testing.T, m *Model, kv KVType) *Session {
	t.Helper()
	s, err := m.NewSession(&SessionOptions{NCtx: 64, NThreads: 1, Backend: BackendCPU, KVType: kv})
	if err != nil {
		t.Fatalf("NewSession(KVType %d): %v", kv, err)
	}
	toks, err := m.Tokenize(testPrompt, TokenizeAddSpecial)
	if err != nil {
		t.Fatalf("Tokenize: %v", err)
	}
	if err := s.Feed(context.Background(), toks); err != nil {
		t.Fatalf("Feed: %v", err)
	}
	return s
}

func TestEachKVTypeKeepsItsOwnStates(t *testing.T) {
	m := loadModel(t)
	states := map[KVType][]byte{}
	for _, kv := range []KVType{KVF16, KVQ8_0, KVQ4_0} {
		s := kvSession(t, m, kv)
		data, err := s.Save()
		s.Close()
		if err != nil {
			t.Fatalf("Save(KVType %d): %v", kv, err)
		}
		states[kv] = data
	}
	if !(len(states[KVQ4_0]) < len(states[KVQ8_0]) && len(states[KVQ8_0]) < len(states[KVF16])) {
		t.Fatalf("saved states of %d (q4_0), %d (q8_0) and %d (f16) bytes", len(states[KVQ4_0]), len(states[KVQ8_0]),
			len(states[KVF16]))
	}
	s := kvSession(t, m, KVQ4_0)
	defer s.Close()
	if err := s.Restore(states[KVQ4_0]); err != nil {
		t.Fatalf("a Q4_0 state into a Q4_0 session: %v", err)
	}
	for _, other := range []KVType{KVF16, KVQ8_0} {
		if err := s.Restore(states[other]); err == nil {
			t.Fatalf("a KVType %d state restored into a Q4_0 session", other)
		}
	}
	if _, err := m.NewSession(&SessionOptions{NCtx: 64, KVType: KVType(3)}); err == nil {
		t.Fatal("KVType 3 accepted")
	}
}
