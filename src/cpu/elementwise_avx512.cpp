// elementwise_avx512.cpp — swiglu and GELU on 512-bit vectors for the AVX-512 and AMX levels. The AVX2 kernel's
// operations lane for lane (simd_avx512.hpp's avx512_exp is avx2_exp on 16 lanes; the division and the
// multiply are IEEE operations), so each element gets the AVX2 level's bits; twice the elements per
// instruction where the exp's 13 vector operations an element are the cost (2.7 % of a TinyLlama
// prefill of 512 tokens at the AMX level before this).
#include "cpu/gelu_lanes.hpp"
#include "cpu/simd_avx512.hpp"
#include "cpu/vec_dot.hpp"

// As in matmul_panel_avx512.cpp: avx512fintrin.h's _mm512_undefined_* initialise themselves on purpose
// (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace ember::cpu::detail {

void swiglu_avx512(const float *gate, const float *up, float *out, int64_t n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512i neg = _mm512_set1_epi32(static_cast<int>(0x80000000u));
    for (int64_t i = 0; i < n; i += 16) {
        // The tail through the same operations on masked lanes (zeros outside, never stored).
        const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1);
        const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
        const __m512 e = avx512_exp(_mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(g), neg)));
        _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), _mm512_maskz_loadu_ps(m, up + i)));
    }
}

// GELU on 16 lanes: gelu_lanes.hpp's operations, the baseline's bits.
void gelu_avx512(const float *x, const float *up, float *out, int64_t n) { GeluLanes<GeluF16, GeluI16, 16>::rows(x, up, out, n); }

} // namespace ember::cpu::detail
