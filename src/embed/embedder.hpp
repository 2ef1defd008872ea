// embedder.hpp — texts to vectors, and (query, document) pairs to relevance scores, on an embedding or
// reranking model (model_desc.hpp's EmbeddingInfo): many texts per forward pass, each a sequence of its own
// at positions 0.., the pass's output rows pooled here (mean, first token, last token), cut to a
// Matryoshka dimension and L2-normalised as asked.
//
// Why not a Session: an encoder attends both ways, so a text's tokens must all be in one pass (a later
// pass could not change what an earlier token saw), and nothing of a text is kept after its vector is out.
// One Embedder is used by one thread at a time.
#pragma once

#include "backend/backend.hpp"
#include "embed/pooling.hpp"
#include "model/model.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ember {

struct EmbedOptions {
    ember_backend_kind backend = EMBER_BACKEND_AUTO;
    uint32_t n_threads = 1;
    // Tokens per forward pass (texts are packed whole into passes); at least the longest text.
    uint32_t n_batch = 2048;
    // The longest text in tokens (0: the model's trained context, at most 2048 for a decoder).
    uint32_t max_tokens = 0;
    // Longer texts: cut to max_tokens (keeping the last token when add_special put SEP there), or refused.
    bool truncate = false;
    bool normalize = true;
    // 0: the model's width; else the first `dimensions` values (Matryoshka), before normalisation.
    uint32_t dimensions = 0;
    // Pooling::None: the model's own; else another of mean, cls, last (not for a reranking model).
    Pooling pooling = Pooling::None;
};

class Embedder {
public:
    // Throws EMBER_ERR_UNSUPPORTED for a model without pooling (a generating model), EMBER_ERR_INVALID_ARGUMENT
    // for options that do not fit it.
    Embedder(const Model &model, const EmbedOptions &opts);
    ~Embedder();

    uint32_t dim() const { return pooling_.dim(); }   // floats per vector
    uint32_t max_tokens() const { return max_tokens_; }
    Pooling pooling() const { return pooling_.pooling(); }
    bool ranks() const { return pooling_.ranks(); }

    // Token sequences (add_special already applied) to vectors: out gets texts.size() * dim() floats.
    // Empty sequences are refused; longer than max_tokens() truncated or refused as the options say.
    void embed_tokens(const std::vector<std::vector<int32_t>> &texts, float *out);
    // Texts, tokenized with the model's special tokens (CLS/SEP, BOS/EOS as its metadata says).
    void embed(const std::vector<std::string_view> &texts, float *out);
    // A reranking model's score of each document for the query (pairs formed by rerank_pair_tokens).
    void rerank(std::string_view query, const std::vector<std::string_view> &docs, float *scores);

private:
    // One forward pass over texts [i0, i1) of `texts`, writing their results (per_text() floats each).
    void run_pass(const std::vector<std::vector<int32_t>> &texts, size_t i0, size_t i1, float *out);

    const Model &model_;
    EmbedOptions opts_;
    TextPooling pooling_;
    uint32_t max_tokens_ = 0, n_batch_ = 0, n_blocks_ = 0;
    std::unique_ptr<BackendContext> ctx_;
    // Per pass: tokens, positions, block tables, the rows asked for and their outputs.
    std::vector<int32_t> tokens_, pos_, rows_, blocks_;
    std::vector<const int32_t *> tables_;
    std::vector<float> outputs_;
};

} // namespace ember
