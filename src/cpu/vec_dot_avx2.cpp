// vec_dot_avx2.cpp — matmul row kernels and the activation quantizer for AVX2 + FMA + F16C.
// Compiled with -mavx2 -mfma -mf16c and reached only through the kernel table (see simd_avx2.hpp for
// why nothing here calls ordinary inline functions from other headers).
//
// Shape of the work. A call covers rows [r0, r1) of one weight for all tokens. Rows are taken in cache
// blocks of about kRowBlockBytes; within a block, tokens go in groups of kTokTile and each group makes
// one pass over the block in register tiles of R rows x T tokens. So in prefill every weight row loaded
// from memory serves 4 tokens from registers, and the block serves every token group from L2; in
// decode (T = 1) the tile is 4 rows so that one activation load serves 4 weight rows.
//
// Q4_0 and Q8_0 prefill (more tokens than one tile pass) go to the panel GEMM instead
// (matmul_panel_avx2.cpp), as do Q4_K and Q6_K's; the tiles here still serve decode, small batches and
// the other formats.
//
// Each output keeps its own accumulator (Q4_0, Q8_0: one lane per row, fed one exact integer per block,
// as the panels do; the other formats: 8 lanes), updated in the same order whatever the tile shape, so
// a result does not depend on how rows were split into tiles or across threads.
#include "core/dtype.hpp"
#include "cpu/matmul_avx2.hpp"
#include "cpu/simd_avx2.hpp"
#include "cpu/vec_dot.hpp"
#include "cpu/vec_dot_q8_0_x86.hpp"

namespace ember::cpu::detail {

namespace {

// ---- Q8_0 weights x Q8 activations: the tile is in vec_dot_q8_0_x86.hpp --------------------------------
struct DotMaddubs {
    static __m256i dot(__m256i u, __m256i s) { return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)); }
};
using Q8_0 = Q8_0T<DotMaddubs>;

// ---- the 8-lane accumulators of Legacy below ---------------------------------------------------------
// sc[t][i] = d(row i, block b) * d(token t, block b). The R fp16 weight scales are gathered into one
// register and converted and multiplied together, then read back one by one with broadcast loads,
// which cost a load slot rather than an ALU slot: per (row, block) 1 ALU op where a scalar convert,
// multiply and broadcast take 4. Measured on Zen 3 (decode tile): 4.2 instead of 4.4 cycles per
// row-block; the rest is the integer products (maddubs + madd alone take 2.7).
template <class Block, int R, int T>
inline void lane_block_scales(const Block *const (&w)[R], int64_t b, const float *const (&xd)[T], float (&sc)[T][4]) {
    const __m128 dw = load_halves<Block, R>(w, b, &Block::d);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) _mm_store_ps(sc[t], _mm_mul_ps(dw, _mm_broadcast_ss(xd[t] + b)));
}

// y = the sum of an output's 8 lanes - corr (the offset term) + bias.
template <int R, int T>
inline void lane_store(const MatmulJob &job, int64_t r, int64_t t0, __m256 (&acc)[R][T], const float (*corr)[4]) {
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
        const float bias = job.bias ? job.bias[r + i] : 0.0f;
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) job.y[(t0 + t) * job.y_stride + r + i] = avx2_hsum(acc[i][t]) - corr[t][i] + bias;
    }
}

