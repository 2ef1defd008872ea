// embedder.cpp — Embedder (embedder.hpp): packing texts into passes, pooling, Matryoshka, normalisation,
// and the reranker's pairs.
#include "embed/embedder.hpp"

#include "core/error.hpp"
#include "core/host_memory.hpp"
#include "embed/rerank_pair.hpp"

#include <algorithm>
#include <cmath>

namespace ember {

namespace {

constexpr uint32_t kBlockSize = 16;
// Texts per pass at most (each takes at least one cache block of its own).
constexpr uint32_t kMaxSeqPerPass = 256;

PoolingOptions pooling_options(const Model &model, const EmbedOptions &opts) {
    if (model.vocab_only()) fail(EMBER_ERR_INVALID_ARGUMENT, "the model was loaded vocab-only; load it with weights to embed");
    return {opts.pooling, opts.dimensions, opts.normalize};
}

} // namespace

Embedder::Embedder(const Model &model, const EmbedOptions &opts)
    : model_(model), opts_(opts), pooling_(model, pooling_options(model, opts)) {
    const ModelDesc &d = model.desc();
    const uint32_t train = d.hp.n_ctx_train ? d.hp.n_ctx_train : 512;
    max_tokens_ = opts.max_tokens ? opts.max_tokens : default_max_tokens(d);
    if (d.embedding.encoder && max_tokens_ > train)
        fail(EMBER_ERR_INVALID_ARGUMENT, "max_tokens %u is past the model's %u positions", max_tokens_, train);
    if (max_tokens_ > (1u << 20)) fail(EMBER_ERR_INVALID_ARGUMENT, "max_tokens %u is too large", max_tokens_);
    n_batch_ = std::max(opts.n_batch ? opts.n_batch : 2048u, max_tokens_);
    if (opts.n_threads == 0 || opts.n_threads > 256) fail(EMBER_ERR_INVALID_ARGUMENT, "n_threads %u", opts.n_threads);

    Backend &backend = backend_require(opts.backend);
    if (state_bytes(d.c) > 0) fail(EMBER_ERR_UNSUPPORTED, "embeddings from models with recurrent layers are not supported");
    ContextParams cp;
    cp.block_size = kBlockSize;
    n_blocks_ = n_batch_ / kBlockSize + kMaxSeqPerPass;
    cp.n_blocks = n_blocks_;
    cp.n_threads = opts.n_threads;
    cp.n_batch = n_batch_;
    cp.n_logits = n_batch_;   // mean pooling reads every row
    const uint64_t bytes = backend.context_bytes(d.c, cp) + uint64_t{n_batch_} * pooling_.width() * sizeof(float);
    if (backend.kind() == EMBER_BACKEND_CPU) {
        const uint64_t weights = model.cpu_weights_reserve(bytes);
        check_host_memory(bytes + weights, "an embedder's context");
    }
    ctx_ = model.backend_model(backend).create_context(cp);
    outputs_.resize(size_t{n_batch_} * pooling_.width());
}

Embedder::~Embedder() = default;

void Embedder::run_pass(const std::vector<std::vector<int32_t>> &texts, size_t i0, size_t i1, float *out) {
    tokens_.clear(), pos_.clear(), rows_.clear(), tables_.clear(), blocks_.clear();
    // Each text's block table: consecutive block ids, so one vector holds them all (sized first: tables_
    // points into it).
    size_t n_blocks = 0;
    for (size_t i = i0; i < i1; ++i) n_blocks += (texts[i].size() + kBlockSize - 1) / kBlockSize;
    blocks_.resize(n_blocks);
    for (size_t b = 0; b < n_blocks; ++b) blocks_[b] = static_cast<int32_t>(b);
    size_t block = 0;
    for (size_t i = i0; i < i1; ++i) {
        const std::vector<int32_t> &t = texts[i];
        const int32_t *table = blocks_.data() + block;
        block += (t.size() + kBlockSize - 1) / kBlockSize;
        const int32_t first = static_cast<int32_t>(tokens_.size());
        for (size_t p = 0; p < t.size(); ++p) {
            tokens_.push_back(t[p]);
            pos_.push_back(static_cast<int32_t>(p));
            tables_.push_back(table);
        }
        const TextPooling::Rows r = pooling_.rows(static_cast<uint32_t>(t.size()));
        for (uint32_t k = 0; k < r.count; ++k) rows_.push_back(first + static_cast<int32_t>(r.first + k));
    }
    Batch b;
    b.n_tokens = static_cast<uint32_t>(tokens_.size());
    b.tokens = tokens_.data();
    b.pos = pos_.data();
    b.tables = tables_.data();
    b.n_logits = static_cast<uint32_t>(rows_.size());
    b.logits_rows = rows_.data();
    b.logits = outputs_.data();
    ctx_->forward(b);

    const size_t w = pooling_.width();
    size_t row = 0;
    for (size_t i = i0; i < i1; ++i) {
        const uint32_t count = pooling_.rows(static_cast<uint32_t>(texts[i].size())).count;
        pooling_.pool(outputs_.data() + row * w, count, w, out + (i - i0) * pooling_.per_text());
        row += count;
    }
}

void Embedder::embed_tokens(const std::vector<std::vector<int32_t>> &in, float *out) {
    std::vector<std::vector<int32_t>> texts;
    texts.reserve(in.size());
    for (const std::vector<int32_t> &t : in) {
        check_text_tokens(model_.tokenizer(), t);
        texts.push_back(fit_text(model_.tokenizer(), t, max_tokens_, opts_.truncate, "the embedder's"));
    }
    const size_t per = pooling_.per_text();
    for (size_t i0 = 0; i0 < texts.size();) {
        // As many whole texts as the pass holds.
        size_t i1 = i0, n_tok = 0, n_blk = 0;
        while (i1 < texts.size() && i1 - i0 < kMaxSeqPerPass) {
            const size_t len = texts[i1].size(), blk = (len + kBlockSize - 1) / kBlockSize;
            if (n_tok + len > n_batch_ || n_blk + blk > n_blocks_) break;
            n_tok += len, n_blk += blk, ++i1;
        }
        run_pass(texts, i0, i1, out + i0 * per);
        i0 = i1;
    }
}

void Embedder::embed(const std::vector<std::string_view> &texts, float *out) {
    if (ranks()) fail(EMBER_ERR_INVALID_ARGUMENT, "'%s' is a reranking model: it scores (query, document) pairs (ember_rerank)",
                      model_.name().c_str());
    std::vector<std::vector<int32_t>> toks;
    toks.reserve(texts.size());
    for (std::string_view t : texts) toks.push_back(model_.tokenizer().tokenize(t, true, false));
    embed_tokens(toks, out);
}

void Embedder::rerank(std::string_view query, const std::vector<std::string_view> &docs, float *scores) {
    if (!ranks())
        fail(EMBER_ERR_INVALID_ARGUMENT, "'%s' is not a reranking model (pooling %s): embed the query and documents and "
             "compare the vectors instead", model_.name().c_str(), pooling_name(pooling()));
    std::vector<std::vector<int32_t>> toks;
    toks.reserve(docs.size());
    for (std::string_view d : docs) toks.push_back(rerank_pair_tokens(model_, query, d));
    embed_tokens(toks, scores);
}

} // namespace ember
