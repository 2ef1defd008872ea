// matmul_float_avx512.cpp — F32, F16 and BF16 weights for batches of tokens on 512-bit registers, with
// the AVX2 tile's bits (vec_dot_avx2.cpp's Float). Each register holds two rows' 8-lane accumulators
// (row i in the low half, row i + 1 in the high half), fed the products the AVX2 tile feeds its 256-bit
// accumulators, in the same order, and reduced by the same horizontal sum: a result is the AVX2 level's
// bit for bit while one FMA does the work of two. Float weights are what encoders (BERT-family
// embedding models ship in F16) and F16/BF16 files of small decoders run on; in a prompt their product is
// bound by the FMAs, not by memory.
//
// Tiles of 2 row pairs x 8 tokens: 16 accumulators, 8 broadcast activation loads and 2 converted weight
// loads per 8 inputs, so the FMAs rather than the loads or the conversions set the pace. Fewer than 8
// tokens (decode, small batches) stay on the AVX2 tiles, which stream memory as fast.
#include "cpu/matmul_walk.hpp"
#include "cpu/simd_avx2.hpp"
#include "cpu/vec_dot.hpp"

#include <immintrin.h>

// As in matmul_panel_avx512.cpp: avx512fintrin.h's _mm512_undefined_* initialise themselves on purpose
// (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace ember::cpu::detail {

namespace {

constexpr int kPairTokens = 8;  // tokens per tile

// Two rows' 8 elements at k as 16 floats (row a low, row b high), and one element as a float.
struct PairF32 {
    static __m512 load(const uint8_t *a, const uint8_t *b, int64_t k) {
        const __m256 lo = _mm256_loadu_ps(reinterpret_cast<const float *>(a) + k);
        return _mm512_insertf32x8(_mm512_castps256_ps512(lo), _mm256_loadu_ps(reinterpret_cast<const float *>(b) + k), 1);
    }
    static float load1(const uint8_t *row, int64_t i) { return reinterpret_cast<const float *>(row)[i]; }
};
struct PairF16 {
    static __m512 load(const uint8_t *a, const uint8_t *b, int64_t k) {
        const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i *>(reinterpret_cast<const uint16_t *>(a) + k));
        const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i *>(reinterpret_cast<const uint16_t *>(b) + k));
        return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
    }
    static float load1(const uint8_t *row, int64_t i) { return avx2_half_to_float(reinterpret_cast<const uint16_t *>(row)[i]); }
};
struct PairBF16 {
    // bf16 is the top half of an f32: widen to 32 bits and shift into place.
    static __m512 load(const uint8_t *a, const uint8_t *b, int64_t k) {
        const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i *>(reinterpret_cast<const uint16_t *>(a) + k));
        const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i *>(reinterpret_cast<const uint16_t *>(b) + k));
        const __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    static float load1(const uint8_t *row, int64_t i) { return avx2_bf16_to_float(reinterpret_cast<const uint16_t *>(row)[i]); }
};

// Rows r .. r + n_rows - 1 (n_rows <= 2P; a missing second row of the last pair reads its first row
// again and is not stored) for tokens t0 .. t0 + T - 1.
template <class L, int P, int T>
void tile(const MatmulJob &job, int64_t r, int n_rows, int64_t t0) {
    const int64_t n = job.n_in;
    const uint8_t *w[2 * P];
    for (int i = 0; i < 2 * P; ++i) w[i] = job.w + static_cast<size_t>(r + (i < n_rows ? i : n_rows - 1)) * job.row_bytes;
    const float *x[T];
    for (int t = 0; t < T; ++t) x[t] = job.x + (t0 + t) * n;
    __m512 acc[P][T];
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p)
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) acc[p][t] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        __m512 wv[P];
#pragma GCC unroll 8
        for (int p = 0; p < P; ++p) wv[p] = L::load(w[2 * p], w[2 * p + 1], k);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
            const __m512 xv = _mm512_broadcast_f32x8(_mm256_loadu_ps(x[t] + k));
#pragma GCC unroll 8
            for (int p = 0; p < P; ++p) acc[p][t] = _mm512_fmadd_ps(wv[p], xv, acc[p][t]);
        }
    }
    // As the AVX2 tile ends: the 8 lanes summed, the n % 8 tail added one product at a time, the bias.
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p)
#pragma GCC unroll 8
        for (int h = 0; h < 2; ++h) {
            const int i = 2 * p + h;
            if (i >= n_rows) break;
            const float bias = job.bias ? job.bias[r + i] : 0.0f;
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) {
                const __m256 half = h ? _mm512_extractf32x8_ps(acc[p][t], 1) : _mm512_castps512_ps256(acc[p][t]);
                float s = avx2_hsum(half);
                for (int64_t j = k; j < n; ++j) s += L::load1(w[i], j) * x[t][j];
                job.y[(t0 + t) * job.y_stride + r + i] = s + bias;
            }
        }
}

// Rows [rb, re) for T tokens from t0: 4-row tiles, then one tile for the 1 to 3 rows left.
template <class L, int T>
void rows_for_tokens(const MatmulJob &job, int64_t rb, int64_t re, int64_t t0) {
    int64_t r = rb;
    for (; r + 4 <= re; r += 4) tile<L, 2, T>(job, r, 4, t0);
    if (re - r > 2) tile<L, 2, T>(job, r, static_cast<int>(re - r), t0);
    else if (r < re) tile<L, 1, T>(job, r, static_cast<int>(re - r), t0);
}

// The shared walk (matmul_walk.hpp) over 8-token groups.
template <class L>
void drive_pairs(const MatmulJob &job, int64_t r0, int64_t r1) {
    walk_row_blocks<kPairTokens>(job, r0, r1,
                                 [&job]<int T>(int64_t rb, int64_t re, int64_t t0) { rows_for_tokens<L, T>(job, rb, re, t0); });
}

} // namespace

void matmul_rows_f32_avx512(const MatmulJob &job, int64_t r0, int64_t r1) {
    if (job.n_tokens < kPairTokens) return matmul_rows_f32_avx2(job, r0, r1);
    drive_pairs<PairF32>(job, r0, r1);
}
void matmul_rows_f16_avx512(const MatmulJob &job, int64_t r0, int64_t r1) {
    if (job.n_tokens < kPairTokens) return matmul_rows_f16_avx2(job, r0, r1);
    drive_pairs<PairF16>(job, r0, r1);
}
void matmul_rows_bf16_avx512(const MatmulJob &job, int64_t r0, int64_t r1) {
    if (job.n_tokens < kPairTokens) return matmul_rows_bf16_avx2(job, r0, r1);
    drive_pairs<PairBF16>(job, r0, r1);
}

} // namespace ember::cpu::detail
