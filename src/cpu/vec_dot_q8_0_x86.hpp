// vec_dot_q8_0_x86.hpp — the Q8_0 row tile, shared by the AVX2 and the AVX-512 levels, which differ
// only in how they form the integer products (Dot). Include it from *_avx2.cpp / *_avx512.cpp files
// only, after matmul_avx2.hpp: everything here has internal linkage (an anonymous namespace), so each
// file gets its own copy compiled for its ISA (see simd_avx2.hpp).
//
// Dot::dot(u, s) returns, in each of 8 int32 lanes, the exact sum of the 4 products of unsigned bytes u
// and signed bytes s in that lane. AVX2: maddubs (pairs in 16 bits: at most 2 * 128 * 127 = 32512, never
// saturating here) and madd against ones; VNNI: one VPDPBUSD. Same integers, so the same bits.
#pragma once

#include "core/dtype.hpp"
#include "cpu/matmul_avx2.hpp"
#include "cpu/simd_avx2.hpp"
#include "cpu/vec_dot.hpp"

namespace ember::cpu::detail {

namespace {

// ---- Q8_0 weights x Q8 activations -------------------------------------------------------------------
// The integer products multiply unsigned by signed bytes, and both operands here are signed. The sign
// trick moves the sign of w onto x: w * x = |w| * (x * sign(w)). |w| fits an unsigned byte even for
// w = -128 (abs gives 0x80 = 128), and x * sign(w) cannot overflow because activations stay in
// [-127, 127].
//
// The panel GEMMs' arithmetic (matmul_panel_*.cpp): each block's 32 products are reduced to one exact
// integer per row (|sum| <= 32 * 128 * 127 < 2^24, so exact as a float too), and the block's two
// scales are applied to it with one multiply (d_w * d_x) and one FMA into the row's accumulator, in
// block order; the bias is added at the end. So a token's result is the same bits whether its matmul
// had one token (decode, here), a few (here) or many (the panels), at every level.
template <class Dot>
struct Q8_0T {
    static constexpr int kPrefillRows = 4;
    template <int R, int T>
    static void tile(const MatmulJob &job, int64_t r, int64_t t0) {
        static_assert(R <= 4 && T <= kTokTile);
        const int64_t nb = job.xq.nb;
        const TileOperands<BlockQ8_0, R, T> op(job, r, t0);
        __m128 acc[T];
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) acc[t] = _mm_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            // One prefetch stream per row (matmul_avx2.hpp): a 4-row tile spans 8.5 KiB at 2048 inputs.
            if (streams(job, T, t0)) prefetch_rows<R, sizeof(BlockQ8_0)>(op.w[0], job.row_bytes, b);
            const __m128 dw = load_halves<BlockQ8_0, R>(op.w, b, &BlockQ8_0::d);
            __m256i wv[R], aw[R];
#pragma GCC unroll 4
            for (int i = 0; i < R; ++i) {
                wv[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(op.w[i][b].qs));
                aw[i] = _mm256_abs_epi8(wv[i]);
            }
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) {
                const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(op.xq[t] + b * 32));
                __m256i p[R];
#pragma GCC unroll 4
                for (int i = 0; i < R; ++i) p[i] = Dot::dot(aw[i], _mm256_sign_epi8(xv, wv[i]));
                const __m128 f = _mm_cvtepi32_ps(rows_in_lanes<R>(p));
                acc[t] = _mm_fmadd_ps(f, _mm_mul_ps(dw, _mm_broadcast_ss(op.xd[t] + b)), acc[t]);
            }
        }
        store_lanes<R, T>(job, r, t0, acc);
    }
};

} // namespace

} // namespace ember::cpu::detail
