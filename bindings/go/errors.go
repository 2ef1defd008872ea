package ember

// #cgo LDFLAGS: -lember
// #include <stdlib.h>
// #include "wrap.h"
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"
)

// Error is the error of a failing ember call: the C status and the library's message.
type Error struct {
	Status  Status // a negative status (StatusInvalidArgument, StatusIO, ...)
	Message string // what went wrong, from ember_last_error() or from the binding
	Op      string // the call that failed, e.g. "ember_model_load"; "" for sentinels
	cause   error  // what it wraps: ctx.Err() for a cancellation, ErrClosed for a closed handle
}

// Sentinels, one per error status, for errors.Is: an *Error matches the sentinel of its Status.
var (
	ErrInvalidArgument = &Error{Status: StatusInvalidArgument}
	ErrOutOfMemory     = &Error{Status: StatusOutOfMemory}
	ErrIO              = &Error{Status: StatusIO}
	ErrInvalidModel    = &Error{Status: StatusInvalidModel}
	ErrUnsupported     = &Error{Status: StatusUnsupported}
	ErrCancelled       = &Error{Status: StatusCancelled}
	ErrContextFull     = &Error{Status: StatusContextFull}
	ErrBufferTooSmall  = &Error{Status: StatusBufferTooSmall}
	ErrNotFound        = &Error{Status: StatusNotFound}
	ErrTypeMismatch    = &Error{Status: StatusTypeMismatch}
	ErrBackend         = &Error{Status: StatusBackend}
	ErrInvalidState    = &Error{Status: StatusInvalidState}
	ErrCorruptData     = &Error{Status: StatusCorruptData}
	ErrGrammarDeadEnd  = &Error{Status: StatusGrammarDeadEnd}
	ErrInternal        = &Error{Status: StatusInternal}
)

// ErrClosed is wrapped by the error of any call on a handle after its Close (whose Status is
// StatusInvalidState).
var ErrClosed = errors.New("ember: handle is closed")

func (e *Error) Error() string {
	// "ember: EMBER_ERR_IO: ember_model_load: cannot open ..." (the library's messages name the call
	// already; the binding's own ones get it added).
	s := "ember: " + e.Status.String()
	if e.Op != "" && !strings.HasPrefix(e.Message, e.Op+":") {
		s += ": " + e.Op
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Is makes errors.Is(err, ErrIO) true for every *Error with StatusIO.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Op == "" && t.Message == "" && t.Status == e.Status
}

// Unwrap gives the cause: ctx.Err() for a cancellation, ErrClosed for a closed handle.
func (e *Error) Unwrap() error { return e.cause }

// result turns a wrapper's status and its copied message (freed here) into an error (nil for a status
// >= 0: OK and the non-error outcomes).
func result(op string, st C.ember_status, msg *C.char) error {
	if msg != nil {
		defer C.free(unsafe.Pointer(msg))
	}
	if st >= 0 {
		return nil
	}
	e := &Error{Status: Status(st), Op: op}
	if msg != nil {
		e.Message = C.GoString(msg)
	}
	return e
}

// argError is the binding's own check of an argument, made before calling C.
func argError(op, format string, args ...interface{}) error {
	return &Error{Status: StatusInvalidArgument, Op: op, Message: fmt.Sprintf(format, args...)}
}

func closedError(op, what string) error {
	return &Error{Status: StatusInvalidState, Op: op, Message: what + " is closed", cause: ErrClosed}
}
