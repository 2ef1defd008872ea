// vec_dot_k_avx2.cpp — matmul row kernels for the K-quant weights (Q4_K, Q5_K, Q6_K) on AVX2 + FMA +
// F16C. Compiled with -mavx2 -mfma -mf16c and reached only through the kernel table (see simd_avx2.hpp
// for why nothing here calls ordinary inline functions from other headers; quant_k.hpp's helper is
// static for that reason).
//
// Same shape as the Q4_0/Q8_0 kernels (the driver in matmul_avx2.hpp: cache blocks of rows, token
// groups of kTokTile, register tiles of R rows x T tokens, prefetching in decode), stepping a whole
// super-block of 256 weights at a time. Q5_K and Q6_K meet activations in blocks of 32 with their own
// scales (QuantActs), so a super-block meets 8 of them: each 32-element piece is an exact integer dot
// product, converted once and multiplied by the product of the weight's and the activations' scales for
// that piece (Q6_K's two 16-element scales per piece are applied in the integers first). Q4_K meets
// activations with one scale per super-block (QuantActsK): its 8 sub-block products, weighted by their
// 6-bit scales, and the mins' term are two exact integers per super-block, scaled in float once.
// Q5_K keeps one 8-lane accumulator per output; Q4_K and Q6_K reduce to integers per row first and
// accumulate with the float operations of their panel GEMM (matmul_panel_avx2.cpp), which takes over
// above kTokTile tokens. Either way an output is updated in the same order whatever the tile shape, so
// results do not depend on how rows and tokens were split, nor on how many tokens a matmul had.
#include "core/dtype.hpp"
#include "cpu/matmul_avx2.hpp"
#include "cpu/quant_k.hpp"
#include "cpu/simd_avx2.hpp"
#include "cpu/vec_dot.hpp"
#include "cpu/vec_dot_k_x86.hpp"

namespace ember::cpu::detail {

namespace {

// Broadcasts 16-bit element j of each 128-bit lane of v across that lane (a byte shuffle with the
// byte pair 2j, 2j + 1 repeated).
inline __m256i broadcast_i16(__m256i v, int j) {
    return _mm256_shuffle_epi8(v, _mm256_set1_epi16(static_cast<short>(0x0100 + 0x0202 * j)));
}

template <int R, int T>
inline void store_tile(const MatmulJob &job, int64_t r, int64_t t0, __m256 (&acc)[R][T]) {
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
        const float bias = job.bias ? job.bias[r + i] : 0.0f;
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) job.y[(t0 + t) * job.y_stride + r + i] = avx2_hsum(acc[i][t]) + bias;
    }
}

// ---- Q5_K ----------------------------------------------------------------------------------------------
// value = d * sc_j * code - dmin * m_j for sub-block j (32 elements, one activation block).
// The codes are unsigned (0..31 with Q5_K's fifth bit), so they go straight into maddubs as in Q4_0: pairs
// at most 2 * 31 * 127 = 7874, no saturation. The 6-bit scale is applied in float, where it is free:
// d * sc_j is exact (11 + 6 significant bits), and (d * sc_j) * d_x is one product per row, token and
// sub-block, like Q4_0's d * d_x (applying it in the integer widening instead would cost a shuffle per
// row and sub-block to broadcast it). The mins need no per-element work: per super-block they
// contribute dmin * sum_j m_j * d_x(j) * sum_x(j), an 8-lane product of the row's mins and the token's
// per-block d_x * sum x, taken off the accumulator once. The 32-byte group g of qs holds sub-block 2g in
// its low nibbles and 2g + 1 in its high nibbles, each element l in byte l, as the activations are laid
// out: no shuffling.
struct Q5K {
    using Block = BlockQ5_K;
    static constexpr int kPrefillRows = 4;
    template <int R, int T>
    static void tile(const MatmulJob &job, int64_t r, int64_t t0) {
        static_assert(R <= 4 && T <= kTokTile);
        const int64_t nsb = job.n_in / QK_K;
        const __m256i ones = _mm256_set1_epi16(1);
        const __m256i low4 = _mm256_set1_epi8(0x0f);
        const __m256i bit4 = _mm256_set1_epi8(0x10);
        const TileOperands<Block, R, T> op(job, r, t0);
        const auto &w = op.w;
        const auto &xq = op.xq;
        const auto &xd = op.xd;
        const auto &xs = op.xs;
        __m256 acc[R][T];
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) acc[i][t] = _mm256_setzero_ps();
        alignas(32) float sc[T][4][8];  // d * sc_j * d_x(j), read back with broadcast loads

