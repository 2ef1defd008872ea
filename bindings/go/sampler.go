package ember

// #include <stdlib.h>
// #include "wrap.h"
import "C"

import (
	"runtime"
	"sync"
	"unsafe"
)

// SamplerOptions are ember_sampler_params. Start from DefaultSamplerOptions (the C defaults) or
// GreedySamplerOptions; the zero value is not the defaults (temperature 0 is greedy, top_p 0 invalid).
type SamplerOptions struct {
	Temperature      float32 // <= 0: greedy
	TopK             int32   // 0: off
	TopP             float32 // 1: off
	MinP             float32 // 0: off
	RepeatPenalty    float32 // 1: off
	FrequencyPenalty float32 // 0: off
	PresencePenalty  float32 // 0: off
	PenaltyLastN     int32   // tokens of history the penalties see
	Seed             uint64  // seed of the sampler's random generator
	// NLogprobs (0..20, 0: off) makes every sample record the sampled token's log-probability
	// and the NLogprobs most probable tokens' (Sampler.Logprobs, Request.Logprobs).
	NLogprobs int32
}

// DefaultSamplerOptions are the library's defaults, as ember_sampler_params_init sets them.
func DefaultSamplerOptions() SamplerOptions {
	var p C.ember_sampler_params
	C.ember_sampler_params_init(&p)
	return SamplerOptions{
		Temperature: float32(p.temperature), TopK: int32(p.top_k), TopP: float32(p.top_p), MinP: float32(p.min_p),
		RepeatPenalty: float32(p.repeat_penalty), FrequencyPenalty: float32(p.frequency_penalty),
		PresencePenalty: float32(p.presence_penalty), PenaltyLastN: int32(p.penalty_last_n), Seed: uint64(p.seed),
		NLogprobs: int32(p.n_logprobs),
	}
}

// GreedySamplerOptions are the defaults with temperature 0: the highest logit always wins.
func GreedySamplerOptions() SamplerOptions {
	o := DefaultSamplerOptions()
	o.Temperature = 0
	return o
}

func (o *SamplerOptions) toC() C.ember_sampler_params {
	var p C.ember_sampler_params
	C.ember_sampler_params_init(&p)
	p.temperature = C.float(o.Temperature)
	p.top_k = C.int32_t(o.TopK)
	p.top_p = C.float(o.TopP)
	p.min_p = C.float(o.MinP)
	p.repeat_penalty = C.float(o.RepeatPenalty)
	p.frequency_penalty = C.float(o.FrequencyPenalty)
	p.presence_penalty = C.float(o.PresencePenalty)
	p.penalty_last_n = C.int32_t(o.PenaltyLastN)
	p.seed = C.uint64_t(o.Seed)
	p.n_logprobs = C.int32_t(o.NLogprobs)
	return p
}

// Sampler turns logits into a token. It is for one goroutine at a time (its methods hold a mutex, so
// concurrent use is serialized); give each session its own.
type Sampler struct {
	mu sync.Mutex
	h  *C.ember_sampler
}

// NewSampler creates a sampler. ErrInvalidArgument for out-of-range options (negative TopK, TopP
// outside (0, 1], MinP outside [0, 1], RepeatPenalty <= 0, negative PenaltyLastN).
func NewSampler(opts SamplerOptions) (*Sampler, error) {
	p := opts.toC()
	var h *C.ember_sampler
	var msg *C.char
	if err := result("ember_sampler_create", C.eg_sampler_create(&p, &h, &msg), msg); err != nil {
		return nil, err
	}
	s := &Sampler{h: h}
	runtime.SetFinalizer(s, (*Sampler).Close)
	return s, nil
}

// Close frees the sampler; idempotent.
func (s *Sampler) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.h != nil {
		C.ember_sampler_free(s.h)
		s.h = nil
		runtime.SetFinalizer(s, nil)
	}
	return nil
}

func (s *Sampler) lock(op string) error {
	if s == nil {
		return argError(op, "sampler is nil")
	}
	s.mu.Lock()
	if s.h == nil {
		s.mu.Unlock()
		return closedError(op, "sampler")
	}
	return nil
}

// Sample picks a token from logits (not modified, not recorded: call Accept for the token used).
func (s *Sampler) Sample(logits []float32) (Token, error) {
	const op = "ember_sampler_sample"
	if len(logits) == 0 {
		return -1, argError(op, "no logits")
	}
	if err := s.lock(op); err != nil {
		return -1, err
	}
	defer s.mu.Unlock()
	var t C.ember_token
	var msg *C.char
	err := result(op, C.eg_sampler_sample(s.h, (*C.float)(unsafe.Pointer(&logits[0])), C.size_t(len(logits)), &t, &msg), msg)
	if err != nil {
		return -1, err
	}
	return Token(t), nil
}

// Accept records a token in the penalty history.
func (s *Sampler) Accept(t Token) error {
	const op = "ember_sampler_accept"
	if err := s.lock(op); err != nil {
		return err
	}
	defer s.mu.Unlock()
	var msg *C.char
	return result(op, C.eg_sampler_accept(s.h, C.ember_token(t), &msg), msg)
}

// Reset clears the penalty history and re-seeds the random generator.
func (s *Sampler) Reset() error {
	const op = "ember_sampler_reset"
	if err := s.lock(op); err != nil {
		return err
	}
	defer s.mu.Unlock()
	var msg *C.char
	return result(op, C.eg_sampler_reset(s.h, &msg), msg)
}
