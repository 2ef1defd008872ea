// engine_spec.cpp — see engine_spec.hpp.
#include "engine/engine_spec.hpp"

#include "core/error.hpp"
#include "engine/engine.hpp"
#include "spec/lookup.hpp"

#include <algorithm>
#include <cstring>

namespace ember {

uint32_t draft_room(const Request &r, uint32_t k, uint32_t n_ctx) {
    if (!r.speculate || r.finished || r.pending < 0 || !r.replay.empty() || !r.seq) return 0;
    const uint32_t pos = r.seq->size();   // where the pending token goes
    if (pos + 1 >= n_ctx) return 0;
    uint32_t room = std::min({k, r.draft_len, n_ctx - 1 - pos});
    // The pass yields at most room + 1 tokens: no more than max_tokens still wants.
    if (r.max_tokens) room = r.generated + 1 >= r.max_tokens ? 0 : std::min(room, r.max_tokens - r.generated - 1);
    return room;
}

ContextParams EngineDrafter::mtp_context_params(const EnginePlan &plan) {
    ContextParams cp;
    // Each request's rows: its context and the chained drafts past it, and a spare block (a rollback
    // into a full block makes the next write copy it).
    cp.block_size = kv::kBlockSize;
    cp.n_blocks = plan.n_seq_max * ((plan.n_ctx + kMaxK + cp.block_size - 1) / cp.block_size + 1);
    cp.n_threads = plan.n_threads;
    cp.n_batch = plan.n_batch;
    cp.n_logits = plan.n_seq_max;   // one row a request
    return cp;
}

EngineDrafter::EngineDrafter(const Model &model, Backend &backend, const BackendContext &target, const EnginePlan &plan,
                             ember_spec_mode mode, uint32_t k, uint32_t ngram_max)
    : model_(model), mode_(mode), k_(k), ngram_max_(ngram_max) {
    if (mode == EMBER_SPEC_DRAFT)
        fail(EMBER_ERR_UNSUPPORTED, "an engine does not speculate with a draft model (EMBER_SPEC_LOOKUP and EMBER_SPEC_MTP it does)");
    if (mode != EMBER_SPEC_LOOKUP && mode != EMBER_SPEC_MTP) fail(EMBER_ERR_INVALID_ARGUMENT, "unknown speculation mode %d", (int)mode);
    if (k < 1 || k > kMaxK) fail(EMBER_ERR_INVALID_ARGUMENT, "an engine's draft length must be in 1..%u, got %u", kMaxK, k);
    if (mode == EMBER_SPEC_LOOKUP && (ngram_max < 1 || ngram_max > 16))
        fail(EMBER_ERR_INVALID_ARGUMENT, "lookup n-gram length must be in 1..16, got %u", ngram_max);
    if (mode != EMBER_SPEC_MTP) return;
    const ModelDesc &d = model.mtp_desc();   // throws when the file carries no such block
    const ModelDesc &target_desc = model.desc();
    if (target_desc.hidden_buf < 0)
        fail(EMBER_ERR_UNSUPPORTED, "the %s model's forward pass returns no hidden rows", model.arch().c_str());
    width_ = d.hp.n_embd;
    if (d.hidden_buf < 0 || d.bufs[static_cast<size_t>(d.hidden_buf)].width != width_ ||
        target_desc.bufs[static_cast<size_t>(target_desc.hidden_buf)].width != width_)
        fail(EMBER_ERR_INVALID_MODEL, "the model's hidden rows are not the width of its multi-token-prediction block's (%u)", width_);
    ContextParams cp = mtp_context_params(plan);
    // The block and the target take turns on one thread: one set of workers serves both.
    cp.share_threads_with = &target;
    mtp_ = model.mtp_backend_model(backend).create_context(cp);
    pool_ = std::make_unique<kv::BlockPool>(cp.n_blocks, cp.block_size);
    n_batch_ = cp.n_batch;
    n_logits_ = cp.n_logits;
    logits_.resize(size_t{n_logits_} * d.hp.n_vocab);
    hidden_.resize(size_t{n_batch_} * width_);
    inputs_.resize(size_t{n_batch_} * width_);
}

EngineDrafter::~EngineDrafter() = default;

void EngineDrafter::start(Request &r) const {
    if (!mtp_ || !r.speculate) return;
    r.mtp = std::make_unique<MtpStream>();
    r.mtp->seq = std::make_unique<kv::KvSequence>(*pool_);
    r.mtp->width = width_;
}

void EngineDrafter::eval(const std::vector<Row> &rows) {
    BackendContext *ctx = mtp_.get();
    const auto copy = [ctx](int32_t src, int32_t dst) { ctx->copy_block(src, dst); };
    const size_t n_vocab = model_.desc().hp.n_vocab;
    for (size_t off = 0; off < rows.size();) {
        const size_t end = std::min(rows.size(), off + n_batch_);
        tokens_.clear();
        pos_.clear();
        logit_rows_.clear();
        for (size_t i = off; i < end;) {
            size_t j = i;
            while (j < end && rows[j].r == rows[i].r) ++j;
            kv::KvSequence &seq = *rows[i].r->mtp->seq;
            if (!seq.reserve(static_cast<uint32_t>(j - i), copy))
                fail(EMBER_ERR_INTERNAL, "the multi-token-prediction block's KV cache is full");
            for (size_t t = i; t < j; ++t) {
                pos_.push_back(static_cast<int32_t>(seq.size() + (t - i)));
                tokens_.push_back(rows[t].token);
                std::memcpy(inputs_.data() + (t - off) * width_, rows[t].h, width_ * sizeof(float));
                if (rows[t].logits) logit_rows_.push_back(static_cast<int32_t>(t - off));
            }
            i = j;
        }
        tables_.clear();   // after every reserve: a table may move while it grows
        for (size_t t = off; t < end; ++t) tables_.push_back(rows[t].r->mtp->seq->blocks().data());
        if (logit_rows_.empty()) logit_rows_.push_back(static_cast<int32_t>(end - off - 1));   // (unused)
        Batch b;
        b.n_tokens = static_cast<uint32_t>(end - off);
        b.tokens = tokens_.data();
        b.pos = pos_.data();
        b.tables = tables_.data();
        b.n_logits = static_cast<uint32_t>(logit_rows_.size());
        b.logits_rows = logit_rows_.data();
        b.logits = logits_.data();
        b.inputs = inputs_.data();
        b.hidden = hidden_.data();
        mtp_->forward(b);
        for (size_t i = off; i < end;) {
            size_t j = i;
            while (j < end && rows[j].r == rows[i].r) ++j;
            rows[i].r->mtp->seq->commit(tokens_.data() + (i - off), static_cast<uint32_t>(j - i));
            i = j;
        }
        for (size_t l = 0; l < logit_rows_.size(); ++l) {
            const Row &row = rows[off + static_cast<size_t>(logit_rows_[l])];
            if (!row.logits) continue;
            const float *lg = logits_.data() + l * n_vocab;
            row.r->drafts.push_back(static_cast<int32_t>(std::max_element(lg, lg + n_vocab) - lg));
            const float *h = hidden_.data() + static_cast<size_t>(logit_rows_[l]) * width_;
            row.r->mtp->chain.assign(h, h + width_);
        }
        off = end;
    }
}

void EngineDrafter::propose(const std::vector<std::shared_ptr<Request>> &active, uint32_t n_ctx) {
    for (const auto &r : active) r->drafts.clear();
    if (mode_ == EMBER_SPEC_LOOKUP) {
        std::vector<int32_t> history;
        for (const auto &r : active) {
            const uint32_t room = draft_room(*r, k_, n_ctx);
            if (room == 0) continue;
            // The request's tokens so far: its prompt and what it generated, the pending token last
            // (written by this thread only, so read here without the pollers' lock).
            history.assign(r->prompt.begin(), r->prompt.end());
            history.insert(history.end(), r->tokens.begin(), r->tokens.end());
            r->drafts = spec::lookup_proposal(history, room, 1, ngram_max_);
        }
        return;
    }
    if (!mtp_) return;
    // Catch up: every request's pairs made known since the last step, the drafting ones' last with logits.
    rows_.clear();
    for (const auto &r : active) {
        if (!r->mtp || r->finished) continue;
        MtpStream &m = *r->mtp;
        m.seq->truncate(std::min(m.n_real, m.seq->size()));   // the chained drafts of the last step go
        const size_t n = m.toks.size();
        const bool drafts = n > 0 && draft_room(*r, k_, n_ctx) > 0;
        for (size_t i = 0; i < n; ++i) rows_.push_back({r.get(), m.rows.data() + i * width_, m.toks[i], drafts && i + 1 == n});
    }
    eval(rows_);
    for (const auto &r : active) {
        if (!r->mtp) continue;
        r->mtp->rows.clear();
        r->mtp->toks.clear();
        r->mtp->n_real = r->mtp->seq->size();
    }
    // Chain: each pass drafts one more token for the requests with room for it.
    const Tokenizer &tok = model_.tokenizer();
    for (uint32_t i = 1; i < k_; ++i) {
        rows_.clear();
        for (const auto &r : active)
            if (r->mtp && r->drafts.size() == i && i < draft_room(*r, k_, n_ctx) && !tok.is_eog(r->drafts.back()))
                rows_.push_back({r.get(), r->mtp->chain.data(), r->drafts.back(), true});
        if (rows_.empty()) break;
        eval(rows_);
    }
}

} // namespace ember
