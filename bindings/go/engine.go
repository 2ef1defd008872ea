package ember

// #include <stdlib.h>
// #include "wrap.h"
import "C"

import (
	"context"
	"runtime"
	"sync"
	"unsafe"
)

// EngineOptions are ember_engine_params; zero fields keep the C defaults (context: the trained one
// capped at 4096; 8 sequences; a KV cache sized for them; all physical cores up to 8; batches of 256;
// the best backend; an f16 cache). The binding always runs the engine's own worker thread.
type EngineOptions struct {
	NCtx     uint32
	NSeqMax  uint32
	KVBytes  uint64
	NThreads uint32
	NBatch   uint32
	Backend  Backend
	KVType   KVType
	// Placement across devices, as SessionOptions's.
	GPULayers      int32
	ExpertsOnCPU   int32
	GPUBudgetBytes uint64
	// Speculative decoding for the requests that do not opt out (RequestOptions.NoSpeculation): SpecMTP
	// (the model's own multi-token-prediction layers) or SpecLookup (n-gram lookup); a request's tokens
	// are the same as without it. SpecK: tokens a request drafts per step, 1..8 (0: the default, 4);
	// SpecNgramMax: SpecLookup's longest suffix, 1..16 (0: the default, 3).
	Speculation  SpecMode
	SpecK        uint32
	SpecNgramMax uint32
}

// Engine batches many requests on one model (continuous batching on a worker thread). It and its
// requests are safe for concurrent use.
type Engine struct {
	mu    sync.RWMutex // read: any call; write: Close
	h     *C.ember_engine
	model *Model
}

// NewEngine creates an engine on the model (which stays open until the engine is closed).
func (m *Model) NewEngine(opts *EngineOptions) (*Engine, error) {
	const op = "ember_engine_create"
	mh, err := m.adopt(op)
	if err != nil {
		return nil, err
	}
	var p C.ember_engine_params
	C.ember_engine_params_init(&p)
	if opts != nil {
		if opts.NCtx != 0 {
			p.n_ctx = C.uint32_t(opts.NCtx)
		}
		if opts.NSeqMax != 0 {
			p.n_seq_max = C.uint32_t(opts.NSeqMax)
		}
		if opts.NBatch != 0 {
			p.n_batch = C.uint32_t(opts.NBatch)
		}
		p.kv_bytes = C.uint64_t(opts.KVBytes)
		p.n_threads = C.uint32_t(opts.NThreads)
		p.backend = C.ember_backend_kind(opts.Backend)
		p.kv_type = C.ember_kv_type(opts.KVType)
		if opts.GPULayers != 0 {
			p.gpu_layers = C.int32_t(opts.GPULayers)
		}
		p.experts_on_cpu = C.int32_t(opts.ExpertsOnCPU)
		p.gpu_budget_bytes = C.uint64_t(opts.GPUBudgetBytes)
		p.speculation = C.ember_spec_mode(opts.Speculation)
		if opts.SpecK != 0 {
			p.spec_k = C.uint32_t(opts.SpecK)
		}
		if opts.SpecNgramMax != 0 {
			p.spec_ngram_max = C.uint32_t(opts.SpecNgramMax)
		}
	}
	var h *C.ember_engine
	var msg *C.char
	if err := result(op, C.eg_engine_create(mh, &p, &h, &msg), msg); err != nil {
		m.release()
		return nil, err
	}
	e := &Engine{h: h, model: m}
	runtime.SetFinalizer(e, (*Engine).Close)
	return e, nil
}

// Close stops the worker and frees the engine; idempotent. Requests still running are cancelled and
// their handles stay usable until closed.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.h == nil {
		return nil
	}
	C.ember_engine_free(e.h)
	e.h = nil
	e.model.release()
	runtime.SetFinalizer(e, nil)
	return nil
}

// EngineStats is a snapshot of an engine's load (ember_engine_stats).
type EngineStats struct {
	NBlocks, NBlocksUsed, NBlocksCached, BlockSize, NRunning, NQueued uint32
	KVBytes                                                           uint64
}

