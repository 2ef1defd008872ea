// speculator.cpp — see speculator.hpp for the round; ember.h for the contract.
#include "spec/speculator.hpp"

#include "core/error.hpp"
#include "spec/lookup.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace ember::spec {

namespace {

// The draft must speak the target's vocabulary: same size, same special tokens, same piece for every id.
void check_vocab(const Model &target, const Model &draft) {
    const Tokenizer &a = target.tokenizer(), &b = draft.tokenizer();
    if (a.n_vocab() != b.n_vocab() || target.desc().hp.n_vocab != draft.desc().hp.n_vocab)
        fail(EMBER_ERR_INVALID_ARGUMENT, "draft model's vocabulary has %d tokens, the target's %d", b.n_vocab(), a.n_vocab());
    if (a.bos() != b.bos() || a.eos() != b.eos())
        fail(EMBER_ERR_INVALID_ARGUMENT, "draft model's BOS/EOS (%d/%d) differ from the target's (%d/%d)", b.bos(), b.eos(),
             a.bos(), a.eos());
    for (int32_t id = 0; id < a.n_vocab(); ++id)
        if (a.token_to_piece(id, true) != b.token_to_piece(id, true) || a.is_eog(id) != b.is_eog(id))
            fail(EMBER_ERR_INVALID_ARGUMENT, "draft model's vocabulary differs from the target's at token %d", id);
}

} // namespace

Speculator::Speculator(Session &target, const SpecOptions &opts, uint32_t n_threads) : opts_(opts), k_(opts.k) {
    if (opts.k < 1 || opts.k > kMaxK) fail(EMBER_ERR_INVALID_ARGUMENT, "draft length k must be in 1..%u, got %u", kMaxK, opts.k);
    if (opts.adaptive && (opts.k_max < opts.k || opts.k_max > kMaxK))
        fail(EMBER_ERR_INVALID_ARGUMENT, "k_max must be in k..%u, got %u", kMaxK, opts.k_max);
    if (opts.mtp && opts.draft) fail(EMBER_ERR_INVALID_ARGUMENT, "a draft model and the model's own MTP block exclude each other");
    if (!opts.draft && !opts.mtp && (opts.ngram_min < 1 || opts.ngram_max < opts.ngram_min || opts.ngram_max > 16))
        fail(EMBER_ERR_INVALID_ARGUMENT, "lookup n-gram lengths must satisfy 1 <= ngram_min <= ngram_max <= 16");
    if (opts.draft) {
        if (opts.draft->vocab_only()) fail(EMBER_ERR_INVALID_ARGUMENT, "the draft model was loaded vocab-only");
        check_vocab(target.model(), *opts.draft);
        SessionOptions so;
        so.n_ctx = target.n_ctx();
        so.n_threads = n_threads;
        so.backend = target.backend_kind();
        so.placement = target.placement_request();   // the draft placed by the target's rule
        // Draft and target take turns on the same thread: one set of workers serves both (two pools
        // would each spin for a while after their pass on the cores the other's pass needs).
        so.share_threads_with = &target;
        draft_ = std::make_unique<Session>(*opts.draft, so);
    }
    if (opts.mtp) mtp_ = std::make_unique<MtpDraft>(target, n_threads);
    exact_ = opts.mtp;
}

