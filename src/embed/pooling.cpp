// pooling.cpp — TextPooling (pooling.hpp): the pooling's rows, the mean, Matryoshka, normalisation, and a
// ranking head's score; fitting a text to the longest allowed.
#include "embed/pooling.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cmath>

namespace ember {

const char *pooling_name(Pooling p) {
    static const char *const kNames[] = {"none", "mean", "cls", "last", "rank"};
    return kNames[static_cast<uint32_t>(p)];
}

TextPooling::TextPooling(const Model &model, const PoolingOptions &opts) : normalize_(opts.normalize) {
    const ModelDesc &d = model.desc();
    const EmbeddingInfo &e = d.embedding;
    if (!e.outputs_hidden)
        fail(EMBER_ERR_UNSUPPORTED, "'%s' (%s) is not an embedding model: it has no pooling type (%s.pooling_type), "
             "so its outputs are next-token logits, not vectors", model.name().c_str(), d.arch.c_str(), d.arch.c_str());
    pooling_ = e.pooling;
    encoder_ = e.encoder;
    rank_softmax_ = e.rank_softmax;
    if (opts.pooling != Pooling::None && opts.pooling != pooling_) {
        if (pooling_ == Pooling::Rank || opts.pooling == Pooling::Rank)
            fail(EMBER_ERR_INVALID_ARGUMENT, "pooling %s cannot replace a model's %s pooling (a ranking head scores pairs)",
                 pooling_name(opts.pooling), pooling_name(pooling_));
        pooling_ = opts.pooling;
    }
    width_ = d.c.n_vocab;
    check_dimensions(opts.dimensions);
}

TextPooling::TextPooling(const Model &model, const PoolingOptions &opts, uint32_t hidden_width) : normalize_(opts.normalize) {
    const std::string &arch = model.desc().arch;
    if (opts.pooling == Pooling::None)
        fail(EMBER_ERR_INVALID_ARGUMENT, "'%s' (%s) has no pooling type of its own (%s.pooling_type; it generates): "
             "name the pooling, mean or last, to embed with its final hidden states", model.name().c_str(), arch.c_str(),
             arch.c_str());
    if (opts.pooling != Pooling::Mean && opts.pooling != Pooling::Last)
        fail(EMBER_ERR_INVALID_ARGUMENT, "pooling %s does not fit a generating (causal) model: its first row has seen only "
             "the first token; use mean or last", pooling_name(opts.pooling));
    pooling_ = opts.pooling;
    width_ = hidden_width;
    check_dimensions(opts.dimensions);
}

void TextPooling::check_dimensions(uint32_t dimensions) {
    dim_ = width_;
    if (!dimensions) return;
    if (ranks()) fail(EMBER_ERR_INVALID_ARGUMENT, "dimensions apply to embeddings, not to scores");
    if (dimensions > width_) fail(EMBER_ERR_INVALID_ARGUMENT, "dimensions %u is more than the model's %u", dimensions, width_);
    dim_ = dimensions;
}

TextPooling::Rows TextPooling::rows(uint32_t n) const {
    // Every token's row (mean), the first's (cls; a BERT ranking head reads the CLS row) or the last's (last;
    // a decoder's ranking head reads where the next token would be predicted).
    if (pooling_ == Pooling::Mean) return {0, n};
    const bool first = pooling_ == Pooling::Cls || (pooling_ == Pooling::Rank && encoder_);
    return {first ? 0 : n - 1, 1};
}

void TextPooling::pool(const float *rows, uint32_t count, size_t stride, float *out) const {
    const size_t w = width_;
    std::vector<float> mean;
    const float *raw = rows;
    if (pooling_ == Pooling::Mean) {
        std::vector<double> acc(w, 0.0);
        for (size_t r = 0; r < count; ++r)
            for (size_t k = 0; k < w; ++k) acc[k] += rows[r * stride + k];
        mean.resize(w);
        for (size_t k = 0; k < w; ++k) mean[k] = static_cast<float>(acc[k] / static_cast<double>(count));
        raw = mean.data();
    }
    if (ranks()) {
        float s = raw[0];
        if (rank_softmax_) {
            // P(first class): softmax over the head's outputs.
            float m = raw[0];
            for (size_t k = 1; k < w; ++k) m = std::max(m, raw[k]);
            double z = 0;
            for (size_t k = 0; k < w; ++k) z += std::exp(static_cast<double>(raw[k] - m));
            s = static_cast<float>(std::exp(static_cast<double>(raw[0] - m)) / z);
        }
        out[0] = s;
        return;
    }
    double ss = 0;
    for (uint32_t k = 0; k < dim_; ++k) ss += static_cast<double>(raw[k]) * raw[k];
    const double scale = normalize_ && ss > 0 ? 1.0 / std::sqrt(ss) : 1.0;
    for (uint32_t k = 0; k < dim_; ++k) out[k] = static_cast<float>(raw[k] * scale);
}

uint32_t default_max_tokens(const ModelDesc &d) {
    const uint32_t train = d.hp.n_ctx_train ? d.hp.n_ctx_train : 512;
    return d.embedding.encoder ? train : std::min(train, 2048u);
}

std::vector<int32_t> fit_text(const Tokenizer &tok, std::vector<int32_t> toks, uint32_t max_tokens, bool truncate,
                              const char *whose) {
    if (toks.empty()) fail(EMBER_ERR_INVALID_ARGUMENT, "an empty text (no tokens) has no embedding");
    if (toks.size() <= max_tokens) return toks;
    if (!truncate)
        fail(EMBER_ERR_INVALID_ARGUMENT, "a text of %zu tokens is longer than %s %u (truncate, or raise max_tokens)",
             toks.size(), whose, max_tokens);
    const int32_t last = toks.back();
    const bool closing = tok.type(last) == TokenType::CONTROL && max_tokens > 1;
    toks.resize(max_tokens);
    if (closing) toks.back() = last;
    return toks;
}

void check_text_tokens(const Tokenizer &tok, const std::vector<int32_t> &toks) {
    const int32_t n_vocab = tok.n_vocab();
    for (int32_t id : toks)
        if (id < 0 || id >= n_vocab) fail(EMBER_ERR_INVALID_ARGUMENT, "token %d is outside the vocabulary (0..%d)", id, n_vocab - 1);
}

} // namespace ember
