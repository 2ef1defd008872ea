#include "sampler/logit_order.hpp"

#include <algorithm>
#include <bit>

namespace ember {

namespace {
// Unsigned keys whose ascending order is the logits' descending order: a float's bits with the sign
// flipped (and all bits of a negative one) order as the floats do; complemented, they order downwards.
// -0 is taken as +0 (f + 0 is +0 for both) so that the two compare equal, as floats do. Without
// branches: the signs of a model's logits are mixed, and a mispredicted branch per token cost more than
// the rest of the key.
uint32_t descending_key(float f) {
    const uint32_t u = std::bit_cast<uint32_t>(f + 0.0f);
    const uint32_t neg = static_cast<uint32_t>(static_cast<int32_t>(u) >> 31);   // all ones when negative
    return ~(u ^ (neg | 0x80000000u));
}

// The logit back from its key (a -0 comes back as +0: every weight the chain forms from it is the same,
// exp(±0) being 1 and x - ±0 being x).
float logit_of_key(uint32_t key) {
    const uint32_t asc = ~key;
    const uint32_t nonneg = static_cast<uint32_t>(static_cast<int32_t>(asc) >> 31);   // all ones when >= +0
    return std::bit_cast<float>(asc ^ (~nonneg | 0x80000000u));
}

constexpr int kPasses = 3;
constexpr int kShift[kPasses] = {0, 11, 22};
constexpr uint32_t kBuckets = 2048;   // 11 + 11 + 10 bits
} // namespace

// A least-significant-digit radix sort of (key, id) pairs, whose order as 64-bit numbers is the chain's
// order: each pass is stable, so equal keys keep the input's order, which is ascending id. The pairs
// hold everything a candidate is, so the result is read off them in order (fetching each candidate by
// its position instead would be a random read per token). Passes whose digit is the same for every key
// are skipped. (A first pass by the top bits, then per-segment passes, measured slower at 32k and 152k
// tokens: the branchless key was what made the difference at 152k.)
void sort_by_logit(std::vector<LogitCand> &c, std::vector<uint64_t> &keys) {
    const size_t n = c.size();
    if (n < 2) return;
    if (!std::is_sorted(c.begin(), c.end(), [](const LogitCand &a, const LogitCand &b) { return a.id < b.id; }))
        std::sort(c.begin(), c.end(), [](const LogitCand &a, const LogitCand &b) { return a.id < b.id; });
    keys.resize(2 * n);
    uint64_t *a = keys.data(), *b = keys.data() + n;
    uint32_t count[kPasses * kBuckets] = {};   // 24 KiB: on the stack, no allocation per token
    for (size_t i = 0; i < n; ++i) {
        const uint32_t k = descending_key(c[i].logit);
        a[i] = (uint64_t(k) << 32) | static_cast<uint32_t>(c[i].id);
        for (int p = 0; p < kPasses; ++p) ++count[p * kBuckets + ((k >> kShift[p]) & (kBuckets - 1))];
    }
    for (int p = 0; p < kPasses; ++p) {
        uint32_t *cnt = count + p * kBuckets;
        if (std::find(cnt, cnt + kBuckets, static_cast<uint32_t>(n)) != cnt + kBuckets) continue;   // one digit for all
        uint32_t sum = 0;
        for (uint32_t d = 0; d < kBuckets; ++d) {
            const uint32_t x = cnt[d];
            cnt[d] = sum;
            sum += x;
        }
        for (size_t i = 0; i < n; ++i) b[cnt[(a[i] >> (32 + kShift[p])) & (kBuckets - 1)]++] = a[i];
        std::swap(a, b);
    }
    for (size_t i = 0; i < n; ++i) c[i] = {static_cast<int32_t>(static_cast<uint32_t>(a[i])), logit_of_key(static_cast<uint32_t>(a[i] >> 32))};
}

// A heap of the k best so far, the worst of them on top. A later token (a higher id) goes before the
// worst only with a strictly higher logit: equal logits keep the lower id.
void top_by_logit(const float *l, size_t n, size_t k, std::vector<LogitCand> &out) {
    k = std::min(k, n);
    out.clear();
    if (k == 0) return;
    auto before = [](const LogitCand &a, const LogitCand &b) { return logit_before(a, b); };
    for (size_t i = 0; i < k; ++i) out.push_back({static_cast<int32_t>(i), l[i]});
    std::make_heap(out.begin(), out.end(), before);
    float worst = out.front().logit;
    for (size_t i = k; i < n; ++i) {
        if (!(l[i] > worst)) continue;
        std::pop_heap(out.begin(), out.end(), before);
        out.back() = {static_cast<int32_t>(i), l[i]};
        std::push_heap(out.begin(), out.end(), before);
        worst = out.front().logit;
    }
    std::sort_heap(out.begin(), out.end(), before);
}

} // namespace ember