// ---- Q4_0, Q4_1, Q5_0, Q5_1 weights x Q8 activations -------------------------------------------------
// Q4_0: the nibbles are already unsigned (0..15), so they go straight into maddubs as the unsigned
// operand: sum (n - 8) x = sum n x - 8 sum x, no sign trick, and no saturation (2 * 15 * 127 = 3810).
// The 8 sum x term needs no per-row work: sum x per block comes with the activations, and
// 8 * d_w * d_x * sum x is accumulated for R rows at once in the lanes of one register (corr) and taken
// off at the end. Elements 0..15 are the low nibbles and sit in the low 128-bit lane, like x[0..15];
// elements 16..31 are the high nibbles: shifting only the upper lane by 4 lines them up with x[16..31].
// The others add to this scheme. Q5's fifth bit: the 32 bits of qh are spread one per byte (byte k of the broadcast word
// takes qh byte k / 8 and keeps bit k % 8, as Q4_0's nibble order puts element k in byte k) and OR-ed in
// as 16. No saturation: 2 * 31 * 127 = 7874. The offset: Q5_0's codes sit 16 above the value as Q4_0's
// sit 8, taken off as 16 * d_w * d_x * sum x; Q4_1/Q5_1 add m, which contributes m * d_x * sum x. Either
// way the term is accumulated for the R rows in the lanes of one register per token (corr).
template <class Block, bool kHigh, bool kMin>
struct Legacy {
    static constexpr int kPrefillRows = 4;
    template <int R, int T>
    static void tile(const MatmulJob &job, int64_t r, int64_t t0) {
        static_assert(R <= 4 && T <= kTokTile);
        const int64_t nb = job.xq.nb;
        const __m256i ones = _mm256_set1_epi16(1);
        const __m256i low4 = _mm256_set1_epi8(0x0f);
        const __m256i shift = _mm256_set_epi64x(4, 4, 0, 0);
        const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                                2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
        const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
        const __m256i bit4 = _mm256_set1_epi8(0x10);
        const TileOperands<Block, R, T> op(job, r, t0);
        const auto &w = op.w;
        const auto &xq = op.xq;
        const auto &xd = op.xd;
        const auto &xs = op.xs;
        __m256 acc[R][T];
        __m128 corr[T];
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
            corr[t] = _mm_setzero_ps();
#pragma GCC unroll 8
            for (int i = 0; i < R; ++i) acc[i][t] = _mm256_setzero_ps();
        }
        alignas(16) float sc[T][4];

        for (int64_t b = 0; b < nb; ++b) {
            if (streams(job, T, t0)) prefetch_step<R, sizeof(Block)>(w[0], b);
            lane_block_scales<Block, R, T>(w, b, xd, sc);
            __m128 mv = _mm_setzero_ps();
            if constexpr (kMin) mv = load_halves<Block, R>(w, b, &Block::m);
            __m256i xv[T];
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) {
                xv[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xq[t] + b * 32));
                if constexpr (kMin) corr[t] = _mm_fmadd_ps(mv, _mm_set1_ps(xd[t][b] * xs[t][b]), corr[t]);
                else corr[t] = _mm_fmadd_ps(_mm_load_ps(sc[t]), _mm_broadcast_ss(xs[t] + b), corr[t]);
            }
#pragma GCC unroll 8
            for (int i = 0; i < R; ++i) {
                const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i *>(w[i][b].qs));
                __m256i code = _mm256_and_si256(_mm256_srlv_epi64(_mm256_broadcastsi128_si256(raw), shift), low4);
                if constexpr (kHigh) {
                    int32_t qh;
                    __builtin_memcpy(&qh, w[i][b].qh, 4);
                    const __m256i sel = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(qh), spread), bit);
                    code = _mm256_or_si256(code, _mm256_and_si256(_mm256_cmpeq_epi8(sel, bit), bit4));
                }
#pragma GCC unroll 8
                for (int t = 0; t < T; ++t) {
                    const __m256i p32 = _mm256_madd_epi16(_mm256_maddubs_epi16(code, xv[t]), ones);
                    acc[i][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p32), _mm256_broadcast_ss(&sc[t][i]), acc[i][t]);
                }
            }
        }
        // store() subtracts c: the offset's 8 (Q4_0) or 16 (Q5_0) * corr, minus the mins' term for Q4_1/Q5_1.
        constexpr float kOffset = kHigh ? 16.0f : 8.0f;
        alignas(16) float c[T][4];
        for (int t = 0; t < T; ++t)
            _mm_store_ps(c[t], kMin ? _mm_sub_ps(_mm_setzero_ps(), corr[t]) : _mm_mul_ps(corr[t], _mm_set1_ps(kOffset)));
        lane_store<R, T>(job, r, t0, acc, c);
    }
};

// ---- Q4_0 weights x Q8 activations, the panel GEMM's arithmetic -------------------------------------------
// Codes as in Legacy (unsigned nibbles into maddubs, the offset of 8 taken off with the block sums), but
// each block's product is reduced to one exact integer per row (rows_in_lanes) before its scales are
// applied, with the float operations of the panel GEMM, so decode and small batches (here) give the same
// bits as prefill and large batches (matmul_panel_avx2.cpp). Decode measured no slower than with
// Legacy's 8-lane accumulators: the reduction replaces R - 1 converts and FMAs per block.
struct Q4_0 {
    static constexpr int kPrefillRows = 4;
    template <int R, int T>
    static void tile(const MatmulJob &job, int64_t r, int64_t t0) {
        static_assert(R <= 4 && T <= kTokTile);
        const int64_t nb = job.xq.nb;
        const __m256i low4 = _mm256_set1_epi8(0x0f);
        const __m256i shift = _mm256_set_epi64x(4, 4, 0, 0);
        const TileOperands<BlockQ4_0, R, T> op(job, r, t0);
        __m128 acc[T];
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) acc[t] = _mm_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            if (streams(job, T, t0)) prefetch_step<R, sizeof(BlockQ4_0)>(op.w[0], b);
            const __m128 dw = load_halves<BlockQ4_0, R>(op.w, b, &BlockQ4_0::d);
            __m256i code[R];
#pragma GCC unroll 4
            for (int i = 0; i < R; ++i) {
                const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i *>(op.w[i][b].qs));
                code[i] = _mm256_and_si256(_mm256_srlv_epi64(_mm256_broadcastsi128_si256(raw), shift), low4);
            }
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) {
                const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(op.xq[t] + b * 32));
                __m256i p[R];
