// attention_x86.hpp — what the AVX2 and AVX-512 attention kernels (attention_avx2.cpp,
// attention_avx512.cpp) share: reading a cache row's elements eight at a time, the fixed summation tree
// of a score, one head's online-softmax state and step. Include it from *_avx2.cpp / *_avx512.cpp files
// only: everything here has internal linkage, so each file gets its own copy compiled for its ISA (see
// simd_avx2.hpp). Both levels run these same steps, which is part of why they give the same bits.
#pragma once

#include "cpu/simd_avx2.hpp"
#include "cpu/vec_dot.hpp"

namespace ember::cpu::detail {

namespace {

inline __m256 load_h8(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p))); }

// Elements i .. i + 7 (load8) or i (at) of this head in a cache row.
struct F16Row {
    int head_off;
    __m256 load8(const uint8_t *row, int i) const { return load_h8(reinterpret_cast<const uint16_t *>(row) + i); }
    float at(const uint8_t *row, int i) const { return avx2_half_to_float(reinterpret_cast<const uint16_t *>(row)[i]); }
};
struct Q8Row {
    int head_off;
    __m256 load8(const uint8_t *row, int i) const {
        const int e = head_off + i;
        const uint8_t *b = row + static_cast<size_t>(e >> 5) * 34;   // 34 = sizeof(BlockQ8_0)
        const __m256 d = _mm256_set1_ps(avx2_half_to_float(*reinterpret_cast<const uint16_t *>(b)));
        const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(b + 2 + (e & 31)));
        return _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
    }
    float at(const uint8_t *row, int i) const {
        const int e = head_off + i;
        const uint8_t *b = row + static_cast<size_t>(e >> 5) * 34;
        return avx2_half_to_float(*reinterpret_cast<const uint16_t *>(b)) * static_cast<float>(static_cast<int8_t>(b[2 + (e & 31)]));
    }
};

// Q4_0 (GGUF's block of 18 bytes: f16 d, then 16 bytes whose low nibbles are elements 0..15 and high
// nibbles 16..31, each code c standing for (c - 8) d). Eight elements from a multiple of 8 are all low or
// all high nibbles of eight consecutive bytes.
struct Q4Row {
    int head_off;
    __m256 load8(const uint8_t *row, int i) const {
        const int e = head_off + i;
        const uint8_t *b = row + static_cast<size_t>(e >> 5) * 18;   // 18 = sizeof(BlockQ4_0)
        const int o = e & 31;
        const __m256 d = _mm256_set1_ps(avx2_half_to_float(*reinterpret_cast<const uint16_t *>(b)));
        __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(b + 2 + (o & 15)));
        if (o >= 16) q = _mm_srli_epi16(q, 4);
        q = _mm_sub_epi8(_mm_and_si128(q, _mm_set1_epi8(0x0f)), _mm_set1_epi8(8));
        return _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
    }
    float at(const uint8_t *row, int i) const {
        const int e = head_off + i;
        const uint8_t *b = row + static_cast<size_t>(e >> 5) * 18;
        const int o = e & 31;
        const int c = (b[2 + (o & 15)] >> (o >= 16 ? 4 : 0)) & 15;
        return avx2_half_to_float(*reinterpret_cast<const uint16_t *>(b)) * static_cast<float>(c - 8);
    }
};

// Keeps v in a register: GCC otherwise folds a load that two heads' FMAs share into both, doubling the
// loads of loops that the load ports then bound (attend_heads: AVX2 level 9.3 -> 8.2 ms for a TinyLlama
// layer's prefill of 512 tokens, EMBER_KERNEL_BENCH=attention test_cpu_kernels).
inline void in_register(__m256 &v) { asm("" : "+x"(v)); }

// Lane j of the result is the sum of the 8 lanes of a_j, added in one fixed tree: within each 128-bit
// half by hadd, then the halves. The same tree for one key or four, so a score does not depend on
// whether its key fell in a group of four, which is decided by where the runs of a tile start.
inline __m128 hsum4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

// One head's online softmax: the running maximum m and sum l, the unnormalised output, and the current
// tile's scores s and weights pr.
struct HeadState {
    alignas(32) float acc[kMaxHeadDim];
    alignas(32) float s[kAttnTile];
    alignas(32) float pr[kAttnTile];
    float m, l;
    void init(int hd) {
        for (int i = 0; i < hd; ++i) acc[i] = 0;
        m = -__builtin_inff();
        l = 0;
    }
};