        for (int64_t s = 0; s < nsb; ++s) {
            if (streams(job, T, t0)) prefetch_step<R, sizeof(Block)>(w[0], s);
            alignas(16) float d[4], dmin[4];
            _mm_store_ps(d, load_halves<Block, R>(w, s, &Block::d));
            _mm_store_ps(dmin, load_halves<Block, R>(w, s, &Block::dmin));
            __m256 dx[T], xm[T];  // per activation block: d_x, and d_x * sum x
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) {
                dx[t] = _mm256_loadu_ps(xd[t] + 8 * s);
                xm[t] = _mm256_mul_ps(dx[t], _mm256_loadu_ps(xs[t] + 8 * s));
            }
#pragma GCC unroll 8
            for (int i = 0; i < R; ++i) {
                const KScaleMin sm = k_scale_min(w[i][s].scales);
                auto widen = [](uint64_t bytes) {  // 8 bytes -> 8 floats
                    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(bytes))));
                };
                const __m256 dsc = _mm256_mul_ps(widen(sm.sc), _mm256_broadcast_ss(&d[i]));
                const __m256 mins = _mm256_mul_ps(widen(sm.m), _mm256_broadcast_ss(&dmin[i]));
#pragma GCC unroll 8
                for (int t = 0; t < T; ++t) {
                    _mm256_store_ps(sc[t][i], _mm256_mul_ps(dsc, dx[t]));
                    acc[i][t] = _mm256_fnmadd_ps(mins, xm[t], acc[i][t]);
                }
            }
#pragma GCC unroll 4
            for (int g = 0; g < 4; ++g) {
                __m256i x0[T], x1[T];
#pragma GCC unroll 8
                for (int t = 0; t < T; ++t) {
                    x0[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xq[t] + s * QK_K + 64 * g));
                    x1[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xq[t] + s * QK_K + 64 * g + 32));
                }
#pragma GCC unroll 8
                for (int i = 0; i < R; ++i) {
                    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(w[i][s].qs + 32 * g));
                    __m256i lo = _mm256_and_si256(v, low4);
                    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
                    {
                        // Bits 2g and 2g + 1 of each qh byte are the fifth bits of sub-blocks 2g and 2g + 1.
                        // The 16-bit shifts carry bits across the byte boundary, but only into bits that
                        // the masks drop.
                        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(w[i][s].qh));
                        const __m256i h = _mm256_srli_epi16(qh, 2 * g);
                        lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(h, 4), bit4));
                        hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(h, 3), bit4));
                    }
#pragma GCC unroll 8
                    for (int t = 0; t < T; ++t) {
                        const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, x0[t]), ones);
                        acc[i][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_broadcast_ss(&sc[t][i][2 * g]), acc[i][t]);
                        const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, x1[t]), ones);
                        acc[i][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1), _mm256_broadcast_ss(&sc[t][i][2 * g + 1]), acc[i][t]);
                    }
                }
            }
        }
        store_tile<R, T>(job, r, t0, acc);
    }
};