#pragma GCC unroll 4
                for (int i = 0; i < R; ++i) p[i] = _mm256_maddubs_epi16(code[i], xv);
                __m128 f = _mm_cvtepi32_ps(rows_in_lanes16<R>(p));
                f = _mm_fnmadd_ps(_mm_set1_ps(8.0f), _mm_broadcast_ss(op.xs[t] + b), f);
                acc[t] = _mm_fmadd_ps(f, _mm_mul_ps(dw, _mm_broadcast_ss(op.xd[t] + b)), acc[t]);
            }
        }
        store_lanes<R, T>(job, r, t0, acc);
    }
};

// ---- float weights x f32 activations -----------------------------------------------------------------
// 8 elements per step, one FMA per (row, token). Loaders turn 8 stored elements into 8 floats; the
// n_in % 8 tail is summed in scalar.
struct LoadF32 {
    static constexpr int kBytes = 4;
    static __m256 load8(const uint8_t *row, int64_t i) { return _mm256_loadu_ps(reinterpret_cast<const float *>(row) + i); }
    static float load1(const uint8_t *row, int64_t i) { return reinterpret_cast<const float *>(row)[i]; }
};
struct LoadF16 {
    static constexpr int kBytes = 2;
    static __m256 load8(const uint8_t *row, int64_t i) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(reinterpret_cast<const uint16_t *>(row) + i)));
    }
    static float load1(const uint8_t *row, int64_t i) { return avx2_half_to_float(reinterpret_cast<const uint16_t *>(row)[i]); }
};
struct LoadBF16 {
    static constexpr int kBytes = 2;
    // bf16 is the top half of an f32: widen to 32 bits and shift into place.
    static __m256 load8(const uint8_t *row, int64_t i) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i *>(reinterpret_cast<const uint16_t *>(row) + i));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    static float load1(const uint8_t *row, int64_t i) { return avx2_bf16_to_float(reinterpret_cast<const uint16_t *>(row)[i]); }
};

template <class L>
struct Float {
    static constexpr int kPrefillRows = 3;
    template <int R, int T>
    static void tile(const MatmulJob &job, int64_t r, int64_t t0) {
        const int64_t n = job.n_in;
        const uint8_t *w[R];
        for (int i = 0; i < R; ++i) w[i] = job.w + static_cast<size_t>(r + i) * job.row_bytes;
        const float *x[T];
        for (int t = 0; t < T; ++t) x[t] = job.x + (t0 + t) * n;
        __m256 acc[R][T];
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) acc[i][t] = _mm256_setzero_ps();
        int64_t k = 0;
        for (; k + 8 <= n; k += 8) {
            if (streams(job, T, t0)) prefetch_step<R, 8 * L::kBytes>(w[0], k / 8);
            __m256 xv[T];
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) xv[t] = _mm256_loadu_ps(x[t] + k);
#pragma GCC unroll 8
            for (int i = 0; i < R; ++i) {
                const __m256 wv = L::load8(w[i], k);
#pragma GCC unroll 8
                for (int t = 0; t < T; ++t) acc[i][t] = _mm256_fmadd_ps(wv, xv[t], acc[i][t]);
            }
        }
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) {
            const float bias = job.bias ? job.bias[r + i] : 0.0f;
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) {
                float s = avx2_hsum(acc[i][t]);
                for (int64_t j = k; j < n; ++j) s += L::load1(w[i], j) * x[t][j];
                job.y[(t0 + t) * job.y_stride + r + i] = s + bias;
            }
        }
    }
};

