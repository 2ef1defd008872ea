// pooling.hpp — how a text's output rows become its vector, shared by the embedder (embedder.hpp) and an
// engine's embedding requests (engine/engine.hpp): the pooling a model and the caller's options resolve
// to, the rows of a text that pooling reads, and the vector made of them (a mean in double, the Matryoshka
// cut, L2 normalisation, a ranking head's score); and a text's tokens fitted to the longest allowed.
#pragma once

#include "model/model.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ember {

struct PoolingOptions {
    // Pooling::None: the model's own; else another of mean, cls, last (not for a reranking model).
    Pooling pooling = Pooling::None;
    // 0: the rows' whole width; else the first `dimensions` values (Matryoshka), before normalisation.
    uint32_t dimensions = 0;
    bool normalize = true;
};

class TextPooling {
public:
    // On an embedding or reranking model (its output rows are hidden states or a ranking head's): the
    // model's pooling unless the options name another. Throws EMBER_ERR_UNSUPPORTED for a generating model,
    // EMBER_ERR_INVALID_ARGUMENT for options that do not fit.
    TextPooling(const Model &model, const PoolingOptions &opts);
    // On a generating model's final normed hidden rows of width `hidden_width` (its program's hidden_buf):
    // the options must name mean or last pooling (EMBER_ERR_INVALID_ARGUMENT otherwise: the model has none
    // of its own, and a causal model's first row has seen only the first token).
    TextPooling(const Model &model, const PoolingOptions &opts, uint32_t hidden_width);

    Pooling pooling() const { return pooling_; }
    bool ranks() const { return pooling_ == Pooling::Rank; }
    uint32_t width() const { return width_; }               // floats of one output row
    uint32_t dim() const { return dim_; }                   // floats of one vector
    uint32_t per_text() const { return ranks() ? 1 : dim_; }   // floats a text's result takes

    // The rows of a text of n tokens that the pooling reads: `count` rows from row `first` of the text.
    struct Rows {
        uint32_t first = 0, count = 0;
    };
    Rows rows(uint32_t n) const;
    // A text's result (per_text() floats) from its rows(n).count rows of width(), `stride` floats apart.
    void pool(const float *rows, uint32_t count, size_t stride, float *out) const;

private:
    void check_dimensions(uint32_t dimensions);

    Pooling pooling_ = Pooling::None;
    bool encoder_ = false, rank_softmax_ = false, normalize_ = true;
    uint32_t width_ = 0, dim_ = 0;
};

// The name of a pooling ("mean"), for messages.
const char *pooling_name(Pooling p);
// The longest text of a model by default: an encoder's trained positions, a decoder's context up to 2048.
uint32_t default_max_tokens(const ModelDesc &d);
// A text's tokens fitted to max_tokens: an empty one is refused; a longer one is cut with truncate
// (keeping a closing control token, SEP or EOS, last: encoders were trained with it there), else refused
// naming its length and `whose` limit it passes ("the embedder's").
std::vector<int32_t> fit_text(const Tokenizer &tok, std::vector<int32_t> toks, uint32_t max_tokens, bool truncate,
                              const char *whose);
// Token ids checked against the vocabulary (EMBER_ERR_INVALID_ARGUMENT naming the first outside it).
void check_text_tokens(const Tokenizer &tok, const std::vector<int32_t> &toks);

} // namespace ember
