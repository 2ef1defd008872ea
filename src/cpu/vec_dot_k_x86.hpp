// vec_dot_k_x86.hpp — what the AVX2 Q4_K kernels (the row tiles of vec_dot_k_avx2.cpp, the panels of
// matmul_panel_avx2.cpp) share: a super-block's 6-bit scales and mins as the integer operands they weight
// their products with, and the pin that keeps their integer sums in order.
// Against per-256 activations (QuantActsK) a super-block's sub-block products are summed exactly in int32,
// each weighted by its scale sc_j (isum), and the block sums by the mins m_j (msum): both are VPMADDWD
// products of 16-bit pairs, so the scales come as 16-bit pairs here.
// Everything is in an anonymous namespace: each file compiles it with its own ISA flags, and an
// ordinary inline function would be merged across them by the linker (see simd_avx2.hpp).
#pragma once

#include "core/dtype.hpp"

#include <immintrin.h>

namespace ember::cpu::detail {

namespace {

// Left alone, GCC reassociates a chain of integer adds (a block's 16-bit sums in the panels, a super-block's
// int32 sums in the row tile) into a tree over all the products, which keeps them all live and spills the
// tile (measured: Q4_K panels 2048 x 2048, 64 tokens, 2 threads, ~95 -> ~115 GMAC/s with the chain kept).
// An empty asm that "changes" the sum pins the order.
inline void keep_in_register(__m256i &v) { __asm__("" : "+x"(v)); }

// sc: dword j = sc_j in both 16-bit halves, what VPMADDWD multiplies a sub-block's pair sums by (each
// 16-bit pair sum of the sub-block's codes times activations meets sc_j, and adjacent pairs add).
// m: dword p = (m_2p, m_2p+1) as 16-bit values, VPMADDWD's operand against the activations' block sums
// two sub-blocks at a time.
struct Q4KIntScales {
    __m256i sc;
    __m128i m;
};
// k_scale_min's unpacking (quant_k.hpp) in one vector: the 12 scale bytes as dwords w0, w1, w2 give
// sc_0..3 = w0 & 0x3f.., sc_4..7 = (w2 & 0x0f..) | ((w0 >> 2) & 0x30..), and the mins alike from w1 and
// w2 >> 4. In scalar code this was ~14 integer ops per row and super-block, on the ports the vector ops
// use, in the decode tile's hot loop.
inline Q4KIntScales q4k_int_scales(const BlockQ4_K &b) {
    // 16 bytes from the scales: the last 4 are codes of the same block, loaded and left alone.
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i *>(b.scales));
    const __m128i w = _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0));  // w0, w2, w1, w2
    const __m128i lo = _mm_and_si128(_mm_srlv_epi32(w, _mm_setr_epi32(0, 0, 0, 4)),
                                     _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
    const __m128i hi = _mm_and_si128(_mm_shuffle_epi32(_mm_srli_epi32(v, 2), _MM_SHUFFLE(1, 1, 0, 0)),
                                     _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
    const __m128i r = _mm_or_si128(lo, hi);  // bytes 0..7: sc_0..7; 8..15: m_0..7
    // Byte j into both halves of dword j (zero above it): sc_0..3 from the low lane's copy, sc_4..7 from the high's.
    const __m256i sc_pairs = _mm256_setr_epi8(0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1,
                                              4, -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1, 7, -1);
    const __m128i m_words = _mm_setr_epi8(8, -1, 9, -1, 10, -1, 11, -1, 12, -1, 13, -1, 14, -1, 15, -1);
    return {_mm256_shuffle_epi8(_mm256_broadcastsi128_si256(r), sc_pairs), _mm_shuffle_epi8(r, m_words)};
}

} // namespace

} // namespace ember::cpu::detail
