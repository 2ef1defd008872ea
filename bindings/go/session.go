package ember

// #include <stdlib.h>
// #include "wrap.h"
import "C"

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

// SessionOptions are the options of Model.NewSession. Zero fields keep the C defaults
// (ember_session_params_init): the trained context capped at 4096, all physical cores up to 8,
// batches of 256, seed 0, the best backend, one sequence, an f16 KV cache.
type SessionOptions struct {
	NCtx     uint32  // context length in tokens
	NThreads uint32  // CPU worker threads
	NBatch   uint32  // tokens per forward pass when feeding prompts
	Seed     uint64  // seed for anything random the session does
	Backend  Backend // BackendAuto (default), BackendCPU, ...
	NSeqMax  uint32  // sequences the KV cache is sized for (this session and its forks)
	KVType   KVType  // KVF16 (default), KVQ8_0 or KVQ4_0
	// Placement across devices with a GPU backend (docs/offload.md): the GPU's layer count (0: the
	// default, every layer; GPULayersAuto: the fit to GPUBudgetBytes), GPU layers whose MoE experts run
	// on the CPU (GPULayersAll: every one), the GPU's budget in bytes (0: its free memory less a margin).
	GPULayers      int32
	ExpertsOnCPU   int32
	GPUBudgetBytes uint64
}

// Session is one sequence's state (KV cache, logits) on a model. It is for one goroutine at a time:
// its methods hold a mutex, so concurrent calls are serialized. Different sessions (forks included)
// run concurrently.
type Session struct {
	mu    sync.Mutex
	h     *C.ember_session
	model *Model         // kept open (and reachable) while the session lives
	mh    *C.ember_model // model.h, valid while the session holds its reference
	draft *Model         // the draft model of SetSpeculation, kept open likewise
}

// NewSession creates a session on the model, which must stay open until the session is closed (Close
// on the model fails until then). Errors: ErrInvalidArgument (vocab-only model, bad options),
// ErrUnsupported (backend), ErrOutOfMemory.
func (m *Model) NewSession(opts *SessionOptions) (*Session, error) {
	const op = "ember_session_create"
	mh, err := m.adopt(op)
	if err != nil {
		return nil, err
	}
	var p C.ember_session_params
	C.ember_session_params_init(&p)
	if opts != nil {
		if opts.NCtx != 0 {
			p.n_ctx = C.uint32_t(opts.NCtx)
		}
		if opts.NThreads != 0 {
			p.n_threads = C.uint32_t(opts.NThreads)
		}
		if opts.NBatch != 0 {
			p.n_batch = C.uint32_t(opts.NBatch)
		}
		if opts.NSeqMax != 0 {
			p.n_seq_max = C.uint32_t(opts.NSeqMax)
		}
		p.seed = C.uint64_t(opts.Seed)
		p.backend = C.ember_backend_kind(opts.Backend)
		p.kv_type = C.ember_kv_type(opts.KVType)
		if opts.GPULayers != 0 {
			p.gpu_layers = C.int32_t(opts.GPULayers)
		}
		p.experts_on_cpu = C.int32_t(opts.ExpertsOnCPU)
		p.gpu_budget_bytes = C.uint64_t(opts.GPUBudgetBytes)
	}
	var h *C.ember_session
	var msg *C.char
	if err := result(op, C.eg_session_create(mh, &p, &h, &msg), msg); err != nil {
		m.release()
		return nil, err
	}
	return newSession(h, m, mh), nil
}

func newSession(h *C.ember_session, m *Model, mh *C.ember_model) *Session {
	s := &Session{h: h, model: m, mh: mh}
	runtime.SetFinalizer(s, (*Session).Close)
	return s
}

// Close frees the session. It is idempotent; a call running on another goroutine is waited for
// (cancel its context first to stop it early). Forks live on.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.h == nil {
		return nil
	}
	C.ember_session_free(s.h)
	s.h = nil
	s.setDraft(nil)
	s.model.release()
	runtime.SetFinalizer(s, nil)
	return nil
}

// lock takes the session's mutex and checks that it is open; the caller unlocks.
func (s *Session) lock(op string) error {
	if s == nil {
		return argError(op, "session is nil")
	}
	s.mu.Lock()
	if s.h == nil {
		s.mu.Unlock()
		return closedError(op, "session")
	}
	return nil
}

// watchCancel arms h's cancellation (ember_session_cancel_arm) and calls ember_session_cancel once on
// it when ctx is done, until the returned stop is called (which waits for the watcher, so no cancel
// reaches a freed session). Armed, a cancel that lands before the C call starts is kept and stops the
// call at its start, so one cancel is enough.
func watchCancel(ctx context.Context, h *C.ember_session) (stop func()) {
	C.ember_session_cancel_arm(h)
	if ctx.Done() == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case <-done:
		case <-ctx.Done():
			C.ember_session_cancel(h)
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// orBackground lets a nil context mean "no cancellation" instead of a panic.
func orBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}

