// panel_pack_x86.hpp — what the AVX2 and AVX-512 panel GEMMs (matmul_panel_avx2.cpp,
// matmul_panel_avx512.cpp) share: where a tile's tokens are, and how one weight row's block is taken
// apart for packing (the K-quants' scales and codes). The two differ in panel height (8 or 16 rows)
// and vector width, not in what a row contributes, which is why both give the same bits. Include it
// from *_avx2.cpp / *_avx512.cpp files only: everything here has internal linkage, so each file gets
// its own copy compiled for its ISA (see simd_avx2.hpp).
#pragma once

#include "core/dtype.hpp"
#include "cpu/quant_k.hpp"
#include "cpu/simd_avx2.hpp"
#include "cpu/vec_dot.hpp"

namespace ember::cpu::detail {

namespace {

// Where a tile reads token t's activations for blocks b0 .. and writes its outputs y[t][r ..].
template <int T>
struct PanelTokens {
    const int8_t *xq[T];
    const float *xd[T], *xs[T];
    float *y[T];
    PanelTokens(const MatmulJob &job, int64_t b0, int64_t r, int64_t t0) {
        for (int t = 0; t < T; ++t) {
            xq[t] = job.xq.qs + (t0 + t) * job.n_in + b0 * 32;
            xd[t] = job.xq.d + (t0 + t) * job.xq.nb + b0;
            xs[t] = job.xq.sum + (t0 + t) * job.xq.nb + b0;
            y[t] = job.y + (t0 + t) * job.y_stride + r;
        }
    }
};

inline __m256 widen_bytes(uint64_t bytes) {  // 8 unsigned bytes -> 8 floats
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(bytes))));
}

// Q4_K: a super-block's 8 sub-block scales d * sc_j and offsets dmin * m_j (both exact: 11 + 6
// significant bits).
inline void q4k_scales(const BlockQ4_K *blk, float (&dsc)[8], float (&dmin)[8]) {
    const KScaleMin sm = k_scale_min(blk->scales);
    _mm256_storeu_ps(dsc, _mm256_mul_ps(widen_bytes(sm.sc), _mm256_set1_ps(avx2_half_to_float(blk->d))));
    _mm256_storeu_ps(dmin, _mm256_mul_ps(widen_bytes(sm.m), _mm256_set1_ps(avx2_half_to_float(blk->dmin))));
}

// Q4_K: the 32-byte group g of qs holds sub-block 2g in its low nibbles and 2g + 1 in its high nibbles,
// element l in byte l. lo[h] / hi[h]: elements 16h .. 16h + 15 of sub-block 2g / 2g + 1, one per byte.
inline void q4k_group_codes(const BlockQ4_K *blk, int g, __m128i (&lo)[2], __m128i (&hi)[2]) {
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(blk->qs + 32 * g));
    const __m256i l = _mm256_and_si256(v, low4);
    const __m256i h = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
    lo[0] = _mm256_castsi256_si128(l);
    lo[1] = _mm256_extracti128_si256(l, 1);
    hi[0] = _mm256_castsi256_si128(h);
    hi[1] = _mm256_extracti128_si256(h, 1);
}

// Q6_K: one row's share of activation block kb (32 elements of a super-block), as the panels use it:
// value = d * sc * (code - 32), the weight w = code - 32 (-32..31) as the signed operand.
struct Q6Piece {
    __m128i lo, hi;    // w of elements 0..15 and 16..31, one per byte
    int sc_lo, sc_hi;  // the two 16-element halves' scales
    int32_t off;       // 128 * sum of w * sc: what the activations' offset of 128 adds, taken off again
    float d;
};
inline Q6Piece q6k_piece(const BlockQ6_K *blk, int kb) {
    // Activation block kb = 4h + k is quarter k of half h: its low code bits are the low (k < 2) or high
    // nibbles of ql[64h + 32 (k & 1) ..], its top two bits bits 2k, 2k + 1 of qh[32h ..].
    const int h = kb / 4, k = kb % 4;
    __m256i l = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(blk->ql + 64 * h + 32 * (k & 1)));
    if (k >= 2) l = _mm256_srli_epi16(l, 4);
    __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(blk->qh + 32 * h));
    hb = k < 2 ? _mm256_slli_epi16(hb, 4 - 2 * k) : _mm256_srli_epi16(hb, 2 * k - 4);
    const __m256i code = _mm256_or_si256(_mm256_and_si256(l, _mm256_set1_epi8(0x0f)), _mm256_and_si256(hb, _mm256_set1_epi8(0x30)));
    const __m256i w = _mm256_sub_epi8(code, _mm256_set1_epi8(32));
    // sum of w per half: the codes' byte sums (sad) less 32 * 16.
    const __m256i sums = _mm256_sad_epu8(code, _mm256_setzero_si256());
    const int s_lo = _mm256_extract_epi32(sums, 0) + _mm256_extract_epi32(sums, 2) - 512;
    const int s_hi = _mm256_extract_epi32(sums, 4) + _mm256_extract_epi32(sums, 6) - 512;
    Q6Piece p;
    p.lo = _mm256_castsi256_si128(w);
    p.hi = _mm256_extracti128_si256(w, 1);
    p.sc_lo = blk->scales[2 * kb];
    p.sc_hi = blk->scales[2 * kb + 1];
    p.off = 128 * (p.sc_lo * s_lo + p.sc_hi * s_hi);
    p.d = avx2_half_to_float(blk->d);
    return p;
}

} // namespace

} // namespace ember::cpu::detail
