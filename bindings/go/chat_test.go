package ember

import (
	"errors"
	"strings"
	"testing"
)

// stories15M has no chat template, so the library's ChatML fallback renders. ember.h gives its form:
// "<|im_start|>{role}\n{content}<|im_end|>\n" per message, then "<|im_start|>assistant\n".
var chatConversation = []ChatMessage{
	{Role: "system", Content: "You are a helpful assistant."},
	{Role: "user", Content: "Hello! Grüße, 世界"},
}

const chatMLExpected = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n" +
	"<|im_start|>user\nHello! Grüße, 世界<|im_end|>\n" +
	"<|im_start|>assistant\n"

func TestChatTemplateChatMLFallback(t *testing.T) {
	m := loadModel(t)
	for _, add := range []bool{true, false} {
		want := chatMLExpected
		if !add {
			want = strings.TrimSuffix(chatMLExpected, "<|im_start|>assistant\n")
		}
		got, err := m.ApplyChatTemplate(chatConversation, add, "")
		if err != nil {
			t.Fatalf("ApplyChatTemplate(add=%v): %v", add, err)
		}
		if got != want {
			t.Errorf("add=%v: got %q, want ChatML %q", add, got, want)
		}
		sizeSt, shortSt, fillSt, raw := rawChatTemplate(m, chatConversation, add)
		if (sizeSt != int(StatusOK) && sizeSt != int(StatusBufferTooSmall)) || shortSt != int(StatusBufferTooSmall) ||
			fillSt != int(StatusOK) {
			t.Fatalf("the C calls: size query %d, one byte short %d, fill %d", sizeSt, shortSt, fillSt)
		}
		if raw != got {
			t.Errorf("add=%v: the C function gives %q, ApplyChatTemplate %q", add, raw, got)
		}
	}
}

func TestChatTemplateExplicit(t *testing.T) {
	m := loadModel(t)
	tmpl := "{{ bos_token }}{% for m in messages %}[{{ m.role | upper }}] {{ m.content }}\n{% endfor %}" +
		"{% if add_generation_prompt %}[ASSISTANT]{% endif %}"
	got, err := m.ApplyChatTemplate(chatConversation, true, tmpl)
	if err != nil {
		t.Fatal(err)
	}
	if want := "<s>[SYSTEM] You are a helpful assistant.\n[USER] Hello! Grüße, 世界\n[ASSISTANT]"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestChatTemplateErrors(t *testing.T) {
	m := loadModel(t)
	_, err := m.ApplyChatTemplate(chatConversation, true, "{{ raise_exception('boom') }}")
	var e *Error
	if !errors.As(err, &e) || e.Status != StatusInvalidArgument || !strings.Contains(e.Message, "boom") {
		t.Errorf("raise_exception('boom'): got %v, want ErrInvalidArgument with 'boom'", err)
	}
	if !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("errors.Is(%v, ErrInvalidArgument) is false", err)
	}
	if _, err = m.ApplyChatTemplate(chatConversation, true, "{% for %}"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("a syntax error: got %v", err)
	}
	if _, err = m.ApplyChatTemplate(chatConversation, true, "{% filter upper %}x{% endfilter %}"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("an unsupported construct: got %v", err)
	}
	for _, c := range []struct {
		msgs []ChatMessage
		tmpl string
	}{
		{[]ChatMessage{{Role: "user", Content: "a\x00b"}}, ""},
		{[]ChatMessage{{Role: "us\x00er", Content: "x"}}, ""},
		{chatConversation, "x\x00y"},
	} {
		if _, err := m.ApplyChatTemplate(c.msgs, true, c.tmpl); !errors.Is(err, ErrInvalidArgument) ||
			!strings.Contains(err.Error(), "NUL") {
			t.Errorf("a NUL byte (%q, %q): got %v", c.msgs, c.tmpl, err)
		}
	}
	m2, err := Load(modelPath(t), &LoadOptions{VocabOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	m2.Close()
	if _, err := m2.ApplyChatTemplate(chatConversation, true, ""); !errors.Is(err, ErrClosed) {
		t.Errorf("a closed model: got %v", err)
	}
}

func TestChatTemplateEmptyConversation(t *testing.T) {
	m := loadModel(t)
	for _, c := range []struct {
		msgs []ChatMessage
		add  bool
		tmpl string
		want string
	}{
		{nil, true, "", "<|im_start|>assistant\n"},
		{[]ChatMessage{}, false, "", ""},
		{nil, false, "n={{ messages | length }}", "n=0"},
	} {
		got, err := m.ApplyChatTemplate(c.msgs, c.add, c.tmpl)
		if err != nil || got != c.want {
			t.Errorf("ApplyChatTemplate(%v, %v, %q) = %q, %v; want %q", c.msgs, c.add, c.tmpl, got, err, c.want)
		}
	}
	_, _, fillSt, raw := rawChatTemplate(m, nil, true)
	if fillSt != int(StatusOK) || raw != "<|im_start|>assistant\n" {
		t.Errorf("the C function on no messages: %d %q", fillSt, raw)
	}
}