// ---- Q6_K ----------------------------------------------------------------------------------------------
// value = d * scale_k * (code - 32), a signed 8-bit scale per 16 elements. The codes (0..63) go into
// maddubs unsigned, and the offset is taken off in the same 16-bit pair sums: maddubs(32, x) per token
// and activation block, shared by the R rows. Pairs: |2 * 63 * 127 - (-2 * 32 * 127)| <= 24130, no
// saturation. Then madd against the scales — the low 128-bit lane (elements 0..15 of the activation
// block) against its first 16-element scale, the high lane against the second — sums 4 elements per
// int32 lane, at most 4 * 32 * 127 * 128, exact in float too.
struct Q6K {
    static constexpr int kPrefillRows = 4;  // 2 x 4 tiles measured no faster (2048 x 2048, 64 tokens)
    template <int R, int T>
    static void tile(const MatmulJob &job, int64_t r, int64_t t0) {
        static_assert(R <= 4 && T <= kTokTile);
        const int64_t nsb = job.n_in / QK_K;
        const __m256i low4 = _mm256_set1_epi8(0x0f);
        const __m256i top2 = _mm256_set1_epi8(0x30);
        const __m256i c32 = _mm256_set1_epi8(32);
        // Scales reordered as [0, 2, .., 14 | 1, 3, .., 15] and widened: 16-bit element k of the low lane
        // is then the scale of the first half of activation block k, of the high lane the second half.
        const __m128i even_odd = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
        const TileOperands<BlockQ6_K, R, T> op(job, r, t0);
        const auto &w = op.w;
        const auto &xq = op.xq;
        const auto &xd = op.xd;
        __m128 acc[T];  // row i in lane i (see rows_in_lanes)
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) acc[t] = _mm_setzero_ps();

        for (int64_t s = 0; s < nsb; ++s) {
            if (streams(job, T, t0)) prefetch_step<R, sizeof(BlockQ6_K)>(w[0], s);
            const __m128 dw = load_halves<BlockQ6_K, R>(w, s, &BlockQ6_K::d);
            __m256i scale16[R];
#pragma GCC unroll 8
            for (int i = 0; i < R; ++i)
                scale16[i] = _mm256_cvtepi8_epi16(
                    _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i *>(w[i][s].scales)), even_odd));
            // Activation block kb = 4h + k is quarter k of half h: its low code bits are the low (k < 2) or
            // high nibbles of ql[64h + 32 (k & 1) ..], its top two bits bits 2k, 2k + 1 of qh[32h ..].
#pragma GCC unroll 8
            for (int kb = 0; kb < 8; ++kb) {
                const int h = kb / 4, k = kb % 4;
                __m256i code[R], sv[R];
#pragma GCC unroll 8
                for (int i = 0; i < R; ++i) {
                    __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(w[i][s].ql + 64 * h + 32 * (k & 1)));
                    if (k >= 2) lo = _mm256_srli_epi16(lo, 4);
                    __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(w[i][s].qh + 32 * h));
                    // Bits 2k, 2k + 1 to bits 4, 5 (what crosses a byte boundary is masked off).
                    hb = k < 2 ? _mm256_slli_epi16(hb, 4 - 2 * k) : _mm256_srli_epi16(hb, 2 * k - 4);
                    code[i] = _mm256_or_si256(_mm256_and_si256(lo, low4), _mm256_and_si256(hb, top2));
                    sv[i] = broadcast_i16(scale16[i], kb);
                }
#pragma GCC unroll 8
                for (int t = 0; t < T; ++t) {
                    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xq[t] + s * QK_K + 32 * kb));
                    const __m256i xo = _mm256_maddubs_epi16(c32, xv);
                    __m256i p32[R];
#pragma GCC unroll 8
                    for (int i = 0; i < R; ++i) p32[i] = _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16(code[i], xv), xo), sv[i]);
                    const __m128 f = _mm_cvtepi32_ps(rows_in_lanes<R>(p32));
                    acc[t] = _mm_fmadd_ps(f, _mm_mul_ps(dw, _mm_broadcast_ss(xd[t] + 8 * s + kb)), acc[t]);
                }
            }
        }
        store_lanes<R, T>(job, r, t0, acc);
    }
};