// Stats is a snapshot of the engine's load.
func (e *Engine) Stats() (EngineStats, error) {
	const op = "ember_engine_get_stats"
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.h == nil {
		return EngineStats{}, closedError(op, "engine")
	}
	var cs C.ember_engine_stats
	C.ember_engine_stats_init(&cs)
	var msg *C.char
	if err := result(op, C.eg_engine_get_stats(e.h, &cs, &msg), msg); err != nil {
		return EngineStats{}, err
	}
	return EngineStats{NBlocks: uint32(cs.n_blocks), NBlocksUsed: uint32(cs.n_blocks_used),
		NBlocksCached: uint32(cs.n_blocks_cached), BlockSize: uint32(cs.block_size), NRunning: uint32(cs.n_running),
		NQueued: uint32(cs.n_queued), KVBytes: uint64(cs.kv_bytes)}, nil
}

// Request is one generation queued on an engine. Safe for concurrent use; Close it when done.
type Request struct {
	mu sync.RWMutex // read: any call; write: Close
	h  *C.ember_request
}

// Submit queues a request: prompt tokens (copied), at most maxTokens new tokens (0: until the end),
// sampling options (nil: greedy). SubmitWith also takes stop strings and a grammar.
func (e *Engine) Submit(prompt []Token, maxTokens int, sampling *SamplerOptions) (*Request, error) {
	return e.SubmitWith(prompt, RequestOptions{MaxTokens: maxTokens, Sampling: sampling})
}

// RequestOptions are what a request takes besides its prompt.
type RequestOptions struct {
	MaxTokens int             // 0: until end of generation or a full context
	Sampling  *SamplerOptions // nil: greedy
	// Stop strings (copied at submit): the request ends (RequestDone) once its text contains one;
	// neither Text nor anything else gets the stop string or what follows it.
	Stop []string
	// Grammar constrains the request's sampling (the request keeps its own reference, so the grammar
	// may be closed after submit). A dead end fails the request with ErrGrammarDeadEnd.
	Grammar *Grammar
	// NoSpeculation: plain decoding for this request even when the engine speculates (the tokens are the
	// same either way).
	NoSpeculation bool
}

// RequestStats are a request's counters (ember_request_stats).
type RequestStats struct {
	Tokens         uint64  // tokens generated so far
	DecodeSteps    uint64  // engine steps whose pass evaluated its generated tokens
	Drafted        uint64  // tokens it drafted
	Accepted       uint64  // of those, kept
	AcceptanceRate float64 // Accepted / Drafted (0 when nothing was drafted)
}

// SubmitWith queues a request with the options (see RequestOptions).
func (e *Engine) SubmitWith(prompt []Token, opts RequestOptions) (*Request, error) {
	const op = "ember_request_submit"
	maxTokens, sampling := opts.MaxTokens, opts.Sampling
	if maxTokens < 0 || int64(maxTokens) > int64(^uint32(0)) {
		return nil, argError(op, "maxTokens %d is out of range", maxTokens)
	}
	if err := e.rlock(op); err != nil {
		return nil, err
	}
	defer e.mu.RUnlock()
	var sp *C.ember_sampler_params
	if sampling != nil {
		p := sampling.toC()
		sp = &p
	}
	stopArr, nStop, freeStop := cStrings(opts.Stop)
	defer freeStop()
	var h *C.ember_request
	err := useGrammar(op, opts.Grammar, func(g *C.ember_grammar) error {
		var msg *C.char
		st := C.eg_request_submit(e.h, tokenPtr(prompt), C.size_t(len(prompt)), C.uint32_t(maxTokens), sp, g, stopArr,
			nStop, C.bool(!opts.NoSpeculation), &h, &msg)
		return result(op, st, msg)
	})
	if err != nil {
		return nil, err
	}
	r := &Request{h: h}
	runtime.SetFinalizer(r, (*Request).Close)
	return r, nil
}

// rlock takes the engine's read lock for op; an error (and no lock) for a nil or closed engine.
func (e *Engine) rlock(op string) error {
	if e == nil {
		return argError(op, "engine is nil")
	}
	e.mu.RLock()
	if e.h == nil {
		e.mu.RUnlock()
		return closedError(op, "engine")
	}
	return nil
}

func (r *Request) rlock(op string) error {
	if r == nil {
		return argError(op, "request is nil")
	}
	r.mu.RLock()
	if r.h == nil {
		r.mu.RUnlock()
		return closedError(op, "request")
	}
	return nil
}

