// quant_b32.hpp — private to src/cpu: the formats whose kernels work a block of 32 weights at a time
// from a decoded form (Q2_K, Q3_K, IQ4_NL, IQ4_XS, MXFP4; layouts in core/dtype.hpp).
//
// Each of them reads, per block of 32, as exact small integers and at most two float factors:
//   value_l = d * sc[l / 16] * q[l] - mn[l / 16]
// (q: the code, the centred code or the table entry, |q| <= 127; sc: the 16-element halves' integer
// scales; mn: Q2_K's offsets dmin * m, 0 for the others). d * sc * q has at most 11 + 6 + 7 significant
// bits, so it is exact in float, and dequantization rounds once, in the subtraction. The matmul kernels
// take sum_l q[l] x[l] per half in integers against the 8-bit activations, as for the other formats.
// The scalar decoders live here (the conversions, the scalar kernels and get_rows use them); the AVX2
// kernels decode with vector code of their own (vec_dot_b32_avx2.cpp).
#pragma once

#include "core/dtype.hpp"
#include "core/fp16.hpp"

#include <cstdint>

namespace ember::cpu::detail {

struct Block32 {
    int8_t q[32];
    int32_t sc[2];
    float d;
    float mn[2];
};

// The decoders: block `ib` (of 32) of a row starting at `row`. Baseline code (they call core/fp16.hpp):
// the AVX2 files must not include this header (see cpu/simd_avx2.hpp).
static inline void b32_decode_q2_k(const uint8_t *row, int64_t ib, Block32 &o) {
    const auto &b = reinterpret_cast<const BlockQ2_K *>(row)[ib / 8];
    const int kb = static_cast<int>(ib % 8), h = kb / 4, k = kb % 4;
    const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
    for (int l = 0; l < 32; ++l) o.q[l] = static_cast<int8_t>((b.qs[32 * h + l] >> (2 * k)) & 3);
    for (int s = 0; s < 2; ++s) {
        const uint8_t sm = b.scales[2 * kb + s];
        o.sc[s] = sm & 15;
        o.mn[s] = dmin * static_cast<float>(sm >> 4);  // exact: 11 + 4 bits
    }
    o.d = d;
}

// Q3_K's scale j (0..15), signed.
static inline int q3_k_scale(const uint8_t *s, int j) {
    const int lo = (s[j % 8] >> (j < 8 ? 0 : 4)) & 15;
    const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | hi << 4) - 32;
}

static inline void b32_decode_q3_k(const uint8_t *row, int64_t ib, Block32 &o) {
    const auto &b = reinterpret_cast<const BlockQ3_K *>(row)[ib / 8];
    const int kb = static_cast<int>(ib % 8), h = kb / 4, k = kb % 4;
    for (int l = 0; l < 32; ++l) {
        const int low = (b.qs[32 * h + l] >> (2 * k)) & 3;
        const int high = (b.hmask[l] >> kb) & 1;  // bit 4h + k = kb
        o.q[l] = static_cast<int8_t>(low - (high ? 0 : 4));
    }
    o.sc[0] = q3_k_scale(b.scales, 2 * kb);
    o.sc[1] = q3_k_scale(b.scales, 2 * kb + 1);
    o.d = fp16_to_fp32(b.d);
    o.mn[0] = o.mn[1] = 0;
}

static inline void b32_table(const uint8_t *qs, const int8_t *table, int8_t *q) {
    for (int l = 0; l < 16; ++l) {
        q[l] = table[qs[l] & 15];
        q[l + 16] = table[qs[l] >> 4];
    }
}

static inline void b32_decode_iq4_nl(const uint8_t *row, int64_t ib, Block32 &o) {
    const auto &b = reinterpret_cast<const BlockIQ4_NL *>(row)[ib];
    b32_table(b.qs, kIq4nlValues, o.q);
    o.sc[0] = o.sc[1] = 1;
    o.d = fp16_to_fp32(b.d);
    o.mn[0] = o.mn[1] = 0;
}

// IQ4_XS's scale of sub-block j (0..7), signed.
static inline int iq4_xs_scale(const BlockIQ4_XS &b, int j) {
    const int lo = (b.scales_l[j / 2] >> (4 * (j % 2))) & 15;
    const int hi = (b.scales_h >> (2 * j)) & 3;
    return (lo | hi << 4) - 32;
}

static inline void b32_decode_iq4_xs(const uint8_t *row, int64_t ib, Block32 &o) {
    const auto &b = reinterpret_cast<const BlockIQ4_XS *>(row)[ib / 8];
    const int j = static_cast<int>(ib % 8);
    b32_table(b.qs + 16 * j, kIq4nlValues, o.q);
    o.sc[0] = o.sc[1] = iq4_xs_scale(b, j);
    o.d = fp16_to_fp32(b.d);
    o.mn[0] = o.mn[1] = 0;
}

static inline void b32_decode_mxfp4(const uint8_t *row, int64_t ib, Block32 &o) {
    const auto &b = reinterpret_cast<const BlockMXFP4 *>(row)[ib];
    b32_table(b.qs, kMxfp4Values, o.q);
    o.sc[0] = o.sc[1] = 1;
    o.d = e8m0_half_to_fp32(b.e);
    o.mn[0] = o.mn[1] = 0;
}

using B32Decoder = void (*)(const uint8_t *row, int64_t ib, Block32 &o);
// The decoder of a format above, or nullptr for any other type.
B32Decoder b32_decoder(DType t);

// n is a multiple of the type's block size.
void dequantize_row_b32(DType t, const void *src, float *dst, int64_t n);
void quantize_row_q2_k(const float *src, BlockQ2_K *dst, int64_t n);
void quantize_row_q3_k(const float *src, BlockQ3_K *dst, int64_t n);
void quantize_row_iq4_nl(const float *src, BlockIQ4_NL *dst, int64_t n);
void quantize_row_iq4_xs(const float *src, BlockIQ4_XS *dst, int64_t n);
void quantize_row_mxfp4(const float *src, BlockMXFP4 *dst, int64_t n);

} // namespace ember::cpu::detail
