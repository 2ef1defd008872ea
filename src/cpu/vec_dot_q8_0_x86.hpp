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
// [-127, 127]. Dot gives the 8 exact int32 sums of 4 consecutive products (see the top of this file);
// the block's two scales are applied once per block in float.
template <class Dot>
struct Q8_0T {
    static constexpr int kPrefillRows = 4;
    template <int R, int T>
    static void tile(const MatmulJob &job, int64_t r, int64_t t0) {
        static_assert(R <= 4 && T <= kTokTile);
        const int64_t nb = job.xq.nb;
        const TileOperands<BlockQ8_0, R, T> op(job, r, t0);
        const auto &w = op.w;
        const auto &xq = op.xq;
        const auto &xd = op.xd;
        __m256 acc[R][T];
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) acc[i][t] = _mm256_setzero_ps();
        alignas(16) float sc[T][4];

        for (int64_t b = 0; b < nb; ++b) {
            // One prefetch stream per row (matmul_avx2.hpp): a 4-row tile spans 8.5 KiB at 2048 inputs.
            if (streams(job, T, t0)) prefetch_rows<R, sizeof(BlockQ8_0)>(w[0], job.row_bytes, b);
            block_scales<R, T>(w, b, xd, sc);
            __m256i xv[T];
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) xv[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xq[t] + b * 32));
#pragma GCC unroll 8
            for (int i = 0; i < R; ++i) {
                const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(w[i][b].qs));
                const __m256i aw = _mm256_abs_epi8(wv);
#pragma GCC unroll 8
                for (int t = 0; t < T; ++t) {
                    const __m256 p = _mm256_cvtepi32_ps(Dot::dot(aw, _mm256_sign_epi8(xv[t], wv)));
                    acc[i][t] = _mm256_fmadd_ps(p, _mm256_broadcast_ss(&sc[t][i]), acc[i][t]);
                }
            }
        }
        store<R, T>(job, r, t0, acc, nullptr);
    }

    // sc[t][i] = d(row i, block b) * d(token t, block b). The R fp16 weight scales are gathered into one
    // register and converted and multiplied together, then read back one by one with broadcast loads,
    // which cost a load slot rather than an ALU slot: per (row, block) 1 ALU op where a scalar convert,
    // multiply and broadcast take 4. Measured on Zen 3 (decode tile): 4.2 instead of 4.4 cycles per
    // row-block; the rest is the integer products (maddubs + madd alone take 2.7).
    template <class Block, int R, int T>
    static void block_scales_impl(const Block *const (&w)[R], int64_t b, const float *const (&xd)[T], float (&sc)[T][4]) {
        const __m128 dw = load_halves<Block, R>(w, b, &Block::d);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) _mm_store_ps(sc[t], _mm_mul_ps(dw, _mm_broadcast_ss(xd[t] + b)));
    }
    template <int R, int T>
    static void block_scales(const BlockQ8_0 *const (&w)[R], int64_t b, const float *const (&xd)[T], float (&sc)[T][4]) {
        block_scales_impl<BlockQ8_0, R, T>(w, b, xd, sc);
    }

    // y = sum of the lanes (- corr, Q4_0's offset term) + bias.
    template <int R, int T>
    static void store(const MatmulJob &job, int64_t r, int64_t t0, __m256 (&acc)[R][T], const float (*corr)[4]) {
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) {
            const float bias = job.bias ? job.bias[r + i] : 0.0f;
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) {
                float v = avx2_hsum(acc[i][t]);
                if (corr) v -= corr[t][i];
                job.y[(t0 + t) * job.y_stride + r + i] = v + bias;
            }
        }
    }
};

} // namespace

} // namespace ember::cpu::detail
