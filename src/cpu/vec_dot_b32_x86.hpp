// vec_dot_b32_x86.hpp — the table formats' row tile (IQ4_NL, IQ4_XS, MXFP4; layouts in core/dtype.hpp),
// shared by the AVX2 and the AVX-512 levels, which differ only in how they form the integer products
// (Dot). Include it from *_avx2.cpp / *_avx512.cpp files only: everything here has internal linkage (an
// anonymous namespace), so each file gets its own copy compiled for its ISA (see simd_avx2.hpp).
//
// Dot::dot2(a1, s1, a2, s2) returns, in each of 8 int32 lanes, the exact sum of the 8 products of the
// unsigned bytes a1, a2 and the signed bytes s1, s2 in that lane. Exact integers either way, so both
// levels give the same bits.
#pragma once

#include "core/dtype.hpp"
#include "cpu/matmul_avx2.hpp"
#include "cpu/simd_avx2.hpp"
#include "cpu/vec_dot.hpp"

namespace ember::cpu::detail {

namespace {

inline __m256i bytes16(const int8_t *b) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(b)));
}

// A 16-entry table in both 128-bit halves, for byte shuffles.
inline __m256i table_of(const int8_t *t) { return bytes16(t); }

// ---- the table formats (IQ4_NL, IQ4_XS, MXFP4), two blocks of 32 at a time ------------------------------
// Their blocks have one scale each (IQ4_XS's d * (ls - 32) is exact in float), so the integer part of a
// block is a plain sum of table entries times activations, and two blocks share every vector operation:
// the low nibbles of blocks j and j + 1 (their elements 0..15) make one 256-bit index vector, the high
// nibbles (16..31) another, and the activations are permuted to match (once per token, for all rows).
// No cross-lane shuffle of weights is needed, and four rows' totals of both blocks come out of three
// hadds as [rows of block j | rows of block j + 1]. A last odd block pairs with zero weights and zero
// activations.
struct Pair {
    __m256i lo, hi;   // table entries: [block j elements 0..15 | block j + 1's], then 16..31
    float d0, d1;     // the blocks' scales (d1 = 0 without a second block)
};

// Nibble indices of two blocks' 16 code bytes (b1 may be null: no second block), looked up in table.
inline void nibble_pair(const uint8_t *b0, const uint8_t *b1, __m256i table, Pair &o) {
    const __m128i v0 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(b0));
    const __m128i v1 = b1 ? _mm_loadu_si128(reinterpret_cast<const __m128i *>(b1)) : _mm_setzero_si128();
    const __m256i v = _mm256_set_m128i(v1, v0), m4 = _mm256_set1_epi8(15);
    o.lo = _mm256_shuffle_epi8(table, _mm256_and_si256(v, m4));
    o.hi = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
    if (!b1) {  // zero weights, whatever the table holds at index 0
        o.lo = _mm256_blend_epi32(o.lo, _mm256_setzero_si256(), 0xf0);
        o.hi = _mm256_blend_epi32(o.hi, _mm256_setzero_si256(), 0xf0);
    }
}

struct IQ4NLPair {
    static constexpr int kPairBytes = 2 * sizeof(BlockIQ4_NL);
    static void load(const uint8_t *row, int64_t ib, bool two, Pair &o) {
        const auto *b = reinterpret_cast<const BlockIQ4_NL *>(row) + ib;
        nibble_pair(b[0].qs, two ? b[1].qs : nullptr, table_of(kIq4nlValues), o);
        o.d0 = avx2_half_to_float(b[0].d);
        o.d1 = two ? avx2_half_to_float(b[1].d) : 0.0f;
    }
};

struct MXFP4Pair {
    static constexpr int kPairBytes = 2 * sizeof(BlockMXFP4);
    static void load(const uint8_t *row, int64_t ib, bool two, Pair &o) {
        const auto *b = reinterpret_cast<const BlockMXFP4 *>(row) + ib;
        nibble_pair(b[0].qs, two ? b[1].qs : nullptr, table_of(kMxfp4Values), o);
        o.d0 = e8m0_half_to_fp32(b[0].e);  // static in core/dtype.hpp: this file's own copy
        o.d1 = two ? e8m0_half_to_fp32(b[1].e) : 0.0f;
    }
};

// IQ4_XS: ib is even and a super-block holds 8 sub-blocks, so both blocks are in one super-block.
struct IQ4XSPair {
    static constexpr int kPairBytes = sizeof(BlockIQ4_XS) / 4;
    static void load(const uint8_t *row, int64_t ib, bool, Pair &o) {
        const auto &b = reinterpret_cast<const BlockIQ4_XS *>(row)[ib / 8];
        const int j = static_cast<int>(ib % 8);
        nibble_pair(b.qs + 16 * j, b.qs + 16 * j + 16, table_of(kIq4nlValues), o);
        const float d = avx2_half_to_float(b.d);
        const int s = b.scales_l[j / 2], h = b.scales_h >> (2 * j);  // j even: low and high nibble of one byte
        o.d0 = d * static_cast<float>(((s & 15) | (h & 3) << 4) - 32);  // exact: 11 + 6 significant bits
        o.d1 = d * static_cast<float>(((s >> 4) | (h >> 2 & 3) << 4) - 32);
    }
};