// cancelledError is the error of work stopped by ctx: it matches ErrCancelled and wraps ctx.Err().
func cancelledError(op string, ctx context.Context, msg string) error {
	if msg == "" {
		msg = "cancelled by the context"
	}
	return &Error{Status: StatusCancelled, Op: op, Message: msg, cause: ctx.Err()}
}

// tokenPtr is the C view of a token slice (nil for an empty one); C does not keep it.
func tokenPtr(tokens []Token) *C.ember_token {
	if len(tokens) == 0 {
		return nil
	}
	return (*C.ember_token)(unsafe.Pointer(&tokens[0]))
}

// Feed evaluates tokens after the current position (a prompt, or one token). Cancelling ctx stops it
// between chunks and layers; the session is then as before the call and the error matches both
// ErrCancelled and ctx.Err(). ErrContextFull if they would not fit (nothing is evaluated then).
func (s *Session) Feed(ctx context.Context, tokens []Token) error {
	const op = "ember_session_feed"
	ctx = orBackground(ctx)
	if err := s.lock(op); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if ctx.Err() != nil {
		return cancelledError(op, ctx, "")
	}
	stop := watchCancel(ctx, s.h)
	var msg *C.char
	st := C.eg_session_feed(s.h, tokenPtr(tokens), C.size_t(len(tokens)), &msg)
	stop()
	if st == C.EMBER_ERR_CANCELLED && ctx.Err() != nil {
		C.free(unsafe.Pointer(msg))
		return cancelledError(op, ctx, "")
	}
	return result(op, st, msg)
}

// Position is the number of tokens in the session (the position of the next one).
func (s *Session) Position() (int, error) {
	const op = "ember_session_position"
	if err := s.lock(op); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	var pos C.uint32_t
	var msg *C.char
	err := result(op, C.eg_session_position(s.h, &pos, &msg), msg)
	return int(pos), err
}

// Backend is the backend the session runs on (what BackendAuto chose) and its CPU worker threads
// (0 on a GPU backend).
func (s *Session) Backend() (Backend, int, error) {
	const op = "ember_session_backend"
	if err := s.lock(op); err != nil {
		return 0, 0, err
	}
	defer s.mu.Unlock()
	var b C.ember_backend_kind
	var n C.uint32_t
	var msg *C.char
	err := result(op, C.eg_session_backend(s.h, &b, &n, &msg), msg)
	return Backend(b), int(n), err
}

// SetPrecision sets how the next feeds and generated tokens round the activations (PrecisionDefault
// until then). KV cache rows already computed stay as they were, so set it before feeding the prompt;
// a fork starts with this session's setting. ErrInvalidArgument for a value that is not a Precision
// constant, ErrUnsupported for PrecisionHigh on a GPU backend; the setting is then unchanged. Needs
// libember's EMBER_1.6.
func (s *Session) SetPrecision(p Precision) error {
	const op = "ember_session_set_precision"
	if err := s.lock(op); err != nil {
		return err
	}
	defer s.mu.Unlock()
	var msg *C.char
	return result(op, C.eg_session_set_precision(s.h, C.ember_precision(p), &msg), msg)
}

// DefaultThreadCount is the CPU worker threads a session gets when its thread count is 0.
func DefaultThreadCount() int { return int(C.ember_default_thread_count()) }

// ContextLength is the session's context length in tokens.
func (s *Session) ContextLength() (int, error) {
	const op = "ember_session_context_length"
	if err := s.lock(op); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	var n C.uint32_t
	var msg *C.char
	err := result(op, C.eg_session_context_length(s.h, &n, &msg), msg)
	return int(n), err
}

// Truncate rolls the session back to its first n tokens (0 <= n <= Position).
func (s *Session) Truncate(n int) error {
	const op = "ember_session_truncate"
	if n < 0 || int64(n) > int64(^uint32(0)) {
		return argError(op, "n_tokens %d is out of range", n)
	}
	if err := s.lock(op); err != nil {
		return err
	}
	defer s.mu.Unlock()
	var msg *C.char
	return result(op, C.eg_session_truncate(s.h, C.uint32_t(n), &msg), msg)
}

// Logits is a copy of the logits (n_vocab values) after the last fed token. ErrInvalidState before
// anything was fed or right after Truncate.
func (s *Session) Logits() ([]float32, error) {
	const op = "ember_session_logits"
	if err := s.lock(op); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var ptr *C.float
	var n C.size_t
	var msg *C.char
	if err := result(op, C.eg_session_logits(s.h, &ptr, &n, &msg), msg); err != nil {
		return nil, err
	}
	out := make([]float32, int(n))
	copy(out, unsafe.Slice((*float32)(unsafe.Pointer(ptr)), int(n)))
	return out, nil
}

