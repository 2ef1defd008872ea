// sampler.hpp — logits → token, by the fixed chain documented in ember.h (penalties, greedy or
// top-k → top-p → min-p → temperature → draw).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <random>
#include <vector>

namespace ember {

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
    // Throws EMBER_ERR_INVALID_ARGUMENT for out-of-range parameters, naming the field.
    explicit Sampler(const SamplerParams &p);
    // distribution() then draw(): one uniform number from the sampler's generator per sampled token.
    int32_t sample(const float *logits, size_t n_vocab);
    // The chain's distribution for these logits. The penalties see the history and then `extra`
    // (tokens that would be accepted before this position: a verifier scores drafted positions before
    // it accepts them).
    void distribution(const float *logits, size_t n_vocab, const int32_t *extra, size_t n_extra, TokenDist &out);
    int32_t draw(const TokenDist &d);
    // A uniform number in [0, 1) from the sampler's generator (acceptance tests of speculation).
    double uniform();
    void accept(int32_t token);
    void reset();
    const SamplerParams &params() const { return p_; }
    bool greedy() const { return p_.temperature <= 0.0f; }

private:
    SamplerParams p_;
    std::mt19937_64 rng_;
    std::deque<int32_t> history_;
    struct Cand { int32_t id; float logit; };
    std::vector<Cand> cand_;          // reused between calls
    std::vector<float> penalized_;    // logits after the penalties, reused between calls
    TokenDist dist_;
};

} // namespace ember