// ---- Q4_K ----------------------------------------------------------------------------------------------
// A dword broadcast to 8 lanes by a load (VPBROADCASTD from memory: a load-port op, no shuffle). Through
// _mm256_set1_epi32 GCC takes the value from the register it was stored from instead, with a shift and
// a register broadcast: two shuffle-port ops per row and sub-block in the Q4_K tile (decode kernel,
// 2048 x 2048, medians of 3 alternating runs: 18.0 -> 19.3 GB/s on one thread, 33.5 -> 41.3 on two).
// The asm's memory operand keeps the load.
inline __m256i broadcast_from_memory(const int32_t &v) {
    __m256i r;
    asm("vpbroadcastd %1, %0" : "=x"(r) : "m"(v));
    return r;
}

// Against per-256 activations (QuantActsK; vec_dot.hpp gives the steps every level follows): per row,
// token and super-block, the two exact integers isum = sum_j sc_j * (codes . q of sub-block j) and
// msum = sum_j m_j * (block sum of q), then two float steps, the same as the panel GEMM's
// (matmul_panel_avx2.cpp), which takes over above kTokTile tokens: the same bits whatever the number of
// tokens in the matmul. The codes (0..15) go into maddubs unsigned; its pairs (at most 2 * 15 * 127)
// meet sc_j in madd, which sums 4 elements per int32 lane (at most 4 * 15 * 127 * 63; a super-block's
// isum < 2^25). The float epilogue runs once per super-block (it ran once per sub-block against per-32
// activations).
struct Q4K {
    static constexpr int kPrefillRows = 4;
    template <int R, int T>
    static void tile(const MatmulJob &job, int64_t r, int64_t t0) {
        static_assert((R == 1 || R == 4) && T <= kTokTile);
        const QuantActsK &xk = job.xk;
        const __m256i low4 = _mm256_set1_epi8(0x0f);
        const BlockQ4_K *w[R];
        const int8_t *xq[T];
        const float *xd[T];
        const int16_t *xs[T];
        for (int i = 0; i < R; ++i) w[i] = reinterpret_cast<const BlockQ4_K *>(job.w + static_cast<size_t>(r + i) * job.row_bytes);
        for (int t = 0; t < T; ++t) {
            xq[t] = xk.qs + (t0 + t) * job.n_in;
            xd[t] = xk.d + (t0 + t) * xk.nsb;
            xs[t] = xk.sum + (t0 + t) * xk.nb;
        }
        __m128 acc[T];  // row i in lane i
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) acc[t] = _mm_setzero_ps();

