package ember

// #include <stdlib.h>
// #include "wrap.h"
import "C"

import "unsafe"

// rawChatTemplate calls ember_chat_apply_template directly, with the model's own template, for
// chat_test.go (cgo is not allowed in _test.go files): an independent path to compare
// ApplyChatTemplate with. It reports the status of each call of the two-call idiom, including a
// buffer one byte short, and the text.
func rawChatTemplate(m *Model, messages []ChatMessage, addGenerationPrompt bool) (sizeSt, shortSt, fillSt int, text string) {
	n := len(messages)
	arr := make([]C.ember_chat_message, n+1) // +1: a valid pointer even for n == 0
	for i, msg := range messages {
		arr[i].role = C.CString(msg.Role)
		arr[i].content = C.CString(msg.Content)
		defer C.free(unsafe.Pointer(arr[i].role))
		defer C.free(unsafe.Pointer(arr[i].content))
	}
	// A Go array of structs holding C pointers only may be passed to C for the call.
	p := &arr[0]
	add := C.bool(addGenerationPrompt)
	var need, again C.size_t
	sizeSt = int(C.ember_chat_apply_template(m.h, nil, p, C.size_t(n), add, nil, 0, &need))
	buf := (*C.char)(C.malloc(need + 1))
	defer C.free(unsafe.Pointer(buf))
	shortSt = int(C.ember_chat_apply_template(m.h, nil, p, C.size_t(n), add, buf, need, &again))
	fillSt = int(C.ember_chat_apply_template(m.h, nil, p, C.size_t(n), add, buf, need+1, &again))
	if again != need {
		return sizeSt, shortSt, -1000, ""
	}
	return sizeSt, shortSt, fillSt, C.GoStringN(buf, C.int(need))
}
