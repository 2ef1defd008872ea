// quant_k.hpp — private to src/cpu: the K-quant super-block formats (Q4_K, Q5_K, Q6_K; layouts in
// core/dtype.hpp): conversions (quant_k.cpp) and the unpacking of Q4_K/Q5_K's 6-bit scales, which the
// conversions and both kernel variants share.
#pragma once

#include "core/dtype.hpp"

#include <cstdint>

namespace ember::cpu::detail {

// Byte j of sc / m is sub-block j's 6-bit scale / min.
struct KScaleMin {
    uint64_t sc, m;
};

// Unpacks the 12 scale bytes of a Q4_K/Q5_K super-block a 32-bit word at a time: bytes 0..3 hold
// sc_0..3 (and the top bits of sc_4..7), bytes 4..7 m_0..3 (and the top bits of m_4..7), bytes 8..11
// the low nibbles of sc_4..7 and m_4..7 — so each half of the result is a few masks and shifts of one
// or two words rather than 16 byte extractions. Little-endian, like every GGUF reader here. static,
// not just inline: the AVX2 file calls it too (see simd_avx2.hpp).
static inline KScaleMin k_scale_min(const uint8_t *scales) {
    uint32_t w0, w1, w2;
    __builtin_memcpy(&w0, scales, 4);
    __builtin_memcpy(&w1, scales + 4, 4);
    __builtin_memcpy(&w2, scales + 8, 4);
    const uint32_t sc_lo = w0 & 0x3f3f3f3fu;
    const uint32_t m_lo = w1 & 0x3f3f3f3fu;
    const uint32_t sc_hi = (w2 & 0x0f0f0f0fu) | ((w0 >> 2) & 0x30303030u);  // bits 6..7 of byte j-4 -> 4..5
    const uint32_t m_hi = ((w2 >> 4) & 0x0f0f0f0fu) | ((w1 >> 2) & 0x30303030u);
    return {sc_lo | static_cast<uint64_t>(sc_hi) << 32, m_lo | static_cast<uint64_t>(m_hi) << 32};
}

// n is a multiple of QK_K.
void dequantize_row_q4_k(const BlockQ4_K *src, float *dst, int64_t n);
void dequantize_row_q5_k(const BlockQ5_K *src, float *dst, int64_t n);
void dequantize_row_q6_k(const BlockQ6_K *src, float *dst, int64_t n);
void quantize_row_q4_k(const float *src, BlockQ4_K *dst, int64_t n);
void quantize_row_q5_k(const float *src, BlockQ5_K *dst, int64_t n);
void quantize_row_q6_k(const float *src, BlockQ6_K *dst, int64_t n);

} // namespace ember::cpu::detail
