package ember

// #include <stdlib.h>
// #include "wrap.h"
import "C"

import (
	"runtime"
	"sync"
	"unsafe"
)

// Pooling says how a text's token rows become one vector (ember_pooling): 0 the model's own, 1 mean,
// 2 the first token's (CLS), 3 the last token's.
type Pooling int

// EmbedOptions are ember_embed_params' fields (zero values: the library's defaults, except Normalize).
type EmbedOptions struct {
	Normalize  bool    // L2-normalise each vector
	Dimensions uint32  // Matryoshka: the first Dimensions values (0: all)
	Pooling    Pooling // 0: the model's own
	Threads    uint32  // 0: the physical cores, at most 8
	MaxTokens  uint32  // 0: the model's trained context
	Truncate   bool    // cut longer texts instead of refusing them
}

// Embedder turns texts into vectors with an embedding model, or scores documents for a query with a
// reranking model (ember_embedder; docs/embeddings.md). Its methods are serialized.
type Embedder struct {
	mu sync.Mutex
	h  *C.ember_embedder
}

// NewEmbedder creates an embedder on m. ErrUnsupported for a model that generates rather than embeds.
func NewEmbedder(m *Model, o EmbedOptions) (*Embedder, error) {
	var e *Embedder
	err := m.use("ember_embedder_create", func(h *C.ember_model) error {
		var out *C.ember_embedder
		var msg *C.char
		st := C.eg_embedder_create(h, cFlag(o.Normalize), C.uint32_t(o.Dimensions), C.int(o.Pooling), C.uint32_t(o.Threads),
			C.uint32_t(o.MaxTokens), cFlag(o.Truncate), &out, &msg)
		if err := result("ember_embedder_create", st, msg); err != nil {
			return err
		}
		e = &Embedder{h: out}
		runtime.SetFinalizer(e, (*Embedder).Close)
		return nil
	})
	return e, err
}

// Dim is the number of floats per vector (1 for a reranker).
func (e *Embedder) Dim() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return int(C.ember_embedder_dim(e.h))
}

// Embed returns one vector per text.
func (e *Embedder) Embed(texts ...string) ([][]float32, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.h == nil {
		return nil, &Error{Status: StatusInvalidArgument, Op: "ember_embed", Message: "the embedder is closed"}
	}
	if len(texts) == 0 {
		return nil, nil
	}
	dim := int(C.ember_embedder_dim(e.h))
	flat := make([]float32, len(texts)*dim)
	arr, n, free := cStrings(texts)
	defer free()
	var msg *C.char
	st := C.eg_embed(e.h, arr, nil, n, (*C.float)(unsafe.Pointer(&flat[0])), C.size_t(len(flat)), &msg)
	if err := result("ember_embed", st, msg); err != nil {
		return nil, err
	}
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = flat[i*dim : (i+1)*dim : (i+1)*dim]
	}
	return out, nil
}

// Rerank returns each document's relevance score for query (a reranking model).
func (e *Embedder) Rerank(query string, docs ...string) ([]float32, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.h == nil {
		return nil, &Error{Status: StatusInvalidArgument, Op: "ember_rerank", Message: "the embedder is closed"}
	}
	if len(docs) == 0 {
		return nil, nil
	}
	scores := make([]float32, len(docs))
	arr, n, free := cStrings(docs)
	defer free()
	cq := C.CString(query)
	defer C.free(unsafe.Pointer(cq))
	var msg *C.char
	st := C.eg_rerank(e.h, cq, arr, n, (*C.float)(unsafe.Pointer(&scores[0])), &msg)
	if err := result("ember_rerank", st, msg); err != nil {
		return nil, err
	}
	return scores, nil
}

// Close frees the embedder. Idempotent.
func (e *Embedder) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.h != nil {
		C.ember_embedder_free(e.h)
		e.h = nil
		runtime.SetFinalizer(e, nil)
	}
	return nil
}

// cFlag is a bool as the wrappers of wrap.c take it (an int).
func cFlag(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
