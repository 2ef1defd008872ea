// rows16_x86.hpp — reading the fields of an interleaved record (rows16.hpp) for its 16 rows at once, on
// 512-bit vectors: what the AVX-512 decode tiles (rows16_avx512.cpp) and the AVX-512 and AMX panels'
// packers (panel_pack_x86.hpp) both read. Only for files compiled with the AVX-512 flags.
#pragma once

#include "cpu/rows16.hpp"

#include <immintrin.h>

#include <cstdint>

namespace ember::cpu::detail {

// The 16 fp16 values at p (a record's d or dmin) as floats.
inline __m512 halves16(const uint8_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p))); }

// A Q4_K record's 6-bit scales and mins of its 16 rows, as k_scale_min (quant_k.hpp) forms them, on byte
// u of all rows at once: 16-byte quarter j of sc[0] holds sc_j of rows 0..15, of sc[1] sc_(4 + j); mn
// the same for the mins.
inline void q4k_rows16_scales(const uint8_t *rec, uint8_t (&sc)[2][64], uint8_t (&mn)[2][64]) {
    const __m512i m0f = _mm512_set1_epi8(0x0f), m3f = _mm512_set1_epi8(0x3f), m30 = _mm512_set1_epi8(0x30);
    const uint8_t *q = rec + kQ4KRecScales;
    const __m512i a = _mm512_loadu_si512(q), b = _mm512_loadu_si512(q + 64), c = _mm512_loadu_si512(q + 128);
    _mm512_storeu_si512(sc[0], _mm512_and_si512(a, m3f));
    _mm512_storeu_si512(mn[0], _mm512_and_si512(b, m3f));
    _mm512_storeu_si512(sc[1], _mm512_or_si512(_mm512_and_si512(c, m0f), _mm512_and_si512(_mm512_srli_epi16(a, 2), m30)));
    _mm512_storeu_si512(mn[1], _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(c, 4), m0f),
                                               _mm512_and_si512(_mm512_srli_epi16(b, 2), m30)));
}

// Byte quarter j of one of q4k_rows16_scales' arrays (16 rows' 8-bit values) as floats.
inline __m512 widen16(const uint8_t *p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p))));
}

// The mins of q4k_rows16_scales' mn paired for VPDPWSSD: lane i of pairs[k] holds m_2k of row i in its
// low 16 bits and m_(2k + 1) in its high 16 bits, so that one VPDPWSSD against the broadcast pair of
// activation block sums (S_2k, S_(2k + 1)), adjacent int16 in QuantActsK::sum, adds both products.
inline void q4k_rows16_min_pairs(const uint8_t (&mn)[2][64], __m512i (&pairs)[4]) {
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
        const uint8_t *m = &mn[k / 2][32 * (k % 2)];  // m_2k of rows 0..15, then m_(2k + 1)
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(m));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(m + 16));
        pairs[k] = _mm512_cvtepu8_epi16(_mm256_set_m128i(_mm_unpackhi_epi8(a, b), _mm_unpacklo_epi8(a, b)));
    }
}

// The 16 rows' signed 8-bit scale u of a Q6_K record, widened to int32.
inline __m512i q6k_rows16_scale(const uint8_t *rec, int u) {
    return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(rec + kQ6KRecScales + 16 * u)));
}

} // namespace ember::cpu::detail
