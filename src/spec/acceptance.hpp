// acceptance.hpp — the lossless acceptance rule of speculative decoding (Leviathan et al. 2023; Chen et
// al. 2023): a token x drawn from the draft's distribution q is kept with probability min(1, p(x)/q(x)),
// p the target's; when it is not, the replacement is drawn from norm(max(0, p - q)). Whatever q is, the
// token that comes out is distributed exactly as p. Both p and q are the sampler chain's distributions
// (TokenDist), so temperature, top-k/p, min-p and penalties apply to both alike; greedy p is a point
// mass, which makes the rule "keep x iff it is the target's argmax, else take the argmax".
#pragma once

#include "sampler/sampler.hpp"

#include <cstdint>
#include <vector>

namespace ember::spec {

struct Verdict {
    bool accepted = false;
    int32_t token = -1;   // x if accepted, else the replacement
};

// Scratch for the residual distribution; keeps dense per-id arrays between calls (n_vocab entries).
struct AcceptScratch {
    std::vector<double> q_dense;   // q's probabilities by id, all 0 between calls
    TokenDist residual;
};

// q == nullptr means q is a point mass on x (a draft-free proposal, e.g. from n-gram lookup). Random
// numbers come from the sampler's generator, and only when the outcome is not already certain.
Verdict accept_or_replace(const TokenDist &p, const TokenDist *q, int32_t x, size_t n_vocab, Sampler &sampler,
                          AcceptScratch &scratch);

} // namespace ember::spec