template <class Dot, class F, int R, int T>
void tile_pairs(const MatmulJob &job, int64_t r, int64_t t0) {
    const int64_t nb = job.xq.nb;
    const uint8_t *w[R];
    for (int i = 0; i < R; ++i) w[i] = job.w + static_cast<size_t>(r + i) * job.row_bytes;
    const int8_t *xq[T];
    const float *xd[T];
    for (int t = 0; t < T; ++t) {
        xq[t] = job.xq.qs + (t0 + t) * job.n_in;
        xd[t] = job.xq.d + (t0 + t) * nb;
    }
    const __m256i zero = _mm256_setzero_si256();
    __m128 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm_setzero_ps();
    const bool pf = streams(job, T, t0);  // decode: prefetch the weights ahead (matmul_avx2.hpp)
    for (int64_t ib = 0; ib < nb; ib += 2) {
        if (pf) prefetch_step<R, F::kPairBytes>(w[0], ib / 2);
        const bool two = ib + 1 < nb;
        Pair pr[R];
        __m256i alo[R], ahi[R];
#pragma GCC unroll 4
        for (int i = 0; i < R; ++i) {
            F::load(w[i], ib, two, pr[i]);
            alo[i] = _mm256_sign_epi8(pr[i].lo, pr[i].lo);
            ahi[i] = _mm256_sign_epi8(pr[i].hi, pr[i].hi);
        }
        __m256 dw;  // [block j's scale of rows 0..3 | block j + 1's]
        if constexpr (R == 4)
            dw = _mm256_setr_ps(pr[0].d0, pr[1].d0, pr[2].d0, pr[3].d0, pr[0].d1, pr[1].d1, pr[2].d1, pr[3].d1);
        else
            dw = _mm256_setr_ps(pr[0].d0, 0, 0, 0, pr[0].d1, 0, 0, 0);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
            const __m256i xa = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xq[t] + ib * 32));
            const __m256i xb = two ? _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xq[t] + ib * 32 + 32)) : zero;
            const __m256i xlo = _mm256_permute2x128_si256(xa, xb, 0x20), xhi = _mm256_permute2x128_si256(xa, xb, 0x31);
            __m256i p[4] = {zero, zero, zero, zero};
#pragma GCC unroll 4
            for (int i = 0; i < R; ++i) {
                p[i] = Dot::dot2(alo[i], _mm256_sign_epi8(xlo, pr[i].lo), ahi[i], _mm256_sign_epi8(xhi, pr[i].hi));
            }
            const __m256i tot = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
            const __m256 dx = _mm256_set_m128(_mm_set1_ps(two ? xd[t][ib + 1] : 0.0f), _mm_broadcast_ss(xd[t] + ib));
            // Block j, then block j + 1: each block's FMA in block order, as the AVX-512 panel GEMM does
            // (matmul_panel_avx512.cpp), so a token's result does not depend on which of the two ran.
            const __m256 f = _mm256_cvtepi32_ps(tot), s = _mm256_mul_ps(dw, dx);
            acc[t] = _mm_fmadd_ps(_mm256_castps256_ps128(f), _mm256_castps256_ps128(s), acc[t]);
            if (two) acc[t] = _mm_fmadd_ps(_mm256_extractf128_ps(f, 1), _mm256_extractf128_ps(s, 1), acc[t]);
        }
    }
    for (int t = 0; t < T; ++t) {
        float out[4];
        _mm_storeu_ps(out, acc[t]);
        for (int i = 0; i < R; ++i) job.y[(t0 + t) * job.y_stride + r + i] = out[i] + (job.bias ? job.bias[r + i] : 0.0f);
    }
}

// The tile as matmul_rows() below takes it: K<F, R, T>::run.
template <class Dot>
struct TilePairs {
    template <class F, int R, int T>
    struct K {
        static void run(const MatmulJob &job, int64_t r, int64_t t0) { tile_pairs<Dot, F, R, T>(job, r, t0); }
    };
};

// Rows in tiles of 4 (then 1), tokens in groups of kTokTile (then the rest), each tile K<F, R, T>::run.
template <template <class, int, int> class K, class F, int R>
void tokens(const MatmulJob &job, int64_t r) {
    int64_t t0 = 0;
    for (; t0 + kTokTile <= job.n_tokens; t0 += kTokTile) K<F, R, kTokTile>::run(job, r, t0);
    static_assert(kTokTile == 4);
    switch (job.n_tokens - t0) {
    case 3: K<F, R, 3>::run(job, r, t0); break;
    case 2: K<F, R, 2>::run(job, r, t0); break;
    case 1: K<F, R, 1>::run(job, r, t0); break;
    default: break;
    }
}

template <template <class, int, int> class K, class F>
void matmul_rows(const MatmulJob &job, int64_t r0, int64_t r1) {
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) tokens<K, F, 4>(job, r);
    for (; r < r1; ++r) tokens<K, F, 1>(job, r);
}

} // namespace

} // namespace ember::cpu::detail
