// vec_dot_k_x86.hpp — the Q4_K row tiles' (vec_dot_k_avx2.cpp) super-block scales and mins as floats,
// laid out with row i in lane i. (The AVX-512 level's decode tile forms the same products its own way,
// q4_k_scales4 in vec_dot_k_avx512.cpp.)
// Everything is in an anonymous namespace: each file compiles it with its own ISA flags, and an
// ordinary inline function would be merged across them by the linker (see simd_avx2.hpp).
#pragma once

#include "cpu/matmul_avx2.hpp"
#include "cpu/quant_k.hpp"
#include "cpu/simd_avx2.hpp"

#include <immintrin.h>

namespace ember::cpu::detail {

namespace {

// out[j][i] = v[i][j]: R rows' 8 per-sub-block values, as 8 vectors with row i in lane i (R = 1 or 4).
// Two 4 x 4 transposes in registers: element by element through memory, Q4_K_M's decode was ~12 %
// slower than with the old 8-lane tiles; this way ~3 % (4 alternating runs each, TinyLlama shape).
template <int R>
inline void rows_to_lanes(const __m256 (&v)[R], float (&out)[8][4]) {
    if constexpr (R == 1) {
        alignas(32) float t[8];
        _mm256_store_ps(t, v[0]);
        for (int j = 0; j < 8; ++j) out[j][0] = t[j];
    } else {
        static_assert(R == 4);
        for (int half = 0; half < 2; ++half) {
            __m128 r0 = half ? _mm256_extractf128_ps(v[0], 1) : _mm256_castps256_ps128(v[0]);
            __m128 r1 = half ? _mm256_extractf128_ps(v[1], 1) : _mm256_castps256_ps128(v[1]);
            __m128 r2 = half ? _mm256_extractf128_ps(v[2], 1) : _mm256_castps256_ps128(v[2]);
            __m128 r3 = half ? _mm256_extractf128_ps(v[3], 1) : _mm256_castps256_ps128(v[3]);
            const __m128 t0 = _mm_unpacklo_ps(r0, r1), t1 = _mm_unpackhi_ps(r0, r1);
            const __m128 t2 = _mm_unpacklo_ps(r2, r3), t3 = _mm_unpackhi_ps(r2, r3);
            _mm_store_ps(out[4 * half + 0], _mm_movelh_ps(t0, t2));
            _mm_store_ps(out[4 * half + 1], _mm_movehl_ps(t2, t0));
            _mm_store_ps(out[4 * half + 2], _mm_movelh_ps(t1, t3));
            _mm_store_ps(out[4 * half + 3], _mm_movehl_ps(t3, t1));
        }
    }
}

// R rows' super-block s: dsc[j][i] = d * sc_j and dmn[j][i] = dmin * m_j of row i (R = 1 or 4), the
// products the panel GEMM (matmul_panel_avx2.cpp) forms.
template <int R>
inline void q4_k_scales(const BlockQ4_K *const (&w)[R], int64_t s, float (&dsc)[8][4], float (&dmn)[8][4]) {
    __m256 a[R], m[R];  // row i: d * sc_j and dmin * m_j for j = 0..7
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
        const KScaleMin sm = k_scale_min(w[i][s].scales);
        auto widen = [](uint64_t bytes) {  // 8 bytes -> 8 floats
            return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(bytes))));
        };
        a[i] = _mm256_mul_ps(widen(sm.sc), _mm256_set1_ps(avx2_half_to_float(w[i][s].d)));
        m[i] = _mm256_mul_ps(widen(sm.m), _mm256_set1_ps(avx2_half_to_float(w[i][s].dmin)));
    }
    rows_to_lanes<R>(a, dsc);
    rows_to_lanes<R>(m, dmn);
}

} // namespace

} // namespace ember::cpu::detail