// The online softmax of a block of (token, head) pairs (attend_heads): pair i's running maximum m[i]
// and sum l[i], its unnormalised output at acc + i hd, its current tile's weights at pr + i kAttnTile
// and the factor corr[i] its output needs first.
struct BlockState {
    alignas(64) float acc[kAttnBlockFloats];
    alignas(64) float pr[kMaxAttnBlockHeads * kAttnTile];
    float m[kMaxAttnBlockHeads], l[kMaxAttnBlockHeads], corr[kMaxAttnBlockHeads];
    void init(int n, int hd) {
        for (int i = 0; i < n * hd; ++i) acc[i] = 0;
        for (int i = 0; i < n; ++i) m[i] = -__builtin_inff(), l[i] = 0;
    }
};

// A tile's scores made final: the soft cap where the model has one, and -inf for the positions past its
// nk keys (padding, whose weights softmax_step masks to 0).
inline void finish_scores(const AttnHead &h, float *s, int nk) {
    if (h.softcap > 0) attn_softcap(s, nk, h.softcap);
    for (int j = nk; j < kAttnTile; ++j) s[j] = -__builtin_inff();
}

// The tile's maximum score: lane-wise over its four 8-score pieces in order, then avx2_hmax's tree.
inline float tile_max(const float *s) {
    __m256 vmax = _mm256_load_ps(s);
    for (int c = 8; c < kAttnTile; c += 8) vmax = _mm256_max_ps(vmax, _mm256_load_ps(s + c));
    return avx2_hmax(vmax);
}

// From the tile's scores s: the weights pr = e^(s - m_new) (the padding masked to exactly 0: the
// clamped exp leaves ~1e-38), l and m brought up to date; returns the factor the accumulator needs
// first.
inline float softmax_step(const float *s, float *pr, float &m, float &l) {
    const float tmax = tile_max(s);
    const float m_new = m > tmax ? m : tmax;
    const __m256 mv = _mm256_set1_ps(m_new);
    __m256 lsum = _mm256_setzero_ps();
    for (int c = 0; c < kAttnTile; c += 8) {
        const __m256 live = _mm256_cmp_ps(_mm256_load_ps(s + c), _mm256_set1_ps(-__builtin_inff()), _CMP_NEQ_OQ);
        const __m256 p = _mm256_and_ps(avx2_exp(_mm256_sub_ps(_mm256_load_ps(s + c), mv)), live);
        _mm256_store_ps(pr + c, p);
        lsum = _mm256_add_ps(lsum, p);
    }
    // Rescale what came before. On the first tile m = -inf: the clamped exp gives ~1e-38 times l = 0
    // and acc = 0, still 0.
    const float corr = _mm256_cvtss_f32(avx2_exp(_mm256_set1_ps(m - m_new)));
    l = l * corr + avx2_hsum(lsum);
    m = m_new;
    return corr;
}

// The output, acc / l (times the sink's factor), 8 elements at a time: GCC at -O2 leaves the plain loop
// scalar (out might alias acc), and at 64 dims that was ~6 % of a prefill's attention.
inline void finish(const AttnHead &a, const float *acc, float m, float l) {
    float corr;
    const float inv = attn_finish(a, m, l, &corr);
    const __m256 iv = _mm256_set1_ps(inv);
    int i = 0;
    for (; i + 8 <= a.head_dim; i += 8) _mm256_storeu_ps(a.out + i, _mm256_mul_ps(_mm256_loadu_ps(acc + i), iv));
    for (; i < a.head_dim; ++i) a.out[i] = acc[i] * inv;
}

// The token of a block (attend_heads: n heads each) that sees the most keys: its tiles cover the
// others' (they share the table and first_key).
inline const AttnHead &block_lead(const AttnHead *a, int n, int n_tok) {
    const AttnHead *lead = a;
    for (int t = 1; t < n_tok; ++t)
        if (a[t * n].n_keys > lead->n_keys) lead = a + t * n;
    return *lead;
}

// Rows already widened to f32, one after another (attend_heads' tile buffer).
struct F32Row {
    int head_off;
    __m256 load8(const uint8_t *row, int i) const { return _mm256_loadu_ps(reinterpret_cast<const float *>(row) + i); }
    float at(const uint8_t *row, int i) const { return reinterpret_cast<const float *>(row)[i]; }
};

// The tile's K or V rows of this head (found by runs) widened once into buf, key j at buf + j * hd.
template <class Row>
inline void widen_tile(const Row &row, const uint8_t *src, size_t stride, const AttnRuns &runs, int hd, float *buf) {
    for (int r = 0; r < runs.n; ++r) {
        const uint8_t *p = src + runs.off[r];
        for (int j = runs.start[r]; j < runs.start[r + 1]; ++j, p += stride)
            for (int i = 0; i < hd; i += 8) _mm256_store_ps(buf + j * hd + i, row.load8(p, i));
    }
}

} // namespace

} // namespace ember::cpu::detail
