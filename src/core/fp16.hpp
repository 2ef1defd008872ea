// fp16.hpp — IEEE half and bfloat16 conversions (scalar; the CPU kernels use F16C where present).
#pragma once

#include <cstdint>
#include <cstring>

namespace ember {

inline float fp32_from_bits(uint32_t w) { float f; std::memcpy(&f, &w, 4); return f; }
inline uint32_t fp32_to_bits(float f) { uint32_t w; std::memcpy(&w, &f, 4); return w; }

// Exact half -> float (handles subnormals, inf, NaN).
inline float fp16_to_fp32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
        if (mant == 0) return fp32_from_bits(sign);
        // subnormal: normalise
        int e = -1;
        do { ++e; mant <<= 1; } while ((mant & 0x400u) == 0);
        mant &= 0x3ffu;
        return fp32_from_bits(sign | ((127 - 15 - e) << 23) | (mant << 13));
    }
    if (exp == 31) return fp32_from_bits(sign | 0x7f800000u | (mant << 13));
    return fp32_from_bits(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}

// float -> half, round to nearest even; overflow gives inf, NaN stays NaN.
inline uint16_t fp32_to_fp16(float f) {
    uint32_t x = fp32_to_bits(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (x > 0x7f800000u ? 0x200u : 0));
    if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
    if (x < 0x38800000u) {                                                // subnormal half or zero
        if (x < 0x33000000u) return static_cast<uint16_t>(sign);
        const uint32_t e = x >> 23;
        uint32_t m = (x & 0x7fffffu) | 0x800000u;
        const uint32_t shift = 126 - e;  // 14 + (113 - e) ... keeps 10 bits after alignment
        uint32_t half = m >> (shift);
        const uint32_t rem = m & ((1u << shift) - 1);
        const uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) ++half;
        return static_cast<uint16_t>(sign | half);
    }
    uint32_t h = ((x - 0x38000000u) >> 13);
    const uint32_t rem = x & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
}

inline float bf16_to_fp32(uint16_t b) { return fp32_from_bits(static_cast<uint32_t>(b) << 16); }

inline uint16_t fp32_to_bf16(float f) {
    uint32_t x = fp32_to_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
    x += 0x7fffu + ((x >> 16) & 1u);
    return static_cast<uint16_t>(x >> 16);
}

// The largest half <= f and the smallest half >= f, for finite f within the half range (|f| <= 65504).
// Quantizers store scales and offsets this way when the stored value must not fall short of the
// range it has to cover (see cpu/quant.cpp).
inline uint16_t fp32_to_fp16_floor(float f) {
    uint16_t h = fp32_to_fp16(f);
    if (fp16_to_fp32(h) > f) h = (h & 0x8000u) ? static_cast<uint16_t>(h + 1)          // more negative
                               : (h == 0 ? uint16_t{0x8001} : static_cast<uint16_t>(h - 1));
    return h;
}
inline uint16_t fp32_to_fp16_ceil(float f) {
    uint16_t h = fp32_to_fp16(f);
    if (fp16_to_fp32(h) < f) h = (h & 0x8000u) ? (h == 0x8000u ? uint16_t{0x0001} : static_cast<uint16_t>(h - 1))
                               : static_cast<uint16_t>(h + 1);
    return h;
}

} // namespace ember
