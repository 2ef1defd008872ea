package ember

// #include <stdlib.h>
// #include "wrap.h"
import "C"

import (
	"context"
	"errors"
	"runtime/cgo"
	"sync"
	"unsafe"
)

// Piece is one generated token and the text it completes: whole UTF-8 characters only, so it may be
// "" while a character is split across tokens. End marks the token that ends generation (EOS, EOT;
// for Next also one that completes a stop string); its text is what was still held back.
type Piece struct {
	Token Token
	Text  string
	End   bool
}

// Next samples one token from the session's current logits, records it in the sampler and (unless it
// ends generation, Piece.End) feeds it: one decode step per call. With stop strings (SetStop), a step
// that completes one ends generation too (Piece.End; its token is fed).
func (s *Session) Next(sampler *Sampler) (Piece, error) {
	const op = "ember_generate_next"
	if err := s.lock(op); err != nil {
		return Piece{}, err
	}
	defer s.mu.Unlock()
	if err := sampler.lock(op); err != nil {
		return Piece{}, err
	}
	defer sampler.mu.Unlock()
	var tok C.ember_token
	var text *C.char
	var n C.size_t
	var msg *C.char
	C.ember_session_cancel_arm(s.h) // Next has no ctx: a cancel left from an earlier call must not stop it
	st := C.eg_generate_next(s.h, sampler.h, &tok, &text, &n, &msg)
	if err := result(op, st, msg); err != nil {
		return Piece{}, err
	}
	return Piece{Token: Token(tok), Text: C.GoStringN(text, C.int(n)), End: st == C.EMBER_END_OF_GENERATION}, nil
}

// Generate generates up to maxTokens tokens (0: until end of generation, or ErrContextFull), calling
// onToken (may be nil) for each on this goroutine; onToken returning false stops it. It returns the
// number of tokens generated. Reaching maxTokens, an end-of-generation token or a stop by onToken is
// success; cancelling ctx stops it after the token being emitted and gives an error matching
// ErrCancelled and ctx.Err(). onToken must not call methods of this session or sampler (they are
// locked for the call). GenerateWith also takes stop strings and a grammar.
func (s *Session) Generate(ctx context.Context, sampler *Sampler, maxTokens int, onToken func(Piece) bool) (int, error) {
	return s.GenerateWith(ctx, sampler, GenerateOptions{MaxTokens: maxTokens}, onToken)
}

// GenerateOptions are what one Generate call takes besides the sampler.
type GenerateOptions struct {
	MaxTokens int // 0: until end of generation (or ErrContextFull)
	// Stop strings (up to 16 of up to 1024 bytes): generation ends (successfully) once the text contains
	// one, across token boundaries. Neither the stop string nor anything after it reaches onToken: text
	// that could begin one is held back until the next token decides, so a Piece's Text may be "" and a
	// later one longer than its token's own text.
	Stop []string
	// Grammar constrains this call only (replacing the sampler's own grammar for the call). May be nil.
	Grammar *Grammar
}

// GenerateWith is Generate with stop strings and a grammar for the call (see GenerateOptions).
func (s *Session) GenerateWith(ctx context.Context, sampler *Sampler, opts GenerateOptions, onToken func(Piece) bool) (int, error) {
	const op = "ember_generate"
	ctx = orBackground(ctx)
	maxTokens := opts.MaxTokens
	if maxTokens < 0 || int64(maxTokens) > int64(^uint32(0)) {
		return 0, argError(op, "maxTokens %d is out of range", maxTokens)
	}
	if err := s.lock(op); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	if err := sampler.lock(op); err != nil {
		return 0, err
	}
	defer sampler.mu.Unlock()
	// The grammar is held open after the sampler is locked, the order SetGrammar takes them in.
	var count int
	err := useGrammar(op, opts.Grammar, func(g *C.ember_grammar) error {
		var err error
		count, err = s.generate(ctx, sampler, maxTokens, g, opts.Stop, onToken)
		return err
	})
	return count, err
}

// generate runs ember_generate with the session and the sampler locked.
func (s *Session) generate(ctx context.Context, sampler *Sampler, maxTokens int, grammar *C.ember_grammar, stops []string,
	onToken func(Piece) bool) (int, error) {
	const op = "ember_generate"
	if ctx.Err() != nil {
		return 0, cancelledError(op, ctx, "")
	}
	mh := s.mh
	call := &tokenCall{fn: func(t Token, text []byte) bool {
		if onToken == nil {
			return true
		}
		return onToken(Piece{Token: t, Text: string(text), End: bool(C.ember_token_is_eog(mh, C.ember_token(t)))})
	}}
	handle := cgo.NewHandle(call)
	defer handle.Delete()
	stopArr, nStop, freeStop := cStrings(stops)
	defer freeStop()
	stop := watchCancel(ctx, s.h)
	var count C.size_t
	var msg *C.char
	st := C.eg_generate(s.h, sampler.h, C.uint32_t(maxTokens), C.uintptr_t(handle), grammar, stopArr, nStop, &count, &msg)
	stop()
	if call.panicked != nil {
		C.free(unsafe.Pointer(msg))
		panic(call.panicked)
	}
	if st == C.EMBER_STOPPED && ctx.Err() != nil {
		return int(count), cancelledError(op, ctx, "")
	}
	return int(count), result(op, st, msg)
}

// GenerateStream runs Generate on a goroutine of its own and sends each Piece on the returned
// channel, which is closed when generation ends. Always call wait (defer it): it stops the generation
// if it still runs (a consumer that stops reading early), waits for the goroutine to end, and returns
// Generate's error: nil for an end the consumer chose, an ErrCancelled error when ctx was cancelled.
//
//	pieces, wait := session.GenerateStream(ctx, sampler, 200)
//	defer wait()
//	for p := range pieces { fmt.Print(p.Text) }
//	if err := wait(); err != nil { ... }
func (s *Session) GenerateStream(ctx context.Context, sampler *Sampler, maxTokens int) (pieces <-chan Piece, wait func() error) {
	return s.GenerateStreamWith(ctx, sampler, GenerateOptions{MaxTokens: maxTokens})
}

// GenerateStreamWith is GenerateStream with stop strings and a grammar for the call (GenerateOptions).
func (s *Session) GenerateStreamWith(ctx context.Context, sampler *Sampler, opts GenerateOptions) (pieces <-chan Piece, wait func() error) {
	ctx = orBackground(ctx)
	ch := make(chan Piece)
	inner, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var genErr error
	go func() {
		defer close(done)
		defer close(ch)
		_, genErr = s.GenerateWith(inner, sampler, opts, func(p Piece) bool {
			select {
			case ch <- p:
				return true
			case <-inner.Done():
				return false
			}
		})
	}()
	var once sync.Once
	var result error
	wait = func() error {
		once.Do(func() {
			cancel()
			<-done
			result = genErr
			// A stop that wait itself caused (the consumer left early) is not an error.
			if result != nil && ctx.Err() == nil && errors.Is(result, context.Canceled) && errors.Is(result, ErrCancelled) {
				result = nil
			}
		})
		return result
	}
	return ch, wait
}
