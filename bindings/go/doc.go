// Package ember is the Go binding of libember, an embeddable LLM inference runtime (include/ember/ember.h).
//
// It uses cgo: the C compiler checks every call and struct against ember.h, and the package links
// with -lember. Point cgo at the library with CGO_CFLAGS=-I<include dir> and CGO_LDFLAGS=-L<lib dir>
// (see README.md).
//
// Concurrency: a *Model may be used from any number of goroutines at once (the C model is immutable).
// A *Session or *Sampler is for one goroutine at a time; each guards itself with a mutex, so
// concurrent use is serialized, never a data race. *Engine and *Request are safe for concurrent use.
//
// Errors are *Error values carrying the C status and the library's message; compare them with
// errors.Is(err, ember.ErrIO) and the other sentinels. Cancelling the context.Context given to Feed or
// Generate stops the work in the library (ember_session_cancel) and returns an error for which both
// errors.Is(err, ember.ErrCancelled) and errors.Is(err, ctx.Err()) hold.
//
// Every handle has an idempotent Close; a finalizer frees what was not closed, but only Close frees
// it at a known time.
package ember
