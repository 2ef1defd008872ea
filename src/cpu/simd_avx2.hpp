// simd_avx2.hpp — small AVX2 helpers shared by the *_avx2.cpp files. Include it from those files only.
//
// Everything here is `static inline`, so each AVX2 translation unit gets private copies. That matters:
// an ordinary inline function (or template) compiled with -mavx2 in one file and without it in
// another is emitted as one COMDAT symbol, and the linker may keep the AVX2 copy for callers that run
// before the CPU check. For the same reason the *_avx2.cpp files avoid calling inline functions from
// other headers (core/fp16.hpp, <algorithm>) and use the helpers below instead.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace ember::cpu::detail {

static inline float avx2_hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float avx2_hmax(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline int32_t avx2_hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

static inline float avx2_half_to_float(uint16_t h) { return _cvtsh_ss(h); }

static inline float avx2_bf16_to_float(uint16_t b) {
    const uint32_t w = static_cast<uint32_t>(b) << 16;
    float f;
    __builtin_memcpy(&f, &w, 4);
    return f;
}

// e^x for 8 floats, relative error about 2e-7 over the clamped range.
// Range reduction x = n ln2 + r with |r| <= ln2/2 (ln2 split in a part exact in float and a tail, so
// n ln2 is subtracted without cancellation error); e^r by its Taylor series to r^7 (remainder below
// 0.35^8 / 8! ≈ 5e-9); 2^n by building the exponent bits. Inputs are clamped to [-87.3, 88.3] so that 2^n
// (n in -126..127) stays a normal float: below the range e^x is under 1e-38 (callers only use it as a
// weight beside 1), above it (e^88.3 ≈ 2.1e38) the next n would already overflow.
static inline __m256 avx2_exp(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

} // namespace ember::cpu::detail
