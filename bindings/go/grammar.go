package ember

// #include <stdlib.h>
// #include "wrap.h"
import "C"

import (
	"runtime"
	"sync"
	"unsafe"
)

// Grammar constrains sampling to the text it allows (ember_grammar): GBNF (llama.cpp's syntax) or a
// JSON Schema, for one model's vocabulary. It keeps what it needs of the vocabulary, so it does not
// depend on the model after it is made, and it may be shared by samplers on any goroutines.
type Grammar struct {
	mu sync.RWMutex // read: attaching it; write: Close
	h  *C.ember_grammar
}

// NewGrammarGBNF compiles GBNF text. ErrInvalidArgument (with line and column) for malformed text.
func NewGrammarGBNF(m *Model, gbnf string) (*Grammar, error) { return newGrammar(m, gbnf, false) }

// NewGrammarJSONSchema compiles a JSON Schema. ErrInvalidArgument for malformed JSON or schema,
// ErrUnsupported for a keyword outside the subset (the message names it with its JSON pointer).
func NewGrammarJSONSchema(m *Model, schema string) (*Grammar, error) {
	return newGrammar(m, schema, true)
}

func newGrammar(m *Model, text string, schema bool) (*Grammar, error) {
	op := "ember_grammar_create_gbnf"
	flag := C.int(0)
	if schema {
		op, flag = "ember_grammar_create_json_schema", 1
	}
	var g *Grammar
	err := m.use(op, func(h *C.ember_model) error {
		ctext := C.CString(text) // a C copy: Go memory may not be passed where C keeps reading
		defer C.free(unsafe.Pointer(ctext))
		var out *C.ember_grammar
		var msg *C.char
		if err := result(op, C.eg_grammar_create(h, ctext, C.size_t(len(text)), flag, &out, &msg), msg); err != nil {
			return err
		}
		g = &Grammar{h: out}
		runtime.SetFinalizer(g, (*Grammar).Close)
		return nil
	})
	return g, err
}

// NewLazyGrammarGBNF compiles GBNF text that constrains only from a trigger on (ember_grammar_create_lazy,
// EMBER_1.10): until one of words appears in the generated text, or one of tokens is sampled, the
// sampler draws as without a grammar. The grammar matches the text from a word's first byte, or what
// follows a token; once that match is complete, free text resumes (once: only the end may follow).
func NewLazyGrammarGBNF(m *Model, gbnf string, words []string, tokens []Token, once bool) (*Grammar, error) {
	const op = "ember_grammar_create_lazy"
	var g *Grammar
	err := m.use(op, func(h *C.ember_model) error {
		ctext := C.CString(gbnf)
		defer C.free(unsafe.Pointer(ctext))
		// C copies of the words, in a C array (Go memory may not hold C pointers passed to C).
		n := len(words)
		cwords := (**C.char)(C.calloc(C.size_t(n+1), C.size_t(unsafe.Sizeof((*C.char)(nil)))))
		defer C.free(unsafe.Pointer(cwords))
		list := unsafe.Slice(cwords, n+1)
		for i, w := range words {
			list[i] = C.CString(w)
			defer C.free(unsafe.Pointer(list[i]))
		}
		var ctoks *C.ember_token
		if len(tokens) > 0 {
			ctoks = (*C.ember_token)(C.malloc(C.size_t(len(tokens)) * C.size_t(unsafe.Sizeof(C.ember_token(0)))))
			defer C.free(unsafe.Pointer(ctoks))
			for i, t := range tokens {
				unsafe.Slice(ctoks, len(tokens))[i] = C.ember_token(t)
			}
		}
		var out *C.ember_grammar
		var msg *C.char
		st := C.eg_grammar_create_lazy(h, ctext, C.size_t(len(gbnf)), cwords, C.size_t(n), ctoks, C.size_t(len(tokens)),
			C.bool(once), &out, &msg)
		if err := result(op, st, msg); err != nil {
			return err
		}
		g = &Grammar{h: out}
		runtime.SetFinalizer(g, (*Grammar).Close)
		return nil
	})
	return g, err
}

// GrammarConstraining: whether the sampler's grammar constrains its next token (false without one, and
// while a lazy grammar waits for its trigger).
func (s *Sampler) GrammarConstraining() (bool, error) {
	const op = "ember_sampler_grammar_constraining"
	if err := s.lock(op); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	var out C.bool
	var msg *C.char
	if err := result(op, C.eg_sampler_grammar_constraining(s.h, &out, &msg), msg); err != nil {
		return false, err
	}
	return bool(out), nil
}

// Close releases this reference; samplers it is attached to keep theirs. Idempotent.
func (g *Grammar) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.h != nil {
		C.ember_grammar_free(g.h)
		g.h = nil
		runtime.SetFinalizer(g, nil)
	}
	return nil
}

// SetGrammar constrains the sampler by g from its beginning (nil removes it). The sampler keeps its
// own reference, so g may be closed after. Sampling then fails with StatusGrammarDeadEnd where no
// token can continue an incomplete text.
func (s *Sampler) SetGrammar(g *Grammar) error {
	const op = "ember_sampler_set_grammar"
	if err := s.lock(op); err != nil {
		return err
	}
	defer s.mu.Unlock()
	var gh *C.ember_grammar
	if g != nil {
		g.mu.RLock()
		defer g.mu.RUnlock()
		if g.h == nil {
			return closedError(op, "grammar")
		}
		gh = g.h
	}
	var msg *C.char
	return result(op, C.eg_sampler_set_grammar(s.h, gh, &msg), msg)
}
