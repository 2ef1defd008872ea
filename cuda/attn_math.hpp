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

// Keys [begin, end) of a split. Splits are fixed ranges of absolute positions, `split_keys` each (a
// multiple of 32), and the tiled kernel's 32-key tiles start at absolute multiples of 32: so which keys
// a query folds together, and in what order, depends on its own position alone, never on the other
// tokens of the pass or their number. That makes attention batch-invariant (a prompt's logits are the
// same bits evaluated whole, in chunks or one token at a time, as the CPU's), which state restore,
// speculative decoding and batching rely on.
struct KeyRange {
    int32_t begin, end;
};
EMBER_HD int32_t round_up32(int32_t n) { return (n + 31) / 32 * 32; }

// The first key a query at position pos sees under a sliding window of `window` positions (0: none).
EMBER_HD int32_t window_first(int32_t pos, int32_t window) {
    return window > 0 && pos + 1 > window ? pos + 1 - window : 0;
}

// The first key a query at pos sees: its local chunk's first position under chunked local attention
// (local_chunk > 0, graph.h's ATTENTION_EXT), else window_first's.
EMBER_HD int32_t attn_first_key(int32_t pos, int32_t window, int32_t local_chunk) {
    return local_chunk > 0 ? pos / local_chunk * local_chunk : window_first(pos, window);
}

// Split i of the keys [first, n_keys): the part of [i * split_keys, (i + 1) * split_keys) inside them,
// its start moved down to a multiple of 32 (`align`, the tiled kernel, which masks keys before `first`
// itself) or not (the per-query kernel). Empty (begin >= end) where the split lies outside the keys.
EMBER_HD KeyRange split_keys_range(int32_t first, int32_t n_keys, int32_t split_keys, int32_t i, bool align) {
    int32_t b = i * split_keys, e = b + split_keys;
    const int32_t f = align ? first / 32 * 32 : first;
    if (b < f) b = f;
    if (e > n_keys) e = n_keys;
    return {b, e};
}

// Splits of split_keys positions that cover n_keys keys.
EMBER_HD int32_t splits_for(int32_t n_keys, int32_t split_keys) { return n_keys <= 0 ? 1 : (n_keys + split_keys - 1) / split_keys; }

// Keys per split in a context's passes: fixed (see above); 2 tiles, so that even a short context's
// decode step spreads over the device (768 positions: 12 splits per KV head; 256-key splits left an H200's
// 132 SMs with 24 thread blocks) and a 4k one has 64 per head.
constexpr int32_t kAttnSplitKeys = 64;

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
#if defined(__CUDA_ARCH__)
#pragma unroll 4
#endif
    for (int i = 0; i < n_splits; ++i) {
        const float *p = part + i * stride;
        if (p[1] > 0.0f) {
            M = p[0] > M ? p[0] : M;
            any = true;
        }
    }
    if (!any) return false;
    float L = sink ? expf_(*sink - M) : 0.0f;
#if defined(__CUDA_ARCH__)
#pragma unroll 4
#endif
    for (int i = 0; i < n_splits; ++i) {
        const float *p = part + i * stride;
        if (p[1] > 0.0f) L += expf_(p[0] - M) * p[1];
    }
    for (int d = d0; d < head_dim; d += d_step) {
        float a = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll 4
#endif
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
// Bytes of a cache row of n values of GGUF type `type` (F16 = 1, Q8_0 = 8, Q4_0 = 2: kv_format.cpp's
// rows); 0 for a type the cache cannot hold, or quantized rows that are not whole blocks of 32.
EMBER_HD uint64_t kv_cache_row_bytes(uint32_t type, uint64_t n) {
    if (type == 1) return n * 2;
    if ((type != 8 && type != 2) || n % 32 != 0) return 0;
    return n / 32 * (type == 8 ? 34 : 18);
}
// In Q4_0 (blocks of 32: f16 scale bits then 16 bytes, element j % 32 < 16 in the low nibble of byte
// j % 16, the others in the high one): the scale's byte offset, and element j's code 0..15 (value
// (code - 8) times the scale).
EMBER_HD uint32_t q4_scale_offset(uint32_t j) { return (j / 32) * 18; }
EMBER_HD int q4_code(const uint8_t *row, uint32_t j) {
    const uint32_t o = j % 32;
    return (row[(j / 32) * 18 + 2 + o % 16] >> (o >= 16 ? 4 : 0)) & 15;
}

// The cache row of position p for a sequence whose block table is `table`.
EMBER_HD int64_t cache_row(const int32_t *table, int32_t p, uint32_t block_size) {
    return static_cast<int64_t>(table[p / static_cast<int32_t>(block_size)]) * block_size + p % static_cast<int32_t>(block_size);
}

} // namespace ember::cu
