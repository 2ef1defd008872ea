package ember

// #include <stdlib.h>
// #include "wrap.h"
import "C"

import (
	"unsafe"
)

// Structured output beyond the grammar itself (grammar.go): stop strings for the step-by-step Next,
// and log-probabilities. Stop strings and grammars for Generate and engine requests are in their
// options (GenerateOptions, RequestOptions).

// cStrings copies ss into C memory (an array of NUL-terminated strings) for a call that reads them
// while it runs; free releases it. A NUL inside a string ends that string early, as C reads it.
func cStrings(ss []string) (arr **C.char, n C.size_t, free func()) {
	if len(ss) == 0 {
		return nil, 0, func() {}
	}
	ptrSize := unsafe.Sizeof((*C.char)(nil))
	arr = (**C.char)(C.malloc(C.size_t(uintptr(len(ss)) * ptrSize)))
	elems := unsafe.Slice(arr, len(ss))
	for i, s := range ss {
		elems[i] = C.CString(s)
	}
	return arr, C.size_t(len(ss)), func() {
		for _, p := range elems {
			C.free(unsafe.Pointer(p))
		}
		C.free(unsafe.Pointer(arr))
	}
}

// useGrammar runs fn with g's C handle (nil for a nil g), holding g open for the call.
func useGrammar(op string, g *Grammar, fn func(*C.ember_grammar) error) error {
	if g == nil {
		return fn(nil)
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.h == nil {
		return closedError(op, "grammar")
	}
	return fn(g.h)
}

// SetStop sets the stop strings Next ends generation at (up to 16 of up to 1024 bytes; none removes
// them). Once the generated text contains one, that Next returns a Piece with End set and the text
// before it; a step whose text could begin a stop string holds it back (its Piece.Text may be "")
// until a later step decides. The match starts anew after an End, after SetStop, and when the session
// was fed, truncated or restored between two steps. Generate takes its own (GenerateOptions.Stop).
// ErrInvalidArgument for too many or too long strings (nothing changes).
func (s *Session) SetStop(stop ...string) error {
	const op = "ember_session_set_stop"
	if err := s.lock(op); err != nil {
		return err
	}
	defer s.mu.Unlock()
	arr, n, free := cStrings(stop)
	defer free()
	var msg *C.char
	return result(op, C.eg_session_set_stop(s.h, arr, n, &msg), msg)
}

// FlushStop returns the text Next holds back as a possible start of a stop string, for a caller that
// ends generation itself (its own token limit), and starts the match anew.
func (s *Session) FlushStop() (string, error) {
	const op = "ember_session_flush_stop"
	if err := s.lock(op); err != nil {
		return "", err
	}
	defer s.mu.Unlock()
	var text *C.char
	var n C.size_t
	var msg *C.char
	if err := result(op, C.eg_session_flush_stop(s.h, &text, &n, &msg), msg); err != nil {
		return "", err
	}
	return C.GoStringN(text, C.int(n)), nil
}

// TokenLogprob is a token and its log-probability (natural log) under the model's distribution: a
// log-softmax of the raw logits, before penalties and grammar (as OpenAI's logprobs).
type TokenLogprob struct {
	Token   Token
	Logprob float32
}

// maxLogprobs is the most top tokens a sampler records (SamplerOptions.NLogprobs, 0..20).
const maxLogprobs = 20

// logprobsOut reads ember_sampler_logprobs / ember_request_logprobs through call, which gets the
// output buffers.
func logprobsOut(op string, call func(sampled, top *C.ember_token_logprob, count *C.size_t, msg **C.char) C.ember_status) (TokenLogprob, []TokenLogprob, error) {
	var sampled C.ember_token_logprob
	var top [maxLogprobs]C.ember_token_logprob
	var n C.size_t
	var msg *C.char
	if err := result(op, call(&sampled, &top[0], &n, &msg), msg); err != nil {
		return TokenLogprob{}, nil, err
	}
	k := int(n)
	if k > maxLogprobs {
		k = maxLogprobs
	}
	out := make([]TokenLogprob, 0, k)
	for _, t := range top[:k] {
		out = append(out, TokenLogprob{Token(t.token), float32(t.logprob)})
	}
	return TokenLogprob{Token(sampled.token), float32(sampled.logprob)}, out, nil
}

// Logprobs are the log-probabilities the sampler recorded at its last sample (a Sample, Next or a
// Generate step) when made with SamplerOptions.NLogprobs > 0: the sampled token's, and the NLogprobs
// most probable tokens', best first. ErrInvalidState when it records none (NLogprobs 0, or nothing
// sampled yet).
func (s *Sampler) Logprobs() (sampled TokenLogprob, top []TokenLogprob, err error) {
	const op = "ember_sampler_logprobs"
	if err := s.lock(op); err != nil {
		return TokenLogprob{}, nil, err
	}
	defer s.mu.Unlock()
	return logprobsOut(op, func(sp, tp *C.ember_token_logprob, n *C.size_t, msg **C.char) C.ember_status {
		return C.eg_sampler_logprobs(s.h, sp, tp, maxLogprobs, n, msg)
	})
}

// Logprobs are the log-probabilities of the request's i-th generated token (0-based, in the order
// Poll returns tokens) when its sampling options set NLogprobs. ErrNotFound while token i is not
// generated; ErrInvalidState when NLogprobs was 0.
func (r *Request) Logprobs(i int) (sampled TokenLogprob, top []TokenLogprob, err error) {
	const op = "ember_request_logprobs"
	if i < 0 {
		return TokenLogprob{}, nil, argError(op, "token index %d is negative", i)
	}
	if err := r.rlock(op); err != nil {
		return TokenLogprob{}, nil, err
	}
	defer r.mu.RUnlock()
	return logprobsOut(op, func(sp, tp *C.ember_token_logprob, n *C.size_t, msg **C.char) C.ember_status {
		return C.eg_request_logprobs(r.h, C.size_t(i), sp, tp, maxLogprobs, n, msg)
	})
}
