// quant_math.hpp — reading one weight element from the device layout (weights.hpp): plain C++ shared
// by the kernels (matmul.cu: embedding rows, dequantized tiles, the K-quant products) and by
// tests/test_cuda_host.cpp, which checks every type against cpu::dequantize_row on the CPU.
#pragma once

#include "attn_math.hpp"  // EMBER_HD
#include "types.hpp"

#if defined(__CUDA_ARCH__)
#include <cuda_fp16.h>
#else
#include "core/fp16.hpp"
#endif

#include <cstdint>

namespace ember::cu {

constexpr uint32_t kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ8_0 = 8, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kBF16 = 30;

EMBER_HD float f16_bits_to_f32(uint16_t h) {
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(h));
#else
    return fp16_to_fp32(h);
#endif
}
EMBER_HD float bf16_bits_to_f32(uint16_t h) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(static_cast<uint32_t>(h) << 16);
#else
    return bf16_to_fp32(h);
#endif
}
// Rounded products and differences that nvcc may not fuse (the CPU's code is not contracted either).
EMBER_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
EMBER_HD float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}
EMBER_HD uint16_t load_u16(const uint8_t *p) {  // p is 2-byte aligned in every layout used
    return *reinterpret_cast<const uint16_t *>(p);
}

// K-quants: element e (< 256) of a super-block, the value cpu::dequantize_row gives (every product in
// it is exact, so its one rounding is the same in any order; layouts in core/dtype.hpp).
EMBER_HD uint32_t kq_block_bytes(uint32_t type) { return type == kQ4_K ? 144 : type == kQ5_K ? 176 : 210; }
EMBER_HD float kq_value(uint32_t type, const uint8_t *b, int e) {
    if (type == kQ6_K) {
        const int h = e / 128, k = e % 128 / 32, l = e % 32;
        const uint8_t lo = b[64 * h + 32 * (k & 1) + l];
        const int code = (k < 2 ? lo & 15 : lo >> 4) | ((b[128 + 32 * h + l] >> (2 * k)) & 3) << 4;
        const float d = f16_bits_to_f32(load_u16(b + 208));
        return mul_rn(mul_rn(d, static_cast<float>(static_cast<int8_t>(b[192 + e / 16]))), static_cast<float>(code - 32));
    }
    const uint8_t *s = b + 4;
    const int j = e / 32, l = e % 32;
    int sc, m;
    if (j < 4) {
        sc = s[j] & 63, m = s[j + 4] & 63;
    } else {
        sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
        m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
    const float d = f16_bits_to_f32(load_u16(b)), dmin = f16_bits_to_f32(load_u16(b + 2));
    const uint8_t *qs = b + (type == kQ4_K ? 16 : 48) + 32 * (j / 2);
    int code = (j & 1) ? qs[l] >> 4 : qs[l] & 15;
    if (type == kQ5_K) code |= ((b[16 + l] >> j) & 1) << 4;
    return sub_rn(mul_rn(mul_rn(d, static_cast<float>(sc)), static_cast<float>(code)), mul_rn(dmin, static_cast<float>(m)));
}

// Element i of row r of W, dequantized.
EMBER_HD float weight_at(const DevWeight &w, int64_t r, int64_t i) {
    switch (w.type) {
    case kF32: return static_cast<const float *>(w.codes)[r * w.n_in + i];
    case kF16: return f16_bits_to_f32(static_cast<const uint16_t *>(w.codes)[r * w.n_in + i]);
    case kBF16: return bf16_bits_to_f32(static_cast<const uint16_t *>(w.codes)[r * w.n_in + i]);
    case kQ8_0:
        return mul_rn(f16_bits_to_f32(w.scales[r * (w.n_in / 32) + i / 32]),
                      static_cast<float>(static_cast<const int8_t *>(w.codes)[r * w.n_in + i]));
    case kQ4_0: {
        const uint8_t byte = static_cast<const uint8_t *>(w.codes)[r * (w.n_in / 2) + (i / 32) * 16 + i % 16];
        const int q = (i % 32 < 16 ? byte & 0x0F : byte >> 4) - 8;
        return mul_rn(f16_bits_to_f32(w.scales[r * (w.n_in / 32) + i / 32]), static_cast<float>(q));
    }
    default: {  // Q4_K, Q5_K, Q6_K
        const uint8_t *blk = static_cast<const uint8_t *>(w.codes) + (r * (w.n_in / 256) + i / 256) * kq_block_bytes(w.type);
        return kq_value(w.type, blk, static_cast<int>(i % 256));
    }
    }
}

} // namespace ember::cu