        for (int64_t s = 0; s < xk.nsb; ++s) {
            // One prefetch stream per row: TinyLlama Q4_K_M decode at 2 threads (AVX2 level, Xeon VM, tok/s,
            // medians of 4-6 alternating runs): per row 27.6, the tile's stream 4 KiB ahead 26.2, 8 KiB 24.6.
            if (streams(job, T, t0)) prefetch_rows<R, sizeof(BlockQ4_K)>(w[0], job.row_bytes, s);
            // The scale pairs go through memory: a broadcast load per sub-block and row costs no ALU op
            // (broadcast_from_memory).
            alignas(32) int32_t sc[R][8];
            __m128i mins[R];
            __m256i isum[R][T];  // row i, token t: 8 lanes summing to isum
#pragma GCC unroll 4
            for (int i = 0; i < R; ++i) {
                const Q4KIntScales q = q4k_int_scales(w[i][s]);
                _mm256_store_si256(reinterpret_cast<__m256i *>(sc[i]), q.sc);
                mins[i] = q.m;
            }
            // Group g of row i's qs against the T tokens (sub-block 2g in the low nibbles, 2g + 1 in the high
            // ones, element l in byte l). Decode takes the rows side by side (R streams from memory at once);
            // several tokens a row at a time, which keeps T accumulators live rather than R x T.
#pragma GCC unroll 16
            for (int k = 0; k < 4 * R; ++k) {
                const int i = T == 1 ? k % R : k / 4, g = T == 1 ? k / R : k % 4;
                const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(w[i][s].qs + 32 * g));
                const __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
                const __m256i s_lo = broadcast_from_memory(sc[i][2 * g]), s_hi = broadcast_from_memory(sc[i][2 * g + 1]);
#pragma GCC unroll 4
                for (int t = 0; t < T; ++t) {
                    const int8_t *x = xq[t] + s * QK_K + 64 * g;
                    const __m256i p0 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(x)));
                    const __m256i p1 = _mm256_maddubs_epi16(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(x + 32)));
                    const __m256i p = _mm256_add_epi32(_mm256_madd_epi16(p0, s_lo), _mm256_madd_epi16(p1, s_hi));
                    isum[i][t] = g == 0 ? p : _mm256_add_epi32(isum[i][t], p);
                    keep_in_register(isum[i][t]);
                }
            }
            __m128 d, dmin;
            load_d_dmin<R>(w, s, d, dmin);
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) {
                const __m128i bsum = _mm_loadu_si128(reinterpret_cast<const __m128i *>(xs[t] + 8 * s));
                __m256i ip[R];
                __m128i mp[R];
#pragma GCC unroll 4
                for (int i = 0; i < R; ++i) {
                    ip[i] = isum[i][t];
                    mp[i] = _mm_madd_epi16(mins[i], bsum);
                }
                const __m128 dx = _mm_set1_ps(xd[t][s]);
                acc[t] = _mm_fmadd_ps(_mm_cvtepi32_ps(rows_in_lanes<R>(ip)), _mm_mul_ps(d, dx), acc[t]);
                acc[t] = _mm_fnmadd_ps(_mm_cvtepi32_ps(rows_in_lanes128<R>(mp)), _mm_mul_ps(dmin, dx), acc[t]);
            }
        }
        store_lanes<R, T>(job, r, t0, acc);
    }

    // R rows' d and dmin as floats, row i in lane i of each (R = 1 or 4): the two halves are adjacent, so
    // one 32-bit load per row and one conversion serve both (load_halves gathers and converts each).
    template <int R>
    static void load_d_dmin(const BlockQ4_K *const (&w)[R], int64_t s, __m128 &d, __m128 &dmin) {
        static_assert(offsetof(BlockQ4_K, dmin) == offsetof(BlockQ4_K, d) + 2);
        auto pair = [&](int i) {
            int32_t v;
            __builtin_memcpy(&v, &w[i][s].d, 4);
            return v;
        };
        __m128i h = _mm_cvtsi32_si128(pair(0));
        if constexpr (R == 4) {
            h = _mm_insert_epi32(h, pair(1), 1);
            h = _mm_insert_epi32(h, pair(2), 2);
            h = _mm_insert_epi32(h, pair(3), 3);
        }
        // d_0, dmin_0, d_1, dmin_1, ... -> d_0..3 | dmin_0..3
        const __m256 f = _mm256_permutevar8x32_ps(_mm256_cvtph_ps(h), _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
        d = _mm256_castps256_ps128(f);
        dmin = _mm256_extractf128_ps(f, 1);
    }

    // The exact totals of R rows' 4-lane int32 sums, row i in lane i (R = 1 or 4).
    template <int R>
    static __m128i rows_in_lanes128(const __m128i (&p)[R]) {
        if constexpr (R == 1) {
            __m128i s = _mm_add_epi32(p[0], _mm_shuffle_epi32(p[0], 0x4e));
            return _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
        } else {
            return _mm_hadd_epi32(_mm_hadd_epi32(p[0], p[1]), _mm_hadd_epi32(p[2], p[3]));
        }
    }
};

} // namespace

void matmul_rows_q4_k_avx2(const MatmulJob &job, int64_t r0, int64_t r1) {
    if (job.n_tokens > kTokTile) return matmul_panels_q4_k_avx2(job, r0, r1);
    drive<Q4K>(job, r0, r1);
}
void matmul_rows_q5_k_avx2(const MatmulJob &job, int64_t r0, int64_t r1) { drive<Q5K>(job, r0, r1); }
void matmul_rows_q6_k_avx2(const MatmulJob &job, int64_t r0, int64_t r1) {
    if (job.n_tokens > kTokTile) return matmul_panels_q6_k_avx2(job, r0, r1);
    drive<Q6K>(job, r0, r1);
}

} // namespace ember::cpu::detail
