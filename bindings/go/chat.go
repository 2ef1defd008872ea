package ember

// #include <stdlib.h>
// #include "wrap.h"
import "C"

import (
	"fmt"
	"strings"
	"unsafe"
)

// ChatMessage is one message of a conversation for ApplyChatTemplate: a role ("system", "user",
// "assistant", ... whatever the template knows) and its text.
type ChatMessage struct {
	Role    string
	Content string
}

// ApplyChatTemplate renders messages to the prompt text the model expects
// (ember_chat_apply_template). template "" uses the model's own Jinja template
// (tokenizer.chat_template), or ChatML for a model without one; otherwise the Jinja text given is used.
// addGenerationPrompt ends the text with what opens the assistant's reply.
//
// Tokenize the result with TokenizeParseSpecial and, since templates write their own BOS text,
// usually without TokenizeAddSpecial (ember.h, "Tokenizing the result", says when to add it).
//
// Errors: ErrInvalidArgument for a template syntax or rendering error (with the template line) or the
// template's raise_exception(msg) (Message is msg), and for a NUL byte inside a role, content or the
// template; ErrUnsupported for a Jinja construct outside ember's subset.
func (m *Model) ApplyChatTemplate(messages []ChatMessage, addGenerationPrompt bool, template string) (string, error) {
	const op = "ember_chat_apply_template"
	if strings.IndexByte(template, 0) >= 0 {
		return "", argError(op, "template contains a NUL byte")
	}
	for i, msg := range messages {
		if strings.IndexByte(msg.Role, 0) >= 0 || strings.IndexByte(msg.Content, 0) >= 0 {
			return "", argError(op, "message %d contains a NUL byte", i)
		}
	}
	var out string
	err := m.use(op, func(h *C.ember_model) error {
		// Everything C reads lives in C memory (cgo forbids handing C Go memory that holds pointers),
		// allocated here and freed when the render is done.
		var ctmpl *C.char
		if template != "" {
			ctmpl = C.CString(template)
			defer C.free(unsafe.Pointer(ctmpl))
		}
		n := len(messages)
		var cmsgs *C.ember_chat_message
		if n > 0 {
			cmsgs = (*C.ember_chat_message)(C.calloc(C.size_t(n), C.sizeof_ember_chat_message))
			if cmsgs == nil {
				return &Error{Status: StatusOutOfMemory, Op: op, Message: fmt.Sprintf("%d messages", n)}
			}
			arr := unsafe.Slice(cmsgs, n)
			defer func() {
				for i := range arr {
					C.free(unsafe.Pointer(arr[i].role))
					C.free(unsafe.Pointer(arr[i].content))
				}
				C.free(unsafe.Pointer(cmsgs))
			}()
			for i, msg := range messages {
				arr[i].role = C.CString(msg.Role)
				arr[i].content = C.CString(msg.Content)
			}
		}
		add := C.bool(addGenerationPrompt)
		var need C.size_t
		var msg *C.char
		st := C.eg_chat_apply_template(h, ctmpl, cmsgs, C.size_t(n), add, nil, 0, &need, &msg)
		if st != C.EMBER_ERR_BUFFER_TOO_SMALL {
			if err := result(op, st, msg); err != nil {
				return err
			}
		} else {
			C.free(unsafe.Pointer(msg))
		}
		buf := (*C.char)(C.malloc(need + 1))
		if buf == nil {
			return &Error{Status: StatusOutOfMemory, Op: op, Message: fmt.Sprintf("%d bytes", need+1)}
		}
		defer C.free(unsafe.Pointer(buf))
		st = C.eg_chat_apply_template(h, ctmpl, cmsgs, C.size_t(n), add, buf, need+1, &need, &msg)
		if err := result(op, st, msg); err != nil {
			return err
		}
		out = C.GoStringN(buf, C.int(need))
		return nil
	})
	return out, err
}
