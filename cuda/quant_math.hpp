// quant_math.hpp — reading one weight element from the device layout (weights.hpp): plain C++ shared
// by the kernels (matmul.cu: embedding rows, dequantized tiles, the K-quant products) and by
// tests/test_cuda_host.cpp, which checks every type against cpu::dequantize_row on the CPU.
#pragma once

#include "attn_math.hpp"  // EMBER_HD
#include "rounded_math.hpp"
#include "tile_layout.hpp"
#include "types.hpp"

#if defined(__CUDA_ARCH__)
#include <cuda_fp16.h>
#else
#include "core/fp16.hpp"
#endif

#include <cstdint>

namespace ember::cu {

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
EMBER_HD uint16_t load_u16(const uint8_t *p) {  // p is 2-byte aligned in every layout used
    return *reinterpret_cast<const uint16_t *>(p);
}

// Q4_K/Q5_K: sub-block j's 6-bit scale and min from the block's 12 packed bytes (s = block + 4).
EMBER_HD void kq_scale_min(const uint8_t *s, int j, int &sc, int &m) {
    if (j < 4) {
        sc = s[j] & 63, m = s[j + 4] & 63;
    } else {
        sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
        m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
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
    kq_scale_min(s, j, sc, m);
    const float d = f16_bits_to_f32(load_u16(b)), dmin = f16_bits_to_f32(load_u16(b + 2));
    const uint8_t *qs = b + (type == kQ4_K ? 16 : 48) + 32 * (j / 2);
    int code = (j & 1) ? qs[l] >> 4 : qs[l] & 15;
    if (type == kQ5_K) code |= ((b[16 + l] >> j) & 1) << 4;
    return sub_rn(mul_rn(mul_rn(d, static_cast<float>(sc)), static_cast<float>(code)), mul_rn(dmin, static_cast<float>(m)));
}

// The 8 values lane * 8 .. lane * 8 + 7 of a K-quant super-block (lane < 32: a warp's lane takes 8
// consecutive elements of each super-block), the same floats as kq_value's, with the block's scales
// decoded once rather than per element. The 8 elements share one sub-block (and, in Q6_K, one scale).
// Q4_K and Q5_K read their 8 code bytes with one 8-byte load on the device: the offset is a multiple of
// 8 in blocks of 144 and 176 bytes (weights.cpp starts every tensor aligned); Q6_K's 210-byte blocks
// are not, so it reads bytes.
EMBER_HD void kq_values8(uint32_t type, const uint8_t *b, int lane, float *out) {
    if (type == kQ6_K) {
        const int h = lane / 16, k = lane % 16 / 4, l0 = lane % 4 * 8;
        const float ds = mul_rn(f16_bits_to_f32(load_u16(b + 208)), static_cast<float>(static_cast<int8_t>(b[192 + lane / 2])));
        const uint8_t *lo = b + 64 * h + 32 * (k & 1) + l0, *hi = b + 128 + 32 * h + l0;
        for (int i = 0; i < 8; ++i) {
            const int code = (k < 2 ? lo[i] & 15 : lo[i] >> 4) | ((hi[i] >> (2 * k)) & 3) << 4;
            out[i] = mul_rn(ds, static_cast<float>(code - 32));
        }
        return;
    }
    const uint8_t *s = b + 4;
    const int j = lane / 4, l0 = lane % 4 * 8;
    int sc, m;
    kq_scale_min(s, j, sc, m);
    const float dsc = mul_rn(f16_bits_to_f32(load_u16(b)), static_cast<float>(sc));
    const float dm = mul_rn(f16_bits_to_f32(load_u16(b + 2)), static_cast<float>(m));
    const uint8_t *qs = b + (type == kQ4_K ? 16 : 48) + 32 * (j / 2) + l0;
    uint8_t q[8];
#if defined(__CUDA_ARCH__)
    const uint2 u = *reinterpret_cast<const uint2 *>(qs);
    for (int i = 0; i < 4; ++i) q[i] = static_cast<uint8_t>(u.x >> (8 * i)), q[4 + i] = static_cast<uint8_t>(u.y >> (8 * i));
#else
    for (int i = 0; i < 8; ++i) q[i] = qs[i];
#endif
    for (int i = 0; i < 8; ++i) {
        int code = (j & 1) ? q[i] >> 4 : q[i] & 15;
        if (type == kQ5_K) code |= ((b[16 + l0 + i] >> j) & 1) << 4;
        out[i] = sub_rn(mul_rn(dsc, static_cast<float>(code)), dm);
    }
}

// ---- the other block formats, kept as in the file (layouts in core/dtype.hpp) --------------------------
// Elements and bytes per block, or 0 for a type that is not one of them.
EMBER_HD uint32_t fb_block_elems(uint32_t type) {
    switch (type) {
    case kQ4_1: case kQ5_0: case kQ5_1: case kIQ4_NL: case kMXFP4: return 32;
    case kQ2_K: case kQ3_K: case kIQ4_XS: return 256;
    default: return 0;
    }
}
EMBER_HD uint32_t fb_block_bytes(uint32_t type) {
    switch (type) {
    case kQ4_1: return 20;
    case kQ5_0: return 22;
    case kQ5_1: return 24;
    case kIQ4_NL: return 18;
    case kMXFP4: return 17;
    case kQ2_K: return 84;
    case kQ3_K: return 110;
    case kIQ4_XS: return 136;
    default: return 0;
    }
}
// Nibble l (< 32) of 16 bytes in Q4_0's placement.
EMBER_HD int nibble32(const uint8_t *qs, int l) { return l < 16 ? qs[l] & 15 : qs[l - 16] >> 4; }
EMBER_HD int iq4_entry(int n) {
    constexpr int8_t t[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    return t[n];
}
EMBER_HD int mxfp4_entry(int n) {  // E2M1 doubled
    constexpr int8_t t[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    return t[n];
}
// 2^(e - 128), exactly (subnormal for e < 2).
EMBER_HD float e8m0_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
#if defined(__CUDA_ARCH__)
    return __uint_as_float(bits);
#else
    float f;
    __builtin_memcpy(&f, &bits, 4);
    return f;
#endif
}
// Element e of a block, the value cpu::dequantize_row gives: every product is exact and the one
// rounding (of an offset's addition) happens last, as there.
EMBER_HD float fb_value(uint32_t type, const uint8_t *b, int e) {
    switch (type) {
    case kQ4_1: case kQ5_1: {
        int code = nibble32(b + (type == kQ5_1 ? 8 : 4), e);
        if (type == kQ5_1) code |= ((b[4 + e / 8] >> (e % 8)) & 1) << 4;
        return mul_rn(f16_bits_to_f32(load_u16(b)), static_cast<float>(code)) + f16_bits_to_f32(load_u16(b + 2));
    }
    case kQ5_0: {
        const int code = nibble32(b + 6, e) | ((b[2 + e / 8] >> (e % 8)) & 1) << 4;
        return mul_rn(f16_bits_to_f32(load_u16(b)), static_cast<float>(code - 16));
    }
    case kIQ4_NL: return mul_rn(f16_bits_to_f32(load_u16(b)), static_cast<float>(iq4_entry(nibble32(b + 2, e))));
    case kMXFP4: return mul_rn(e8m0_half(b[0]), static_cast<float>(mxfp4_entry(nibble32(b + 1, e))));
    case kIQ4_XS: {
        const int j = e / 32;
        const int ls = (((b[4 + j / 2] >> (4 * (j % 2))) & 15) | ((load_u16(b + 2) >> (2 * j)) & 3) << 4) - 32;
        const float ds = mul_rn(f16_bits_to_f32(load_u16(b)), static_cast<float>(ls));
        return mul_rn(ds, static_cast<float>(iq4_entry(nibble32(b + 8 + 16 * j, e % 32))));
    }
    case kQ2_K: {  // scales[16], qs[64], d, dmin
        const int h = e / 128, k = e % 128 / 32, l = e % 32;
        const int code = (b[16 + 32 * h + l] >> (2 * k)) & 3, sm = b[e / 16];
        const float d = f16_bits_to_f32(load_u16(b + 80)), dmin = f16_bits_to_f32(load_u16(b + 82));
        return sub_rn(mul_rn(mul_rn(d, static_cast<float>(sm & 15)), static_cast<float>(code)), mul_rn(dmin, static_cast<float>(sm >> 4)));
    }
    default: {  // Q3_K: hmask[32], qs[64], scales[12], d
        const int h = e / 128, k = e % 128 / 32, l = e % 32, j = e / 16;
        const int code = ((b[32 + 32 * h + l] >> (2 * k)) & 3) - (((b[l] >> (4 * h + k)) & 1) ? 0 : 4);
        const uint8_t *s = b + 96;
        const int sc = (((s[j % 8] >> (j < 8 ? 0 : 4)) & 15) | ((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32;
        return mul_rn(mul_rn(f16_bits_to_f32(load_u16(b + 108)), static_cast<float>(sc)), static_cast<float>(code));
    }
    }
}

// Element i of row r of W, dequantized.
EMBER_HD float weight_at(const DevWeight &w, int64_t r, int64_t i) {
    switch (w.type) {
    case kF32: return static_cast<const float *>(w.codes)[r * w.n_in + i];
    case kF16: return f16_bits_to_f32(static_cast<const uint16_t *>(w.codes)[r * w.n_in + i]);
    case kBF16: return bf16_bits_to_f32(static_cast<const uint16_t *>(w.codes)[r * w.n_in + i]);
    case kQ8_0: case kQ4_0: case kQ4_K: case kQ6_K: {  // tiles (tile_layout.hpp)
        const int64_t nb = w.n_in / 32, group = r / kTileRows, b = i / 32;
        const int rr = static_cast<int>(r % kTileRows), k = static_cast<int>(i % 32);
        const uint8_t *codes = static_cast<const uint8_t *>(w.codes);
        const uint8_t byte = codes[tile_start(w.type, group, nb, b) + tile_code_offset(w.type, rr, k)];
        if (w.type == kQ8_0)
            return mul_rn(f16_bits_to_f32(w.scales[(group * nb + b) * kTileRows + tile_scale_slot(rr)]), static_cast<float>(static_cast<int8_t>(byte)));
        if (w.type == kQ6_K) {  // d times the scale of the element's 16, times the centred code
            const uint8_t *unit = codes + unit_start(w.type, group, nb, b);
            const float d = f16_bits_to_f32(load_u16(unit + 2 * rr));
            const int8_t sc = static_cast<int8_t>(unit[2 * kTileRows + 16 * rr + (i % 256) / 16]);
            return mul_rn(mul_rn(d, static_cast<float>(sc)), static_cast<float>(static_cast<int8_t>(byte)));
        }
        const int q = k < 16 ? byte & 0x0F : byte >> 4;
        if (w.type == kQ4_0) return mul_rn(f16_bits_to_f32(w.scales[(group * nb + b) * kTileRows + tile_scale_slot(rr)]), static_cast<float>(q - 8));
        const uint8_t *head = codes + unit_start(w.type, group, nb, b) + rr * 16;  // Q4_K: the file's
        int sc, m;
        kq_scale_min(head + 4, static_cast<int>(b % 8), sc, m);
        return sub_rn(mul_rn(mul_rn(f16_bits_to_f32(load_u16(head)), static_cast<float>(sc)), static_cast<float>(q)),
                      mul_rn(f16_bits_to_f32(load_u16(head + 2)), static_cast<float>(m)));
    }
    case kQ5_K: {
        const uint8_t *blk = static_cast<const uint8_t *>(w.codes) + (r * (w.n_in / 256) + i / 256) * kq_block_bytes(w.type);
        return kq_value(w.type, blk, static_cast<int>(i % 256));
    }
    default: {  // the other block formats (fb_*)
        const uint32_t be = fb_block_elems(w.type);
        const uint8_t *blk = static_cast<const uint8_t *>(w.codes) + (r * (w.n_in / be) + i / be) * fb_block_bytes(w.type);
        return fb_value(w.type, blk, static_cast<int>(i % be));
    }
    }
}

} // namespace ember::cu
