// sampler.hpp — logits → token, by the fixed chain documented in ember.h (penalties, greedy or
// top-k → top-p → min-p → temperature → draw).
#pragma once

#include "sampler/logit_order.hpp"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <utility>
#include <vector>

namespace ember {

namespace grammar {
class CompiledGrammar;
class GrammarMatcher;
}

struct SamplerParams {
    float temperature = 1.0f;
    int32_t top_k = 0;
    float top_p = 1.0f;
    float min_p = 0.0f;
    float repeat_penalty = 1.0f;
    float frequency_penalty = 0.0f;
    float presence_penalty = 0.0f;
    int32_t penalty_last_n = 64;
    uint64_t seed = 0;
    int32_t n_logprobs = 0;   // record the top-n log-probabilities of each sampled position (0: off)
};

// The log-probability of a token under the model's distribution (softmax of the raw logits, before
// penalties and grammar): what OpenAI's `logprobs` report.
struct TokenLogprob {
    int32_t id;
    float logprob;
};

// The distribution the chain draws from: the tokens that survive its stages and their weights
// (unnormalized; total is their sum). Greedy leaves one token. Speculative decoding compares these of
// the target and the draft model (src/spec/), so both go through exactly the chain that sampling uses.
struct TokenDist {
    std::vector<int32_t> ids;   // survivors, most probable first
    std::vector<double> w;
    double total = 0;
    double prob(int32_t id) const;   // w / total of id, 0 if it did not survive
    void clear() { ids.clear(), w.clear(), total = 0; }
};

class Sampler {
public:
    static constexpr int32_t kMaxLogprobs = 20;
    // Throws EMBER_ERR_INVALID_ARGUMENT for out-of-range parameters, naming the field.
    explicit Sampler(const SamplerParams &p);
    // distribution() then draw(): one uniform number from the sampler's generator per sampled token
    // (with a grammar and pure temperature sampling, one per draw of the rejection loop).
    int32_t sample(const float *logits, size_t n_vocab);
    // The chain's distribution for these logits. The penalties see the history and then `extra`
    // (tokens that would be accepted before this position: a verifier scores drafted positions before
    // it accepts them).
    void distribution(const float *logits, size_t n_vocab, const int32_t *extra, size_t n_extra, TokenDist &out);
    int32_t draw(const TokenDist &d);
    // The same draw with another generator (a speculative draft's own, which leaves this sampler's
    // random stream to the tokens it emits).
    int32_t draw(const TokenDist &d, std::mt19937_64 &rng) const;
    // A uniform number in [0, 1) from the sampler's generator (acceptance tests of speculation).
    double uniform();
    void accept(int32_t token);
    void reset();
    const SamplerParams &params() const { return p_; }
    bool greedy() const { return p_.temperature <= 0.0f; }

    // Constrains sampling to what the grammar allows (nullptr: no constraint). The grammar starts at
    // its beginning; accept() advances it, reset() returns it to the beginning. With a grammar,
    // distribution() throws EMBER_ERR_GRAMMAR_DEAD_END when no token is allowed, and accept() throws
    // EMBER_ERR_INVALID_ARGUMENT for a token the grammar does not allow (changing nothing).
    void set_grammar(std::shared_ptr<grammar::CompiledGrammar> g);
    bool has_grammar() const { return matcher_ != nullptr; }
    // Whether the grammar constrains the next token: false without one, and while a lazy grammar
    // (grammar.hpp's GrammarTriggers) waits for its trigger, when sampling does no grammar work at all.
    bool constrained() const;
    // The grammar position itself, to put aside and back (a grammar for one generate call).
    std::shared_ptr<grammar::GrammarMatcher> matcher_shared() const { return matcher_; }
    void set_matcher(std::shared_ptr<grammar::GrammarMatcher> m) { matcher_ = std::move(m); }
    grammar::GrammarMatcher *matcher() { return matcher_.get(); }

    // Added to tokens' logits after the penalties, before every other stage (a bias at or below kBan
    // bans the token: its logit becomes the lowest finite float, so it is never drawn while any other
    // token may be). Throws EMBER_ERR_INVALID_ARGUMENT for a negative id or a bias that is not finite;
    // ids beyond the logits' vocabulary fail sampling with EMBER_ERR_INVALID_ARGUMENT.
    static constexpr float kBan = -100.0f;
    void set_logit_bias(std::vector<std::pair<int32_t, float>> bias);

    // With n_logprobs > 0: the sampled token's log-probability and the top n of the last sample().
    const TokenLogprob &last_logprob() const { return last_logprob_; }
    const std::vector<TokenLogprob> &last_top_logprobs() const { return top_logprobs_; }

private:
    SamplerParams p_;
    std::mt19937_64 rng_;
    std::deque<int32_t> history_;
    using Cand = LogitCand;
    std::vector<Cand> cand_;          // reused between calls
    std::vector<uint64_t> sort_keys_; // sort_by_logit's working memory, reused between calls
    std::vector<float> penalized_;    // logits after the penalties, reused between calls
    TokenDist dist_;
    std::shared_ptr<grammar::GrammarMatcher> matcher_;
    std::vector<std::pair<int32_t, float>> bias_;   // set_logit_bias
    TokenLogprob last_logprob_{-1, 0.0f};
    std::vector<TokenLogprob> top_logprobs_;
    void record_logprobs(const float *logits, size_t n_vocab, int32_t token);
    std::vector<double> cumulative_;  // sample_rejecting's cumulative weights, reused between calls
    // EMBER_ERR_INVALID_ARGUMENT for no logits or logits of another vocabulary than the grammar's.
    void check_grammar_vocab(size_t n_vocab) const;
    // The logits after the penalties and the logit bias (a copy in penalized_, or `logits` itself when
    // neither applies).
    const float *penalized(const float *logits, size_t n_vocab, const int32_t *extra, size_t n_extra);
    void apply_penalties(size_t n_vocab, const int32_t *extra, size_t n_extra, bool penalize);   // on penalized_
    // Pure temperature sampling (no top-k, top-p or min-p) under a grammar: draws by rejection instead
    // of masking first (sampler.cpp says why that is exact).
    bool draws_by_rejection(size_t n_vocab) const;
    int32_t sample_rejecting(const float *logits, size_t n_vocab);
    static constexpr int kMaxRejections = 8;
};

} // namespace ember