// Save is the session's state (tokens, KV cache rows, last logits) in ember's versioned format.
func (s *Session) Save() ([]byte, error) {
	const op = "ember_session_save"
	if err := s.lock(op); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var n C.size_t
	var msg *C.char
	st := C.eg_session_save(s.h, nil, 0, &n, &msg)
	if st == C.EMBER_ERR_BUFFER_TOO_SMALL {
		C.free(unsafe.Pointer(msg))
	} else if err := result(op, st, msg); err != nil {
		return nil, err
	}
	buf := make([]byte, int(n))
	if n == 0 {
		return buf, nil
	}
	if err := result(op, C.eg_session_save(s.h, unsafe.Pointer(&buf[0]), n, &n, &msg), msg); err != nil {
		return nil, err
	}
	return buf[:int(n)], nil
}

// Restore replaces the session's state by one from Save (validated first: ErrCorruptData for bad
// data, ErrContextFull when it does not fit; the session is unchanged then).
func (s *Session) Restore(data []byte) error {
	const op = "ember_session_restore"
	if len(data) == 0 {
		return argError(op, "no data")
	}
	if err := s.lock(op); err != nil {
		return err
	}
	defer s.mu.Unlock()
	var msg *C.char
	return result(op, C.eg_session_restore(s.h, unsafe.Pointer(&data[0]), C.size_t(len(data)), &msg), msg)
}

// SaveFile saves the state to a file (ErrIO when it cannot be written).
func (s *Session) SaveFile(path string) error {
	return s.pathCall("ember_session_save_file", path, func(cpath *C.char, msg **C.char) C.ember_status {
		return C.eg_session_save_file(s.h, cpath, msg)
	})
}

// RestoreFile restores the state from a file written by SaveFile.
func (s *Session) RestoreFile(path string) error {
	return s.pathCall("ember_session_restore_file", path, func(cpath *C.char, msg **C.char) C.ember_status {
		return C.eg_session_restore_file(s.h, cpath, msg)
	})
}

func (s *Session) pathCall(op, path string, call func(*C.char, **C.char) C.ember_status) error {
	if strings.IndexByte(path, 0) >= 0 {
		return argError(op, "path contains a NUL byte")
	}
	if err := s.lock(op); err != nil {
		return err
	}
	defer s.mu.Unlock()
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var msg *C.char
	return result(op, call(cpath, &msg), msg)
}

// Fork creates a session that continues from this one's state, sharing KV blocks copy-on-write.
func (s *Session) Fork() (*Session, error) {
	const op = "ember_session_fork"
	if err := s.lock(op); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if _, err := s.model.adopt(op); err != nil {
		return nil, err
	}
	var h *C.ember_session
	var msg *C.char
	if err := result(op, C.eg_session_fork(s.h, &h, &msg), msg); err != nil {
		s.model.release()
		return nil, err
	}
	return newSession(h, s.model, s.mh), nil
}

// SpecOptions attach speculative decoding (ember_spec_params). Zero fields keep the C defaults
// (k 4, adaptive, k_max 8, ngram_max 3, the session's threads).
type SpecOptions struct {
	Mode     SpecMode // SpecOff detaches; SpecDraft needs Draft; SpecLookup and SpecMTP need no model
	Draft    *Model   // the draft model (same vocabulary); kept open while attached
	K        uint32   // tokens proposed per target pass (1..16)
	FixedK   bool     // turn off the adaptive choice of k (the C default is adaptive)
	KMax     uint32
	NgramMax uint32
	NThreads uint32
}

// SetSpeculation attaches speculation to the session (Generate then needs fewer passes for the same
// tokens), or detaches it (nil or SpecOff).
func (s *Session) SetSpeculation(opts *SpecOptions) error {
	const op = "ember_session_set_speculation"
	if err := s.lock(op); err != nil {
		return err
	}
	defer s.mu.Unlock()
	var p C.ember_spec_params
	C.ember_spec_params_init(&p)
	var draft *Model
	if opts != nil {
		p.mode = C.ember_spec_mode(opts.Mode)
		if opts.K != 0 {
			p.k = C.uint32_t(opts.K)
		}
		if opts.KMax != 0 {
			p.k_max = C.uint32_t(opts.KMax)
		}
		if opts.NgramMax != 0 {
			p.ngram_max = C.uint32_t(opts.NgramMax)
		}
		p.n_threads = C.uint32_t(opts.NThreads)
		p.adaptive = C.bool(!opts.FixedK)
		if opts.Mode == SpecDraft && opts.Draft != nil {
			dh, err := opts.Draft.adopt(op)
			if err != nil {
				return err
			}
			draft = opts.Draft
			p.draft_model = dh
		}
	}
	var msg *C.char
	if err := result(op, C.eg_session_set_speculation(s.h, &p, &msg), msg); err != nil {
		if draft != nil {
			draft.release()
		}
		return err
	}
	s.setDraft(draft)
	return nil
}

// setDraft swaps the draft model the session keeps open (its reference is already counted).
func (s *Session) setDraft(d *Model) {
	if s.draft != nil {
		s.draft.release()
	}
	s.draft = d
}
