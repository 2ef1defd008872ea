// mtp_draft.cpp — see mtp_draft.hpp.
#include "spec/mtp_draft.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cstring>

namespace ember::spec {

MtpDraft::MtpDraft(Session &target, uint32_t n_threads) : model_(target.model()) {
    const ModelDesc &d = model_.mtp_desc();
    Backend &backend = backend_require(target.backend_kind());
    n_ctx_ = target.n_ctx();
    n_embd_ = d.hp.n_embd;
    n_batch_ = std::min(256u, n_ctx_);
    ContextParams cp;
    // One spare block: rolling back into a full block makes the next write copy it first (session.cpp).
    cp.n_blocks = (n_ctx_ + kv::kBlockSize - 1) / kv::kBlockSize + 1;
    cp.block_size = kv::kBlockSize;
    cp.n_threads = n_threads ? n_threads : default_thread_count();
    cp.n_batch = n_batch_;
    cp.n_logits = 1;
    // The block and the target take turns on one thread: one set of workers serves both.
    cp.share_threads_with = target.threads_context();
    ctx_ = model_.mtp_backend_model(backend).create_context(cp);
    pool_ = std::make_unique<kv::BlockPool>(cp.n_blocks, kv::kBlockSize);
    seq_ = std::make_unique<kv::KvSequence>(*pool_);
    if (d.hidden_buf < 0 || d.bufs[static_cast<size_t>(d.hidden_buf)].width != n_embd_)
        fail(EMBER_ERR_INTERNAL, "the multi-token-prediction program returns no hidden rows of the model's width");
    target.keep_hidden(true);
    if (target.hidden_width() != n_embd_)
        fail(EMBER_ERR_INVALID_MODEL, "the model's hidden rows (%u) are not the width of its multi-token-prediction block's (%u)",
             target.hidden_width(), n_embd_);
    logits_.resize(d.hp.n_vocab);
    hidden_.resize(size_t{n_batch_} * n_embd_);
    inputs_.resize(size_t{n_batch_} * n_embd_);
    pos_.resize(n_batch_);
    tables_.resize(n_batch_);
}

void MtpDraft::eval(const float *h, const int32_t *x, uint32_t n) {
    BackendContext *ctx = ctx_.get();
    if (!seq_->reserve(n, [ctx](int32_t src, int32_t dst) { ctx->copy_block(src, dst); }))
        fail(EMBER_ERR_INTERNAL, "the multi-token-prediction block's KV cache is full");
    for (uint32_t off = 0; off < n; off += n_batch_) {
        const uint32_t chunk = std::min(n_batch_, n - off);
        for (uint32_t i = 0; i < chunk; ++i) {
            pos_[i] = static_cast<int32_t>(seq_->size() + i);
            tables_[i] = seq_->blocks().data();
        }
        std::memcpy(inputs_.data(), h + size_t{off} * n_embd_, size_t{chunk} * n_embd_ * sizeof(float));
        const int32_t last = static_cast<int32_t>(chunk - 1);
        Batch b;
        b.n_tokens = chunk;
        b.tokens = x + off;
        b.pos = pos_.data();
        b.tables = tables_.data();
        b.n_logits = 1;
        b.logits_rows = &last;
        b.logits = logits_.data();
        b.inputs = inputs_.data();
        b.hidden = hidden_.data();
        ctx_->forward(b);
        seq_->commit(x + off, chunk);
    }
    // The last row's hidden row first, where chain() reads it.
    const uint32_t last_row = (n - 1) % n_batch_;
    if (last_row) std::memmove(hidden_.data(), hidden_.data() + size_t{last_row} * n_embd_, n_embd_ * sizeof(float));
}

const float *MtpDraft::catch_up(const Session &target, const std::vector<int32_t> &ctx) {
    const uint32_t P = static_cast<uint32_t>(ctx.size() - 1);   // the target's position; ctx[P] is z
    if (P == 0 || !target.hidden_row(P - 1)) return nullptr;
    // The rows still valid: made from the target's hidden rows, for the same tokens up to their pair's.
    const size_t same = static_cast<size_t>(std::mismatch(seen_.begin(), seen_.end(), ctx.begin(), ctx.end()).first - seen_.begin());
    uint32_t keep = 0;
    if (seq_->size() > 0 && same > origin_ && target.hidden_row(origin_)) keep = std::min<uint32_t>(n_real_, static_cast<uint32_t>(same - origin_ - 1));
    if (keep == 0) {
        // Start again from the first position whose hidden row the target has.
        origin_ = P - 1;
        while (origin_ > 0 && target.hidden_row(origin_ - 1)) --origin_;
    }
    // At least the last pair is evaluated, for its logits.
    keep = std::min(keep, P - 1 - origin_);
    seq_->truncate(keep);
    const uint32_t n = P - origin_ - keep;
    std::vector<float> h(size_t{n} * n_embd_);
    for (uint32_t i = 0; i < n; ++i) std::memcpy(h.data() + size_t{i} * n_embd_, target.hidden_row(origin_ + keep + i), n_embd_ * sizeof(float));
    eval(h.data(), ctx.data() + origin_ + keep + 1, n);
    n_real_ = P - origin_;
    seen_ = ctx;
    return logits_.data();
}

const float *MtpDraft::chain(int32_t x) {
    if (seq_->size() >= n_ctx_) fail(EMBER_ERR_CONTEXT_FULL, "the multi-token-prediction block's context is full");
    const std::vector<float> h(hidden_.begin(), hidden_.begin() + n_embd_);
    eval(h.data(), &x, 1);
    return logits_.data();
}

} // namespace ember::spec
