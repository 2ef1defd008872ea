package ember

// #include "wrap.h"
import "C"

import (
	"runtime/cgo"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Callbacks from C into Go. C gets a cgo.Handle (an integer) as user_data, never a Go pointer; the
// handle is deleted when the C call that uses it returns. A panic in the Go function is caught here
// (it must not unwind through C frames), stops the C work (the callback returns false) and is raised
// again by the caller once the C call has returned.

type progressCall struct {
	fn       func(float32) bool
	panicked interface{}
}

type tokenCall struct {
	fn       func(Token, []byte) bool
	panicked interface{}
}

//export emberGoProgress
func emberGoProgress(progress C.float, handle C.uintptr_t) (goOn C.bool) {
	call := cgo.Handle(handle).Value().(*progressCall)
	defer func() {
		if r := recover(); r != nil {
			call.panicked = r
			goOn = false
		}
	}()
	return C.bool(call.fn(float32(progress)))
}

//export emberGoToken
func emberGoToken(token C.ember_token, text *C.char, n C.size_t, handle C.uintptr_t) (goOn C.bool) {
	call := cgo.Handle(handle).Value().(*tokenCall)
	defer func() {
		if r := recover(); r != nil {
			call.panicked = r
			goOn = false
		}
	}()
	// The text is valid only during the call: copied before Go keeps it.
	var piece []byte
	if n > 0 {
		piece = C.GoBytes(unsafe.Pointer(text), C.int(n))
	}
	return C.bool(call.fn(Token(token), piece))
}

// Logging. Log sinks may be called from any thread running ember work (cgo gives such threads a Go
// context), so a logger must be safe for concurrent use. A panic in a logger is swallowed (it must
// not unwind through C) and that message is lost.

type logFunc func(level LogLevel, message string)

var (
	logMu     sync.Mutex   // serializes SetLogger
	logGlobal atomic.Value // logFunc (possibly nil) of the process-wide sink
)

// SetLogger sets the process-wide log sink (nil: silent, the default) and the lowest level passed to
// it. Messages of a model loaded with LoadOptions.Log go there instead.
func SetLogger(fn func(level LogLevel, message string), minLevel LogLevel) {
	logMu.Lock()
	defer logMu.Unlock()
	logGlobal.Store(logFunc(fn))
	C.eg_log_set(C.bool(fn != nil), C.ember_log_level(minLevel))
}

func callLogger(fn logFunc, level C.ember_log_level, message *C.char) {
	if fn == nil {
		return
	}
	defer func() { _ = recover() }()
	fn(LogLevel(level), C.GoString(message))
}

//export emberGoLog
func emberGoLog(level C.ember_log_level, message *C.char) {
	fn, _ := logGlobal.Load().(logFunc)
	callLogger(fn, level, message)
}

//export emberGoModelLog
func emberGoModelLog(level C.ember_log_level, message *C.char, handle C.uintptr_t) {
	callLogger(cgo.Handle(handle).Value().(logFunc), level, message)
}
