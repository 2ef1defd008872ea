// attn_math.hpp — the arithmetic of split-K ("flash decoding") attention that does not need a GPU: which
// keys a split covers, and how partial softmax results combine. Shared by the kernels (attention.cu) and
// by tests/test_cuda_host.cpp, which checks it on the CPU against a plain softmax.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define EMBER_HD __host__ __device__ __forceinline__
#else
#define EMBER_HD inline
#endif

namespace ember::cu {

// Keys [begin, end) of split `i` of `n_splits` over n_keys keys: equal ranges of whole 32-key tiles, so
// a warp's loads start aligned to a tile; trailing splits may be empty (begin >= end) at short contexts.
struct KeyRange {
    int32_t begin, end;
};
EMBER_HD KeyRange split_range(int32_t n_keys, int32_t n_splits, int32_t i) {
    const int32_t tiles = (n_keys + 31) / 32;
    const int32_t per = (tiles + n_splits - 1) / n_splits;
    int32_t b = i * per * 32, e = b + per * 32;
    if (e > n_keys) e = n_keys;
    if (b > n_keys) b = n_keys;
    return {b, e};
}

// Split i of the keys [first, n_keys) (a sliding window's): split_range over the window, shifted.
EMBER_HD KeyRange split_range_from(int32_t first, int32_t n_keys, int32_t n_splits, int32_t i) {
    const KeyRange r = split_range(n_keys - first, n_splits, i);
    return {r.begin + first, r.end + first};
}

// The first key a query at position pos sees under a sliding window of `window` positions (0: none).
EMBER_HD int32_t window_first(int32_t pos, int32_t window) {
    return window > 0 && pos + 1 > window ? pos + 1 - window : 0;
}

// How many splits a pass uses: enough (token, head, split) items to fill the device for few tokens,
// one split per query once the queries alone do, and never more than the partials buffer holds
// (capacity in partial rows).
EMBER_HD int32_t choose_splits(int32_t n_tokens, int32_t n_head, int32_t max_keys, int32_t capacity_rows) {
    int32_t s = 1;
    const int32_t tiles = (max_keys + 31) / 32;
    while (s < 32 && s * 2 <= tiles && n_tokens * n_head * s * 2 <= 1024 && n_tokens * n_head * s * 2 <= capacity_rows)
        s *= 2;
    return s;
}

// A partial result: running maximum m of the scaled scores, l = sum exp(s - m), acc = sum exp(s - m) v.
// An empty split has l == 0 (and m = -inf). Combining rescales each by exp(m_i - M), M = max m_i.
// out[d] = sum_i exp(m_i - M) acc_i[d] / sum_i exp(m_i - M) l_i. Returns false when every split is empty.
// Dims d0, d0 + d_step, ... are written (a GPU lane takes every 32nd; the CPU test all). A sink (graph.h's
// ATTENTION_EXT; sink non-null) joins M and the normaliser as a split of l = 1 and no value.
template <class Exp>
EMBER_HD bool combine_partials(const float *part, int n_splits, int stride, int head_dim, float *out, Exp expf_,
                               int d0 = 0, int d_step = 1, const float *sink = nullptr) {
    float M = sink ? *sink : -3.0e38f;
    bool any = false;
    for (int i = 0; i < n_splits; ++i) {
        const float *p = part + i * stride;
        if (p[1] > 0.0f) {
            M = p[0] > M ? p[0] : M;
            any = true;
        }
    }
    if (!any) return false;
    float L = sink ? expf_(*sink - M) : 0.0f;
    for (int i = 0; i < n_splits; ++i) {
        const float *p = part + i * stride;
        if (p[1] > 0.0f) L += expf_(p[0] - M) * p[1];
    }
    for (int d = d0; d < head_dim; d += d_step) {
        float a = 0;
        for (int i = 0; i < n_splits; ++i) {
            const float *p = part + i * stride;
            if (p[1] > 0.0f) a += expf_(p[0] - M) * p[2 + d];
        }
        out[d] = a / L;
    }
    return true;
}

// Element j of a cache row in Q8_0 (blocks of 32: f16 scale bits then 32 int8 codes): byte offsets.
EMBER_HD uint32_t q8_scale_offset(uint32_t j) { return (j / 32) * 34; }
EMBER_HD uint32_t q8_code_offset(uint32_t j) { return (j / 32) * 34 + 2 + j % 32; }

// The cache row of position p for a sequence whose block table is `table`.
EMBER_HD int64_t cache_row(const int32_t *table, int32_t p, uint32_t block_size) {
    return static_cast<int64_t>(table[p / static_cast<int32_t>(block_size)]) * block_size + p % static_cast<int32_t>(block_size);
}

} // namespace ember::cu
