// vec_dot_k_x86.hpp — a Q4_K super-block's 6-bit scales and mins as the integer operands the AVX2 kernels
// (the row tiles of vec_dot_k_avx2.cpp, the panels of matmul_panel_avx2.cpp) weight their products with.
// Against per-256 activations (QuantActsK) a super-block's sub-block products are summed exactly in int32,
// each weighted by its scale sc_j (isum), and the block sums by the mins m_j (msum): both are VPMADDWD
// products of 16-bit pairs, so the scales come as 16-bit pairs here.
// Everything is in an anonymous namespace: each file compiles it with its own ISA flags, and an
// ordinary inline function would be merged across them by the linker (see simd_avx2.hpp).
#pragma once

#include "core/dtype.hpp"
#include "cpu/quant_k.hpp"

#include <immintrin.h>

namespace ember::cpu::detail {

namespace {

// sc: dword j = sc_j in both 16-bit halves, what VPMADDWD multiplies a sub-block's pair sums by (each
// 16-bit pair sum of the sub-block's codes times activations meets sc_j, and adjacent pairs add).
// m: dword p = (m_2p, m_2p+1) as 16-bit values, VPMADDWD's operand against the activations' block sums
// two sub-blocks at a time.
struct Q4KIntScales {
    __m256i sc;
    __m128i m;
};
inline Q4KIntScales q4k_int_scales(const BlockQ4_K &b) {
    const KScaleMin sm = k_scale_min(b.scales);
    const __m256i sc = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(sm.sc)));
    return {_mm256_or_si256(sc, _mm256_slli_epi32(sc, 16)), _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sm.m)))};
}

} // namespace

} // namespace ember::cpu::detail
