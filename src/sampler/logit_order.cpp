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

constexpr uint32_t kTopBits = 11;                       // the first pass: sign, exponent, 2 mantissa bits
constexpr uint32_t kTopBuckets = 1u << kTopBits;
constexpr uint32_t kLowBits = 7, kLowPasses = 3;        // then the low 21 bits, per segment
constexpr uint32_t kLowBuckets = 1u << kLowBits;
constexpr size_t kSmallSegment = 64;                    // sorted by comparison

// Sorts the pairs of one segment by the key's low 21 bits, stably, in three passes of 7 bits whose
// histograms one read gathers (small digits: a segment holds a few thousand pairs, and the buckets'
// bookkeeping must not outweigh them). tmp is as long as seg.
void sort_segment_low(uint64_t *seg, uint64_t *tmp, size_t len) {
    uint32_t count[kLowPasses][kLowBuckets] = {};
    for (size_t i = 0; i < len; ++i) {
        const uint32_t k = static_cast<uint32_t>(seg[i] >> 32);
        for (uint32_t p = 0; p < kLowPasses; ++p) ++count[p][(k >> (p * kLowBits)) & (kLowBuckets - 1)];
    }
    uint64_t *src = seg, *dst = tmp;
    for (uint32_t p = 0; p < kLowPasses; ++p) {
        uint32_t *cnt = count[p];
        if (std::find(cnt, cnt + kLowBuckets, static_cast<uint32_t>(len)) != cnt + kLowBuckets) continue;   // one digit
        uint32_t sum = 0;
        for (uint32_t d = 0; d < kLowBuckets; ++d) {
            const uint32_t x = cnt[d];
            cnt[d] = sum;
            sum += x;
        }
        const uint32_t shift = 32 + p * kLowBits;
        for (size_t i = 0; i < len; ++i) dst[cnt[(src[i] >> shift) & (kLowBuckets - 1)]++] = src[i];
        std::swap(src, dst);
    }
    if (src != seg) std::copy(src, src + len, seg);
}
} // namespace

// A radix sort of (key, id) pairs, whose order as 64-bit numbers is the chain's order (key, then id);
// the pairs hold everything a candidate is, so the result is read off them in order (fetching each
// candidate by its position instead would be a random read per token). The first pass goes by the
// key's top 11 bits: a model's logits fall into few such ranges, so it writes to few places at once
// and leaves segments small enough for the cache; each segment is then sorted by its low 21 bits (or,
// when small, by comparison). Sorting everything by the low digits first (plain LSD) scatters a 152k
// vocabulary's pairs over thousands of places per pass and runs from memory.
void sort_by_logit(std::vector<LogitCand> &c, std::vector<uint64_t> &keys) {
    const size_t n = c.size();
    if (n < 2) return;
    if (!std::is_sorted(c.begin(), c.end(), [](const LogitCand &a, const LogitCand &b) { return a.id < b.id; }))
        std::sort(c.begin(), c.end(), [](const LogitCand &a, const LogitCand &b) { return a.id < b.id; });
    keys.resize(2 * n);
    uint64_t *a = keys.data(), *b = keys.data() + n;
    uint32_t end[kTopBuckets] = {};   // 8 KiB on the stack: no allocation per token
    for (size_t i = 0; i < n; ++i) {
        a[i] = (uint64_t(descending_key(c[i].logit)) << 32) | static_cast<uint32_t>(c[i].id);
        ++end[a[i] >> (64 - kTopBits)];
    }
    uint32_t sum = 0;
    for (uint32_t d = 0; d < kTopBuckets; ++d) {   // end[d]: first where segment d starts, after the scatter where it ends
        const uint32_t x = end[d];
        end[d] = sum;
        sum += x;
    }
    for (size_t i = 0; i < n; ++i) b[end[a[i] >> (64 - kTopBits)]++] = a[i];
    for (uint32_t d = 0, begin = 0; d < kTopBuckets; begin = end[d], ++d) {
        const size_t len = end[d] - begin;
        if (len <= 1) continue;
        if (len <= kSmallSegment) std::sort(b + begin, b + end[d]);
        else sort_segment_low(b + begin, a + begin, len);
    }
    for (size_t i = 0; i < n; ++i) c[i] = {static_cast<int32_t>(static_cast<uint32_t>(b[i])), logit_of_key(static_cast<uint32_t>(b[i] >> 32))};
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
