package ember

import (
	"context"
	"math"
	"testing"
)

// An embedding request beside a generation on the same engine: unit vectors of the model's width, the same
// for the same text; the model's own pooling is refused on a generating model.
func TestEngineEmbedRequest(t *testing.T) {
	m := loadModel(t)
	e, err := m.NewEngine(&EngineOptions{NCtx: 128, NSeqMax: 2, NThreads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	toks, _ := m.Tokenize(testPrompt, TokenizeAddSpecial)
	g, err := e.Submit(toks, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	r, err := e.SubmitEmbed([]string{testPrompt, "another text", testPrompt}, EmbedRequestOptions{Pooling: 1, Normalize: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	v, err := r.Embeddings()
	if err != nil || len(v) != 3 || len(v[0]) != r.EmbeddingDim() {
		t.Fatalf("Embeddings: %d vectors, %v", len(v), err)
	}
	norm := 0.0
	for i, x := range v[0] {
		norm += float64(x) * float64(x)
		if x != v[2][i] {
			t.Fatalf("the same text gave another vector at %d", i)
		}
	}
	if math.Abs(norm-1) > 1e-4 {
		t.Fatalf("norm %v", norm)
	}
	if err := g.Wait(context.Background()); err != nil || g.EmbeddingDim() != 0 {
		t.Fatalf("the generation: %v, %d", err, g.EmbeddingDim())
	}
	_, err = e.SubmitEmbed([]string{"x"}, EmbedRequestOptions{})
	asError(t, err, ErrInvalidArgument)
	// A query is for a reranking model only.
	_, err = e.SubmitRerank("a query", []string{"x"}, EmbedRequestOptions{Pooling: 1})
	asError(t, err, ErrInvalidArgument)
}
