// quant_acts_avx512.cpp — quantizing activations to int8 per block of 32 (QuantActs) on AVX-512, for the
// AVX-512 and AMX levels, 16 blocks at a time. Compiled with the AVX-512 flags (CMakeLists.txt:
// *_avx512.cpp) and reached only through the kernel table after the CPU check (cpu_features.cpp).
//
// Why. The AVX2 kernel (vec_dot_avx2.cpp) takes a block at a time: a horizontal max, two scalar divisions
// (127 / max and max / 127, ~4 cycles each at best) and a horizontal sum per block, 4-5 % of a TinyLlama
// prefill at the AMX level. Here the 16 blocks' maxima and sums are reduced together (a transposing
// tree: 45 operations for 16 blocks, not ~7 per block) and each division is one vector division for 16
// blocks.
//
// Same bits as quantize_acts_scalar and _avx2: per block max |x| (exact, whatever the order, for
// numbers), id = max > 0 ? 127 / max : 0 and d = max / 127 (correctly rounded divisions), q = x * id
// rounded to nearest even (embedded rounding, so the MXCSR mode does not matter), the integer sum of the
// q (exact in any order) as a float. tests/test_cpu_kernels.cpp (test_quantize_acts) compares the levels.
#include "cpu/vec_dot.hpp"

// As in matmul_panel_avx512.cpp: avx512fintrin.h's _mm512_undefined_* initialise themselves on purpose
// (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstring>

namespace ember::cpu::detail {

namespace {

constexpr int kBlocks = 16;  // blocks per pass: one lane each in the reduced vectors

// Lane k of the result = op over the 16 lanes of v[k]. Four levels, each halving the vectors: dwords
// within 128-bit lanes (unpack ps), pairs of dwords (unpack pd), then 128-bit lanes twice (shuffle_f32x4
// 0x88 / 0xdd); tracing the lanes through shows block k lands in lane k. Op must be associative and
// commutative on the values at hand (max of non-negative numbers, integer addition).
template <class Op>
inline __m512 reduce16(const __m512 (&v)[kBlocks], Op op) {
    __m512 t[8], u[4], w[2];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) t[i] = op(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
        const __m512d a = _mm512_castps_pd(t[2 * i]), b = _mm512_castps_pd(t[2 * i + 1]);
        u[i] = op(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
    }
#pragma GCC unroll 2
    for (int i = 0; i < 2; ++i) w[i] = op(_mm512_shuffle_f32x4(u[2 * i], u[2 * i + 1], 0x88), _mm512_shuffle_f32x4(u[2 * i], u[2 * i + 1], 0xdd));
    return op(_mm512_shuffle_f32x4(w[0], w[1], 0x88), _mm512_shuffle_f32x4(w[0], w[1], 0xdd));
}

// 16 blocks of x (512 floats) into qs (512 bytes), d[16] and sum[16].
inline void quantize16(const float *x, int8_t *qs, float *d, float *sum) {
    const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    __m512 m[kBlocks];
#pragma GCC unroll 16
    for (int k = 0; k < kBlocks; ++k)
        m[k] = _mm512_max_ps(_mm512_and_ps(_mm512_loadu_ps(x + 32 * k), abs_mask), _mm512_and_ps(_mm512_loadu_ps(x + 32 * k + 16), abs_mask));
    const __m512 amax = reduce16(m, [](__m512 a, __m512 b) { return _mm512_max_ps(a, b); });
    const __m512 k127 = _mm512_set1_ps(127.0f);
    alignas(64) float id[kBlocks];
    _mm512_store_ps(id, _mm512_maskz_div_ps(_mm512_cmp_ps_mask(amax, _mm512_setzero_ps(), _CMP_GT_OQ), k127, amax));
    _mm512_storeu_ps(d, _mm512_div_ps(amax, k127));
    __m512 s[kBlocks];  // each block's two halves' integers added lane by lane (as float bits, for reduce16)
#pragma GCC unroll 16
    for (int k = 0; k < kBlocks; ++k) {
        const __m512 v = _mm512_set1_ps(id[k]);
        const __m512i q0 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 32 * k), v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __m512i q1 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 32 * k + 16), v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        // Saturating, as the AVX2 kernel's packs (|q| <= 127 for numbers anyway).
        _mm_storeu_si128(reinterpret_cast<__m128i *>(qs + 32 * k), _mm512_cvtsepi32_epi8(q0));
        _mm_storeu_si128(reinterpret_cast<__m128i *>(qs + 32 * k + 16), _mm512_cvtsepi32_epi8(q1));
        s[k] = _mm512_castsi512_ps(_mm512_add_epi32(q0, q1));
    }
    const __m512 total = reduce16(s, [](__m512 a, __m512 b) {
        return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(a), _mm512_castps_si512(b)));
    });
    _mm512_storeu_ps(sum, _mm512_cvtepi32_ps(_mm512_castps_si512(total)));
}

} // namespace

void quantize_acts_avx512(const float *x, int64_t n, int8_t *qs, float *d, float *sum) {
    const int64_t nb = n / 32;
    int64_t ib = 0;
    for (; ib + kBlocks <= nb; ib += kBlocks) quantize16(x + ib * 32, qs + ib * 32, d + ib, sum + ib);
    if (ib == nb) return;
    // The last < 16 blocks through zero blocks (max 0: id 0, d 0), only the real ones kept.
    const int64_t rest = nb - ib;
    alignas(64) float xb[kBlocks * 32] = {};
    alignas(64) int8_t qb[kBlocks * 32];
    float db[kBlocks], sb[kBlocks];
    std::memcpy(xb, x + ib * 32, static_cast<size_t>(rest) * 32 * sizeof(float));
    quantize16(xb, qb, db, sb);
    std::memcpy(qs + ib * 32, qb, static_cast<size_t>(rest) * 32);
    std::memcpy(d + ib, db, static_cast<size_t>(rest) * sizeof(float));
    std::memcpy(sum + ib, sb, static_cast<size_t>(rest) * sizeof(float));
}

// QuantActsK (one scale per 256): quantize_acts_k_scalar's arithmetic, a super-block at a time: its
// maximum, one division each for id and d, then 16 floats per step, each 32-element block's sum reduced
// from its two vectors' integers.
void quantize_acts_k_avx512(const float *x, int64_t n, int8_t *qs, float *d, int16_t *sum) {
    const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    for (int64_t s = 0; s < n / 256; ++s) {
        const float *xs = x + s * 256;
        __m512 m = _mm512_setzero_ps();
#pragma GCC unroll 16
        for (int k = 0; k < 16; ++k) m = _mm512_max_ps(m, _mm512_and_ps(_mm512_loadu_ps(xs + 16 * k), abs_mask));
        const float amax = _mm512_reduce_max_ps(m);
        const float id = amax > 0 ? 127.0f / amax : 0.0f;
        d[s] = amax / 127.0f;
        const __m512 v = _mm512_set1_ps(id);
#pragma GCC unroll 8
        for (int b = 0; b < 8; ++b) {
            const __m512i q0 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xs + 32 * b), v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            const __m512i q1 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xs + 32 * b + 16), v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            _mm_storeu_si128(reinterpret_cast<__m128i *>(qs + 256 * s + 32 * b), _mm512_cvtsepi32_epi8(q0));
            _mm_storeu_si128(reinterpret_cast<__m128i *>(qs + 256 * s + 32 * b + 16), _mm512_cvtsepi32_epi8(q1));
            sum[8 * s + b] = static_cast<int16_t>(_mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1)));
        }
    }
}

} // namespace ember::cpu::detail