// Stats reads the request's counters: tokens, steps, drafts and accepted drafts.
func (r *Request) Stats() (RequestStats, error) {
	const op = "ember_request_get_stats"
	if err := r.rlock(op); err != nil {
		return RequestStats{}, err
	}
	defer r.mu.RUnlock()
	var cs C.ember_request_stats
	C.ember_request_stats_init(&cs)
	var msg *C.char
	if err := result(op, C.eg_request_get_stats(r.h, &cs, &msg), msg); err != nil {
		return RequestStats{}, err
	}
	return RequestStats{Tokens: uint64(cs.n_tokens), DecodeSteps: uint64(cs.decode_steps), Drafted: uint64(cs.drafted),
		Accepted: uint64(cs.accepted), AcceptanceRate: float64(cs.acceptance_rate)}, nil
}

// Poll takes the tokens generated since the previous Poll and reports the state; it never blocks on
// the engine's work.
func (r *Request) Poll() ([]Token, RequestState, error) {
	const op = "ember_request_poll"
	if err := r.rlock(op); err != nil {
		return nil, 0, err
	}
	defer r.mu.RUnlock()
	var n C.size_t
	var state C.ember_request_state
	var msg *C.char
	if err := result(op, C.eg_request_poll(r.h, nil, 0, &n, &state, &msg), msg); err != nil {
		return nil, 0, err
	}
	toks := make([]Token, int(n))
	if n > 0 {
		if err := result(op, C.eg_request_poll(r.h, tokenPtr(toks), n, &n, &state, &msg), msg); err != nil {
			return nil, 0, err
		}
		toks = toks[:int(n)]
	}
	return toks, RequestState(state), nil
}

// Text is the text generated so far.
func (r *Request) Text() (string, error) {
	const op = "ember_request_text"
	if err := r.rlock(op); err != nil {
		return "", err
	}
	defer r.mu.RUnlock()
	var n C.size_t
	var msg *C.char
	st := C.eg_request_text(r.h, nil, 0, &n, &msg)
	if st == C.EMBER_ERR_BUFFER_TOO_SMALL {
		C.free(unsafe.Pointer(msg))
	} else if err := result(op, st, msg); err != nil {
		return "", err
	}
	buf := (*C.char)(C.malloc(n + 1))
	defer C.free(unsafe.Pointer(buf))
	if err := result(op, C.eg_request_text(r.h, buf, n+1, &n, &msg), msg); err != nil {
		return "", err
	}
	return C.GoStringN(buf, C.int(n)), nil
}

// Wait blocks until the request has ended (done, cancelled or failed) or ctx is done; cancelling ctx
// does not cancel the request (call Cancel for that) and returns an error matching ErrCancelled and
// ctx.Err(). A failed request gives its error.
func (r *Request) Wait(ctx context.Context) error {
	const op = "ember_request_wait"
	ctx = orBackground(ctx)
	for {
		if err := r.rlock(op); err != nil {
			return err
		}
		var msg *C.char
		// Short waits, so that ctx is looked at often and Close is not held off for long.
		st := C.eg_request_wait(r.h, 20, &msg)
		r.mu.RUnlock()
		if err := result(op, st, msg); err != nil {
			return err
		}
		if st == C.EMBER_OK {
			return r.Err()
		}
		select {
		case <-ctx.Done():
			return cancelledError(op, ctx, "")
		default:
		}
	}
}

// Err is why the request failed (nil if it has not).
func (r *Request) Err() error {
	const op = "ember_request_error"
	if err := r.rlock(op); err != nil {
		return err
	}
	defer r.mu.RUnlock()
	var status C.ember_status
	var message, msg *C.char
	if err := result(op, C.eg_request_error(r.h, &status, &message, &msg), msg); err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(message))
	if status >= 0 {
		return nil
	}
	e := &Error{Status: Status(status), Op: "ember_request"}
	if message != nil {
		e.Message = C.GoString(message)
	}
	return e
}

// Cancel cancels the request at the next step boundary; cancelling an ended request does nothing.
func (r *Request) Cancel() error {
	const op = "ember_request_cancel"
	if err := r.rlock(op); err != nil {
		return err
	}
	defer r.mu.RUnlock()
	var msg *C.char
	return result(op, C.eg_request_cancel(r.h, &msg), msg)
}

// Close cancels the request if it still runs and frees it; idempotent.
func (r *Request) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.h != nil {
		C.ember_request_free(r.h)
		r.h = nil
		runtime.SetFinalizer(r, nil)
	}
	return nil
}
