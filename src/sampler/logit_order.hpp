// logit_order.hpp — candidates in the sampling chain's order, highest logit first and lowest id among
// equal logits, in O(n).
//
// The chain without top-k (top-p, min-p or plain temperature sampling) needs every candidate in that
// order: the draw walks the cumulative weights in it, and the total it draws against is their sum formed
// in it (a double sum's rounding depends on its order, so the same token for the same seed needs the
// same order of additions). A comparison sort of the whole vocabulary cost 3–8 ms per token at 32k
// tokens; a radix sort of the logits' bits and the ids gives the same permutation (the order is total:
// ids break ties) in a few linear passes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ember {

struct LogitCand {
    int32_t id;
    float logit;
};

// The chain's order as a comparison: a before b.
inline bool logit_before(const LogitCand &a, const LogitCand &b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// Sorts c by logit_before, as std::sort(c, logit_before) would (-0 and +0 are equal logits; no logit may
// be NaN, for which no order is defined; a -0 logit comes back as +0). keys is working memory kept by the
// caller between calls. Linear when c is in ascending id order (as the sampler gathers it); otherwise
// it is first put so.
void sort_by_logit(std::vector<LogitCand> &c, std::vector<uint64_t> &keys);

// The first k of tokens 0..n-1 by their logits l in the chain's order, in that order, into out: what
// sorting them all and keeping k gives (top-k, and the grammar's look among the best few), in one pass
// over l that sets most tokens aside with a single comparison.
void top_by_logit(const float *l, size_t n, size_t k, std::vector<LogitCand> &out);

} // namespace ember