// With acceptance rate a per drafted token (each accepted independently, as a model), a round of k
// drafts yields E(k) = (1 - a^(k+1)) / (1 - a) tokens and costs k draft steps and one target pass of
// k + 1 tokens; the k in 1..k_max with the most tokens per second is kept. Costs are measured rather
// than assumed because they decide everything: a draft a quarter as costly as the target wants k of
// 2-3 at a = 0.75, n-gram lookup (nearly free) the largest k its acceptance supports. The target pass
// is timed per size, because its cost is not flat in k: the CPU multiplies up to 4 tokens in one pass
// over the weights, so 5 tokens cost ~1.3x what 4 do (stories15M F32); a size not yet measured is
// taken at its nearest smaller measured one, which makes the next larger k worth a try, and one below
// all measured sizes at the smallest.
void Speculator::adapt(uint32_t drafted, uint32_t accepted, double draft_s, double verify_s) {
    if (!opts_.adaptive || drafted == 0) return;
    const double w = rounds_ == 0 ? 1.0 : 0.15;   // the first round sets the estimates, later ones move them
    alpha_ += w * (static_cast<double>(accepted) / drafted - alpha_);
    step_s_ += w * (draft_s / drafted - step_s_);
    double &pass = pass_s_[drafted];
    pass = pass == 0 ? verify_s : pass + 0.15 * (verify_s - pass);
    ++rounds_;
    const double a = std::clamp(alpha_, 0.01, 0.99);
    // Sizes below the smallest measured one take its cost (a pass of fewer tokens costs no more).
    double known = 0;
    for (uint32_t k = 1; k <= kMaxK && known == 0; ++k) known = pass_s_[k];
    double best = -1;
    for (uint32_t k = 1; k <= opts_.k_max; ++k) {
        if (pass_s_[k] > 0) known = pass_s_[k];
        const double rate = (1 - std::pow(a, k + 1)) / (1 - a) / (k * step_s_ + known);
        if (rate > best) best = rate, k_ = k;
    }
}

template <class Step>
void Speculator::draw_chain(const float *logits, size_t n_vocab, const Tokenizer &tok, Sampler &sampler, uint32_t k,
                            std::vector<int32_t> &out, Step step) {
    if (q_.size() < k) q_.resize(k);
    for (uint32_t i = 0; i < k && logits; ++i) {
        // The draft's distribution through the same chain, with the drafted tokens as pending history.
        sampler.distribution(logits, n_vocab, out.data(), out.size(), q_[i]);
        const int32_t x = exact_ ? sampler.draw(q_[i], draft_rng_) : sampler.draw(q_[i]);
        out.push_back(x);
        if (tok.is_eog(x)) break;   // nothing worth drafting after the end
        if (i + 1 < k) logits = step(x);
    }
}

void Speculator::propose(const Session &target, const std::vector<int32_t> &ctx, Sampler &sampler, uint32_t k,
                         std::vector<int32_t> &out) {
    out.clear();
    if (k == 0) return;
    const Tokenizer &tok = target.model().tokenizer();
    if (mtp_) {
        draw_chain(mtp_->catch_up(target, ctx), target.n_vocab(), tok, sampler, k, out,
                   [&](int32_t x) { return mtp_->chain(x); });
        return;
    }
    if (!draft_) {
        out = lookup_proposal(ctx, k, opts_.ngram_min, opts_.ngram_max);
        return;
    }
    // Catch up with ctx: keep the common prefix, evaluate the rest (at least one token, for logits).
    const std::vector<int32_t> &held = draft_->tokens();
    size_t common = static_cast<size_t>(std::mismatch(held.begin(), held.end(), ctx.begin(), ctx.end()).first - held.begin());
    if (common == ctx.size()) --common;
    draft_->truncate(static_cast<uint32_t>(common));
    draft_->feed(ctx.data() + common, ctx.size() - common);
    draw_chain(draft_->logits(), draft_->n_vocab(), tok, sampler, k, out, [&](int32_t x) {
        draft_->feed(&x, 1);
        return draft_->logits();
    });
}

