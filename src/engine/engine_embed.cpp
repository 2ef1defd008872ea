// engine_embed.cpp — embedding requests in the engine's steps (Engine::submit_embed), and a reranking
// model's scoring requests, whose texts are (query, document) pairs and whose result is one score each.
//
// A request's texts go into the step's one forward pass, whole and in order, after the generating
// requests' decode tokens. Each text is a sequence of its own at positions 0.. with blocks reserved for
// that pass and freed after it, unpublished: an encoder's K/V rows depend on the whole text (it attends
// both ways), so no later prompt may adopt them. Its rows are then pooled as ember_embed pools them
// (embed/pooling.hpp): an embedding model's output rows, or a generating model's final normed hidden rows
// (its program's hidden_buf, which the pass returns only when a text asks).
#include "engine/engine.hpp"

#include "core/error.hpp"

#include <algorithm>

namespace ember {

uint32_t Engine::embed_max_tokens() const {
    const uint32_t model_max = std::min(default_max_tokens(model_.desc()), plan_.n_ctx);
    if (embeds_only()) return std::min(model_max, plan_.n_batch);
    // Room beside every running request's decode tokens (and drafts), so a text never waits for them.
    const uint32_t decode = plan_.n_seq_max * (plan_.spec_k + 1);
    return std::min(model_max, plan_.n_batch > decode ? plan_.n_batch - decode : 0u);
}

std::unique_ptr<EmbedWork> Engine::embed_work(std::vector<std::vector<int32_t>> texts, const EmbedRequestOptions &o) const {
    const ModelDesc &d = model_.desc();
    const bool ranks = d.embedding.pooling == Pooling::Rank;
    // A reranking model's head scores pairs: a lone text has no score, and an embedding has no query.
    if (ranks && !o.pairs)
        fail(EMBER_ERR_INVALID_ARGUMENT, "'%s' is a reranking model: it scores (query, document) pairs; give the query "
             "(ember_embed_request_params.query) and the documents as texts", model_.name().c_str());
    if (o.pairs && !ranks)
        fail(EMBER_ERR_INVALID_ARGUMENT, "a query is for a reranking model, and '%s' is not one (pooling %s): leave "
             "query NULL to embed the texts", model_.name().c_str(), pooling_name(d.embedding.pooling));
    std::unique_ptr<EmbedWork> w;
    if (embeds_only()) {
        w = std::make_unique<EmbedWork>(EmbedWork{{}, TextPooling(model_, o.pooling), 0, {}});
    } else {
        if (plan_.n_state_slots > 0)
            fail(EMBER_ERR_UNSUPPORTED, "embeddings from models with recurrent layers are not supported (%s)", d.arch.c_str());
        if (hidden_width_ == 0)
            fail(EMBER_ERR_UNSUPPORTED, "the %s model's forward pass returns no hidden rows to pool", d.arch.c_str());
        w = std::make_unique<EmbedWork>(EmbedWork{{}, TextPooling(model_, o.pooling, hidden_width_), 0, {}});
    }
    const uint32_t longest = embed_max_tokens();
    if (longest == 0)
        fail(EMBER_ERR_INVALID_ARGUMENT, "the engine's n_batch %u leaves no room for a text beside its %u decoding requests",
             plan_.n_batch, plan_.n_seq_max);
    const uint32_t max_tokens = o.max_tokens ? o.max_tokens : longest;
    if (max_tokens > longest)
        fail(EMBER_ERR_INVALID_ARGUMENT, "max_tokens %u is more than the %u tokens an engine's pass holds for a text (n_batch %u)",
             max_tokens, longest, plan_.n_batch);
    if (texts.empty()) fail(EMBER_ERR_INVALID_ARGUMENT, "an embedding request needs at least one text");
    w->texts.reserve(texts.size());
    for (std::vector<int32_t> &t : texts) {
        check_text_tokens(model_.tokenizer(), t);
        w->texts.push_back(fit_text(model_.tokenizer(), std::move(t), max_tokens, o.truncate, "the engine's"));
    }
    w->vectors.assign(w->texts.size() * w->pooling.per_text(), 0.0f);
    return w;
}

void Engine::submit_embed(const std::shared_ptr<Request> &r) {
    if (!r->embed) fail(EMBER_ERR_INTERNAL, "submit_embed: not an embedding request");
    {
        std::lock_guard<std::mutex> lock(queue_mutex_);
        if (stop_) fail(EMBER_ERR_INVALID_STATE, "the engine is shutting down");
        embed_queue_.push_back(r);
    }
    queue_cv_.notify_one();
}

void Engine::admit_embeds() {
    {
        std::lock_guard<std::mutex> lock(queue_mutex_);
        embeds_.reserve(embeds_.size() + embed_queue_.size());
        for (auto &r : embed_queue_) embeds_.push_back(std::move(r));
        embed_queue_.clear();
    }
    // Cancelled ones end here; none holds blocks between steps.
    std::erase_if(embeds_, [this](const std::shared_ptr<Request> &r) {
        if (!r->cancel) return false;
        finish(r, EMBER_REQUEST_CANCELLED);
        return true;
    });
}

void Engine::add_embed_texts(uint32_t &budget, uint32_t share, bool &starved) {
    b_embed_.clear();
    const auto copy = [](int32_t, int32_t) { fail(EMBER_ERR_INTERNAL, "an embedding text's new sequence copied a block"); };
    uint32_t taken = 0;
    for (auto &self : embeds_) {
        EmbedWork &w = *self->embed;
        for (; w.next < w.texts.size(); ++w.next) {
            const auto n = static_cast<uint32_t>(w.texts[w.next].size());
            // The step's first text always fits (embed_max_tokens); the others within the share.
            if (n > budget || (taken > 0 && taken + n > share)) return;
            EmbedFed e{self, w.next, static_cast<uint32_t>(b_tokens_.size()), n, static_cast<uint32_t>(b_logit_rows_.size()),
                       std::make_unique<kv::KvSequence>(pool_), nullptr};
            if (window_pool_) e.win = std::make_unique<kv::WindowTable>(*window_pool_, plan_.window, 0);
            if (!e.seq->reserve(n, copy) || (e.win && !e.win->reserve(n, copy))) {
                starved = true;   // blocks come back as generations end; the text waits for them
                return;
            }
            if (w.next == 0) {
                std::lock_guard<std::mutex> rl(self->mutex);
                self->state = EMBER_REQUEST_RUNNING;
            }
            for (uint32_t p = 0; p < n; ++p) {
                b_tokens_.push_back(w.texts[w.next][p]);
                b_pos_.push_back(static_cast<int32_t>(p));
                b_tables_.push_back(nullptr);   // set with the others' (step_locked)
            }
            // An embedding model's pooled rows are its output rows; a generating model's, its hidden rows.
            if (embeds_only()) {
                const TextPooling::Rows rows = w.pooling.rows(n);
                for (uint32_t k = 0; k < rows.count; ++k) b_logit_rows_.push_back(static_cast<int32_t>(e.row + rows.first + k));
            }
            b_embed_.push_back(std::move(e));
            budget -= n;
            taken += n;
        }
    }
}

void Engine::finish_embed_texts() {
    const size_t out_width = model_.desc().c.n_vocab;
    for (const EmbedFed &e : b_embed_) {
        EmbedWork &w = *e.r->embed;
        const TextPooling::Rows rows = w.pooling.rows(e.n);
        float *out = w.vectors.data() + e.text * w.pooling.per_text();
        if (embeds_only())
            w.pooling.pool(logits_.data() + size_t{e.out_row} * out_width, rows.count, out_width, out);
        else
            w.pooling.pool(hidden_.data() + size_t{e.row + rows.first} * hidden_width_, rows.count, hidden_width_, out);
        if (e.text + 1 == w.texts.size()) finish(e.r, EMBER_REQUEST_DONE);
    }
    b_embed_.clear();   // the texts' blocks go back to the pools, unpublished
    std::erase_if(embeds_, [](const std::shared_ptr<Request> &r) { return r->finished; });
}

void Engine::fail_embeds(ember_status status, const char *message) {
    for (const EmbedFed &e : b_embed_) finish(e.r, EMBER_REQUEST_FAILED, status, message);
    b_embed_.clear();
    std::erase_if(embeds_, [](const std::shared_ptr<Request> &r) { return r->finished; });
}

} // namespace ember
