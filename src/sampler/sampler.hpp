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

class Sampler {
public:
    // Throws EMBER_ERR_INVALID_ARGUMENT for out-of-range parameters, naming the field.
    explicit Sampler(const SamplerParams &p);
    int32_t sample(const float *logits, size_t n_vocab);
    void accept(int32_t token);
    void reset();
    const SamplerParams &params() const { return p_; }

private:
    SamplerParams p_;
    std::mt19937_64 rng_;
    std::deque<int32_t> history_;
    struct Cand { int32_t id; float logit; };
    std::vector<Cand> cand_;   // reused between calls
};

} // namespace ember