// Prefill tile shapes (K::kPrefillRows rows x up to 4 tokens), chosen by measurement on Zen 3 (288 x 768,
// 64 tokens): for the integer kernels 4 x 4 beats 2 x 4 by ~10% although its 16 accumulators spill; for
// the float kernels 3 x 4 beats 2 x 4 by ~25% and 4 x 4 by ~40%. The driver is in matmul_avx2.hpp.

} // namespace

void matmul_rows_f32_avx2(const MatmulJob &job, int64_t r0, int64_t r1) { drive<Float<LoadF32>>(job, r0, r1); }
void matmul_rows_f16_avx2(const MatmulJob &job, int64_t r0, int64_t r1) { drive<Float<LoadF16>>(job, r0, r1); }
void matmul_rows_bf16_avx2(const MatmulJob &job, int64_t r0, int64_t r1) { drive<Float<LoadBF16>>(job, r0, r1); }
void matmul_rows_q8_0_avx2(const MatmulJob &job, int64_t r0, int64_t r1) {
    if (job.n_tokens > kTokTile) return matmul_panels_q8_0_avx2(job, r0, r1);  // same bits, matmul_panel_avx2.cpp
    drive<Q8_0>(job, r0, r1);
}
void matmul_rows_q4_0_avx2(const MatmulJob &job, int64_t r0, int64_t r1) {
    if (job.n_tokens > kTokTile) return matmul_panels_q4_0_avx2(job, r0, r1);
    drive<Q4_0>(job, r0, r1);
}
void matmul_rows_q4_1_avx2(const MatmulJob &job, int64_t r0, int64_t r1) { drive<Legacy<BlockQ4_1, false, true>>(job, r0, r1); }
void matmul_rows_q5_0_avx2(const MatmulJob &job, int64_t r0, int64_t r1) { drive<Legacy<BlockQ5_0, true, false>>(job, r0, r1); }
void matmul_rows_q5_1_avx2(const MatmulJob &job, int64_t r0, int64_t r1) { drive<Legacy<BlockQ5_1, true, true>>(job, r0, r1); }

// Same arithmetic as quantize_acts_scalar (max|x|, 127 / max, multiply, round to nearest even), so both
// variants produce identical activations.
void quantize_acts_avx2(const float *x, int64_t n, int8_t *qs, float *d, float *sum) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    // packs works within 128-bit lanes; this puts the 4-byte groups back in element order.
    const __m256i unshuffle = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t ib = 0; ib < n / 32; ++ib) {
        const float *xb = x + ib * 32;
        __m256 v[4];
        for (int k = 0; k < 4; ++k) v[k] = _mm256_loadu_ps(xb + 8 * k);
        const __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v[0], abs_mask), _mm256_and_ps(v[1], abs_mask)),
                                       _mm256_max_ps(_mm256_and_ps(v[2], abs_mask), _mm256_and_ps(v[3], abs_mask)));
        const float amax = avx2_hmax(m);
        const float id = amax > 0 ? 127.0f / amax : 0.0f;
        d[ib] = amax / 127.0f;
        const __m256 vid = _mm256_set1_ps(id);
        __m256i q[4];
        for (int k = 0; k < 4; ++k)
            q[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        sum[ib] = static_cast<float>(avx2_hsum_i32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]))));
        const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(qs + ib * 32), _mm256_permutevar8x32_epi32(p, unshuffle));
    }
}

// quantize_acts_k_scalar's arithmetic (QuantActsK: one scale per 256), so the levels agree: the maximum
// over the super-block first, then each 32-element block's rounding as above, with its sum as int16.
void quantize_acts_k_avx2(const float *x, int64_t n, int8_t *qs, float *d, int16_t *sum) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256i unshuffle = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t s = 0; s < n / 256; ++s) {
        const float *xs = x + s * 256;
        __m256 m = _mm256_setzero_ps();
        for (int k = 0; k < 32; ++k) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(xs + 8 * k), abs_mask));
        const float amax = avx2_hmax(m);
        const float id = amax > 0 ? 127.0f / amax : 0.0f;
        d[s] = amax / 127.0f;
        const __m256 vid = _mm256_set1_ps(id);
        for (int b = 0; b < 8; ++b) {
            __m256i q[4];
            for (int k = 0; k < 4; ++k)
                q[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(xs + 32 * b + 8 * k), vid),
                                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            sum[8 * s + b] = static_cast<int16_t>(avx2_hsum_i32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]))));
            const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(qs + 256 * s + 32 * b), _mm256_permutevar8x32_epi32(p, unshuffle));
        }
    }
}

} // namespace ember::cpu::detail