ember_status Speculator::generate(Session &target, Sampler &sampler, uint32_t max_tokens,
                                  const std::function<bool(const GenStep &)> &emit) {
    if (!target.logits()) fail(EMBER_ERR_INVALID_STATE, "no logits: feed the prompt before generating");
    if (target.position() >= target.n_ctx()) fail(EMBER_ERR_CONTEXT_FULL, "the context is full (%u tokens)", target.n_ctx());
    const Tokenizer &tok = target.model().tokenizer();
    const size_t n_vocab = target.n_vocab();
    const uint32_t n_ctx = target.n_ctx();
    uint32_t count = 0;
    ember_status status = EMBER_OK;
    // Emits one token; false when generation ends with it (status says why).
    auto emit_token = [&](int32_t t) {
        GenStep step;
        step.token = t;
        step.end_of_generation = tok.is_eog(t);
        step.text = target.text_of(t);
        ++count;
        ++stats_.generated;
        const bool go_on = emit(step);
        if (step.end_of_generation) return status = EMBER_END_OF_GENERATION, false;
        if (!go_on) return status = EMBER_STOPPED, false;
        if (max_tokens && count >= max_tokens) return status = EMBER_OK, false;
        return true;
    };

    // The first token comes from the logits the session has; it is the pending token of round one.
    int32_t z = sampler.sample(target.logits(), n_vocab);
    sampler.accept(z);
    if (!emit_token(z)) {
        if (status != EMBER_END_OF_GENERATION) target.feed(&z, 1), ++stats_.target_passes;
        return status;
    }
    std::vector<int32_t> ctx, xs, batch;
    for (;;) {
        // Here the target holds C, z is generated but not evaluated, z is no end of generation, |C| < n_ctx.
        const uint32_t pos_z = target.position();
        uint32_t k = std::min(k_, n_ctx - pos_z - 1);
        // No more drafts than tokens still wanted: the round adds one of the target's own (count < max).
        if (max_tokens) k = std::min(k, max_tokens - count - 1);
        ctx.assign(target.tokens().begin(), target.tokens().end());
        ctx.push_back(z);
        const auto t0 = std::chrono::steady_clock::now();
        propose(target, ctx, sampler, k, xs);
        const auto t1 = std::chrono::steady_clock::now();
        const uint32_t kk = static_cast<uint32_t>(xs.size());
        batch.assign(1, z);
        batch.insert(batch.end(), xs.begin(), xs.end());
        rows_.resize((kk + 1) * n_vocab);
        // Keeping each drafted token's recurrent state (a hybrid target) makes the rollback below take one
        // instead of re-feeding the accepted tokens (Session::truncate).
        target.feed(batch.data(), batch.size(), rows_.data(), nullptr, true);
        const auto t2 = std::chrono::steady_clock::now();
        ++stats_.target_passes;
        stats_.drafted += kk;

        // Row r holds the logits after batch token r, i.e. after z, x_0, .., x_{r-1}.
        uint32_t m = 0;
        int32_t next = -1;
        bool more = true;
        for (uint32_t i = 0; i < kk && more; ++i) {
            sampler.distribution(rows_.data() + i * n_vocab, n_vocab, nullptr, 0, p_);
            Verdict v;
            if (exact_) {
                v.token = sampler.draw(p_);
                v.accepted = v.token == xs[i];
            } else {
                v = accept_or_replace(p_, draft_ ? &q_[i] : nullptr, xs[i], n_vocab, sampler, scratch_);
            }
            sampler.accept(v.token);
            if (!v.accepted) {
                next = v.token;
                break;
            }
            ++m;
            ++stats_.accepted;
            more = emit_token(xs[i]);
        }
        adapt(kk, m, std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t2 - t1).count());
        if (!more) {
            // Stopped at an accepted token: keep what plain generation would have evaluated (all of
            // them but an end of generation), with the logits after it.
            const uint32_t keep = m - (status == EMBER_END_OF_GENERATION ? 1 : 0);
            target.truncate(pos_z + 1 + keep, rows_.data() + keep * n_vocab);
            return status;
        }
        if (next < 0) {
            // All accepted: the bonus token from the last row, if the context has room for it.
            if (pos_z + 1 + kk >= n_ctx) fail(EMBER_ERR_CONTEXT_FULL, "the context is full (%u tokens)", n_ctx);
            sampler.distribution(rows_.data() + kk * n_vocab, n_vocab, nullptr, 0, p_);
            next = sampler.draw(p_);
            sampler.accept(next);
        }
        // Forget the rejected positions; the logits after the last accepted one come from its row.
        if (m < kk) target.truncate(pos_z + 1 + m, rows_.data() + m * n_vocab);
        z = next;
        if (!emit_token(z)) {
            if (status != EMBER_END_OF_GENERATION) target.feed(&z, 1), ++stats_.target_passes;
            return status;
        }
    }
}

} // namespace ember::spec
