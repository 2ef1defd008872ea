// speculator.hpp — speculative generation on a session: a draft (a smaller model, or n-gram lookup in
// the text so far) proposes k tokens, the target session scores them all in one forward pass, and the
// acceptance rule (acceptance.hpp) keeps a prefix of them plus one token of the target's own, so every
// target pass yields 1..k+1 tokens and the output is distributed exactly as without speculation.
//
// A round, with z the last generated token (not yet evaluated by the target) and C what the target holds:
//   1. the draft catches up to C + z (one batched feed of what it lacks) and proposes x1..xk, drawing
//      x_i from its chain distribution q_i (the sampler's chain, with x1..x_{i-1} as pending history);
//   2. the target evaluates z, x1..xk in one pass, keeping the logits of every position;
//   3. x_i is accepted against the target's p_i in order; the first rejection yields the replacement
//      instead, and if all are accepted the last row yields a bonus token;
//   4. the target's cache is truncated past what was accepted: rejected positions are simply forgotten
//      (a target with recurrent layers kept each token's state in step 2 and takes the accepted one's).
// See ember.h (Speculative decoding) for the contract.
#pragma once

#include "session/session.hpp"
#include "spec/acceptance.hpp"
#include "spec/mtp_draft.hpp"

#include <functional>
#include <memory>
#include <random>

namespace ember::spec {

struct SpecOptions {
    const Model *draft = nullptr;   // nullptr: n-gram lookup proposals (or, with mtp, the target's own block)
    bool mtp = false;               // the target model's multi-token-prediction block proposes (mtp_draft.hpp)
    uint32_t k = 4;                 // tokens drafted per round (the start value when adaptive)
    uint32_t k_max = 8;             // adaptive: largest k
    bool adaptive = true;
    uint32_t ngram_min = 1, ngram_max = 3;
};

struct SpecStats {
    uint64_t drafted = 0, accepted = 0, target_passes = 0, generated = 0;
};

class Speculator {
public:
    static constexpr uint32_t kMaxK = 16;
    // Checks the options and, with a draft model, that its vocabulary is the target's
    // (EMBER_ERR_INVALID_ARGUMENT naming the first difference) and creates the draft session; with mtp,
    // loads the target's multi-token-prediction block (which turns on the target's hidden rows).
    Speculator(Session &target, const SpecOptions &opts, uint32_t n_threads);

    // Generates on `target` (whose logits must be valid) until max_tokens (0: no limit), an
    // end-of-generation token, or emit returning false; emit gets every token with its text. Leaves the
    // target as plain generation would: every emitted token but an end-of-generation one evaluated, logits
    // valid. Returns EMBER_OK, EMBER_END_OF_GENERATION or EMBER_STOPPED; throws EMBER_ERR_CONTEXT_FULL
    // when the context fills first (as plain generation does).
    ember_status generate(Session &target, Sampler &sampler, uint32_t max_tokens,
                          const std::function<bool(const GenStep &)> &emit);

    const SpecStats &stats() const { return stats_; }
    uint32_t k() const { return k_; }

private:
    // x1..xk for the context `ctx` (C + z), with each draft distribution in q_ (draft and MTP modes).
    void propose(const Session &target, const std::vector<int32_t> &ctx, Sampler &sampler, uint32_t k,
                 std::vector<int32_t> &out);
    // Draws up to k tokens into out from a draft whose logits come from `step` (nullptr: no more), each
    // distribution in q_.
    template <class Step> void draw_chain(const float *logits, size_t n_vocab, const Tokenizer &tok, Sampler &sampler,
                                          uint32_t k, std::vector<int32_t> &out, Step step);
    // Re-chooses k from the running acceptance rate and the measured costs of a draft step and of a
    // target pass (seconds), see adapt() in speculator.cpp.
    void adapt(uint32_t drafted, uint32_t accepted, double draft_s, double verify_s);

    SpecOptions opts_;
    uint32_t k_;
    // Running estimates (exponential averages) for adapt(): acceptance per drafted token, seconds per
    // draft step, seconds per target pass by its number of drafts; rounds seen.
    double alpha_ = 0.7, step_s_ = 0;
    double pass_s_[kMaxK + 1] = {};   // seconds of a target pass verifying k drafts (0: not measured yet)
    uint32_t rounds_ = 0;
    std::unique_ptr<Session> draft_;
    std::unique_ptr<MtpDraft> mtp_;
    // Verification by the target's own draws (the MTP draft): at each drafted position the target's token
    // is drawn from the sampler's random stream exactly as plain decoding draws it, and the draft is kept
    // while it agrees, so the output is plain decoding's token for token, sampled too; the draft then
    // draws from a generator of its own. (accept_or_replace's rule keeps more drafts when sampling, but
    // draws other random numbers than plain decoding.)
    bool exact_ = false;
    std::mt19937_64 draft_rng_{0x6d7470u};
    SpecStats stats_;
    std::vector<TokenDist> q_;
    std::vector<float> rows_;   // target logits of one round, (k + 1) x n_vocab
    TokenDist p_;
    AcceptScratch scratch_;
};

} // namespace ember::spec
