package ember

// #include <stdlib.h>
// #include "wrap.h"
import "C"

import (
	"runtime"
	"unsafe"
)

// EmbedRequestOptions are ember_embed_request_params' options (zero values: the model's own pooling,
// every value, texts over the engine's longest refused; set Normalize for unit vectors).
type EmbedRequestOptions struct {
	Pooling    Pooling // 0: an embedding model's own; on a generating model 1 (mean) or 3 (last)
	Normalize  bool    // L2-normalise each vector
	Dimensions uint32  // Matryoshka: the first Dimensions values (0: all)
	Truncate   bool    // cut texts over MaxTokens instead of refusing them
	MaxTokens  uint32  // 0: the most the engine's pass holds for a text
}

// SubmitEmbed queues an embedding request for texts (ember_engine_submit_embed): the engine batches them
// with the running generations in its forward passes. Read the vectors with Embeddings once it is done.
func (e *Engine) SubmitEmbed(texts []string, o EmbedRequestOptions) (*Request, error) {
	return e.submitEmbed(nil, texts, o)
}

// SubmitRerank queues a scoring request on an engine over a reranking model (ember_engine_submit_embed
// with a query): each document is scored as the pair (query, document) that ember_rerank forms. Once it
// is done, Embeddings gives one []float32{score} per document. Any other model refuses it
// (ErrInvalidArgument); Pooling and Dimensions stay zero.
func (e *Engine) SubmitRerank(query string, docs []string, o EmbedRequestOptions) (*Request, error) {
	q := C.CString(query)
	defer C.free(unsafe.Pointer(q))
	return e.submitEmbed(q, docs, o)
}

func (e *Engine) submitEmbed(query *C.char, texts []string, o EmbedRequestOptions) (*Request, error) {
	const op = "ember_engine_submit_embed"
	if err := e.rlock(op); err != nil {
		return nil, err
	}
	defer e.mu.RUnlock()
	arr, n, free := cStrings(texts)
	defer free()
	var h *C.ember_request
	var msg *C.char
	st := C.eg_engine_submit_embed(e.h, arr, nil, n, C.int(o.Pooling), cFlag(o.Normalize), C.uint32_t(o.Dimensions),
		cFlag(o.Truncate), C.uint32_t(o.MaxTokens), query, &h, &msg)
	if err := result(op, st, msg); err != nil {
		return nil, err
	}
	r := &Request{h: h}
	runtime.SetFinalizer(r, (*Request).Close)
	return r, nil
}

// EmbeddingDim is the number of floats per vector of an embedding request (0 for a generation request).
func (r *Request) EmbeddingDim() int {
	if r.rlock("ember_request_embedding_dim") != nil {
		return 0
	}
	defer r.mu.RUnlock()
	return int(C.ember_request_embedding_dim(r.h))
}

// Embeddings returns an embedding request's vectors, one per text, once it is done (ErrInvalidState
// before, or when it was cancelled or failed).
func (r *Request) Embeddings() ([][]float32, error) {
	const op = "ember_request_embeddings"
	if err := r.rlock(op); err != nil {
		return nil, err
	}
	defer r.mu.RUnlock()
	var count C.size_t
	var msg *C.char
	if err := result(op, C.eg_request_embeddings(r.h, nil, 0, &count, &msg), msg); err != nil {
		return nil, err
	}
	flat := make([]float32, int(count))
	if count > 0 {
		st := C.eg_request_embeddings(r.h, (*C.float)(unsafe.Pointer(&flat[0])), count, &count, &msg)
		if err := result(op, st, msg); err != nil {
			return nil, err
		}
	}
	dim := int(C.ember_request_embedding_dim(r.h))
	var out [][]float32
	for i := 0; dim > 0 && i+dim <= len(flat); i += dim {
		out = append(out, flat[i:i+dim])
	}
	return out, nil
}
