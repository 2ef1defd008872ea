package ember

// #include "wrap.h"
import "C"

import (
	"runtime/cgo"
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
