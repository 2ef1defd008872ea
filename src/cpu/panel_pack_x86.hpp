// panel_pack_x86.hpp — what the AVX2, AVX-512 and AMX panel GEMMs (matmul_panel_avx2.cpp,
// matmul_panel_avx512.cpp, matmul_panel_amx.cpp) share: where a tile's tokens are, and how one weight
// row's block is taken apart for packing (the K-quants' scales and codes). They differ in panel height
// (8 or 16 rows) and in how the products are formed, not in what a row contributes, which is why all
// give the same bits. Include it from *_avx2.cpp / *_avx512.cpp / *_amx.cpp files only: everything here
// has internal linkage, so each file gets its own copy compiled for its ISA (see simd_avx2.hpp); the
// 16-row part exists only where the file is compiled for AVX-512.
#pragma once

#include "core/dtype.hpp"
#include "cpu/quant_k.hpp"
#include "cpu/rows16.hpp"
#if defined(__AVX512F__)
#include "cpu/rows16_x86.hpp"
#endif
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

// The same for a Q4_K tile against the per-256 activations (QuantActsK), from activation block b0 (a
// super-block's first): its values, its super-blocks' scales and its blocks' sums.
template <int T>
struct PanelTokensK {
    const int8_t *xq[T];
    const float *xd[T];
    const int16_t *xs[T];
    float *y[T];
    PanelTokensK(const MatmulJob &job, int64_t b0, int64_t r, int64_t t0) {
        const QuantActsK &xk = job.xk;
        for (int t = 0; t < T; ++t) {
            xq[t] = xk.qs + (t0 + t) * job.n_in + b0 * 32;
            xd[t] = xk.d + (t0 + t) * xk.nsb + b0 / (QK_K / 32);
            xs[t] = xk.sum + (t0 + t) * xk.nb + b0;
            y[t] = job.y + (t0 + t) * job.y_stride + r;
        }
    }
};

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

// Q4_K: the codes of one super-block of kRows rows (blk[i]) into the 8 packed blocks of its sub-blocks
// (field q), elements 0..15 then 16..31, each half transposed (Transpose: kRows rows' 16 bytes -> 4
// vectors of 4-byte groups).
template <int kRows, class Block, class Transpose>
void q4k_codes(const BlockQ4_K *const (&blk)[kRows], Block *pb, Transpose transpose) {
    constexpr size_t kHalf = sizeof(pb->q) / 2;
    for (int g = 0; g < 4; ++g) {
        __m128i lo[2][kRows], hi[2][kRows];  // [half of the group][row]
        for (int i = 0; i < kRows; ++i) {
            __m128i l[2], h[2];
            q4k_group_codes(blk[i], g, l, h);
            lo[0][i] = l[0], lo[1][i] = l[1], hi[0][i] = h[0], hi[1][i] = h[1];
        }
        transpose(lo[0], pb[2 * g].q);
        transpose(lo[1], pb[2 * g].q + kHalf);
        transpose(hi[0], pb[2 * g + 1].q);
        transpose(hi[1], pb[2 * g + 1].q + kHalf);
    }
}

// Q6_K packing for a panel of kRows rows: one packed block per activation block, its two halves' w
// transposed into w[0] and w[1], off and d per row, and the scales as the kernel wants them
// (set_scales(block, row, piece)).
template <int kRows, class Block, class Transpose, class SetScales>
void pack_q6_k(const uint8_t *const (&rows)[kRows], int64_t b0, int64_t n, Block *out, Transpose transpose,
               SetScales set_scales) {
    constexpr int64_t kUnit = QK_K / 32;
    for (int64_t sb = 0; sb < n / kUnit; ++sb) {
        const int64_t s = b0 / kUnit + sb;
        Block *pb = out + sb * kUnit;
        for (int kb = 0; kb < kUnit; ++kb) {
            __m128i lo[kRows], hi[kRows];
            for (int i = 0; i < kRows; ++i) {
                const Q6Piece q = q6k_piece(reinterpret_cast<const BlockQ6_K *>(rows[i]) + s, kb);
                lo[i] = q.lo;
                hi[i] = q.hi;
                set_scales(pb[kb], i, q);
                pb[kb].off[i] = q.off;
                pb[kb].d[i] = q.d;
            }
            transpose(lo, reinterpret_cast<uint8_t *>(pb[kb].w[0]));
            transpose(hi, reinterpret_cast<uint8_t *>(pb[kb].w[1]));
        }
    }
}

// The other signed-code formats as Q6Pieces (quant_b32.hpp's Q3_K, IQ4_NL, IQ4_XS, MXFP4): w the code
// (-4..3) or the table entry, Q3_K's signed 16-element scales, the others scale 1 with the block's float
// scale in d (IQ4_XS: d * (ls - 32), exact), no offset of their own. Piece::get(row, activation block).
// Sum of 16 signed bytes.
inline int sum16(__m128i v) {
    const __m128i s = _mm_sad_epu8(_mm_xor_si128(v, _mm_set1_epi8(static_cast<char>(0x80))), _mm_setzero_si128());
    return _mm_cvtsi128_si32(s) + _mm_extract_epi16(s, 4) - 16 * 128;
}

inline Q6Piece piece_of(__m128i lo, __m128i hi, int sc_lo, int sc_hi, float d) {
    return Q6Piece{lo, hi, sc_lo, sc_hi, 128 * (sum16(lo) * sc_lo + sum16(hi) * sc_hi), d};
}

// 32 table entries from 16 bytes of nibbles in Q4_0's placement: elements 0..15, then 16..31.
inline Q6Piece table_piece(const uint8_t *qs, const int8_t *table, float d) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i *>(qs));
    const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i *>(table)), m4 = _mm_set1_epi8(15);
    return piece_of(_mm_shuffle_epi8(t, _mm_and_si128(v, m4)), _mm_shuffle_epi8(t, _mm_and_si128(_mm_srli_epi16(v, 4), m4)),
                    1, 1, d);
}

struct IQ4NLPiece {
    static Q6Piece get(const uint8_t *row, int64_t ib) {
        const auto &b = reinterpret_cast<const BlockIQ4_NL *>(row)[ib];
        return table_piece(b.qs, kIq4nlValues, avx2_half_to_float(b.d));
    }
};
struct MXFP4Piece {
    static Q6Piece get(const uint8_t *row, int64_t ib) {
        const auto &b = reinterpret_cast<const BlockMXFP4 *>(row)[ib];
        return table_piece(b.qs, kMxfp4Values, e8m0_half_to_fp32(b.e));  // static in core/dtype.hpp
    }
};
struct IQ4XSPiece {
    static Q6Piece get(const uint8_t *row, int64_t ib) {
        const auto &b = reinterpret_cast<const BlockIQ4_XS *>(row)[ib / 8];
        const int j = static_cast<int>(ib % 8);
        const int ls = (((b.scales_l[j / 2] >> (4 * (j % 2))) & 15) | ((b.scales_h >> (2 * j)) & 3) << 4) - 32;
        return table_piece(b.qs + 16 * j, kIq4nlValues, avx2_half_to_float(b.d) * static_cast<float>(ls));
    }
};
// Q3_K's sub-block kb: low code bits at bits 2 (kb % 4) of qs[32 (kb / 4) + l], the high bit at bit kb of
// hmask[l] (code - 4 where it is clear); scales as quant_b32.hpp's q3_k_scale.
struct Q3KPiece {
    static int scale(const uint8_t *s, int j) {
        return ((((s[j % 8] >> (j < 8 ? 0 : 4)) & 15) | ((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
    }
    static Q6Piece get(const uint8_t *row, int64_t ib) {
        const auto &b = reinterpret_cast<const BlockQ3_K *>(row)[ib / 8];
        const int kb = static_cast<int>(ib % 8);
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b.qs + 32 * (kb / 4)));
        const __m256i low = _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(2 * (kb % 4))), _mm256_set1_epi8(3));
        const __m256i hm = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b.hmask));
        const __m256i clear = _mm256_cmpeq_epi8(_mm256_and_si256(hm, _mm256_set1_epi8(static_cast<char>(1 << kb))), _mm256_setzero_si256());
        const __m256i q = _mm256_add_epi8(low, _mm256_and_si256(clear, _mm256_set1_epi8(-4)));
        return piece_of(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1), scale(b.scales, 2 * kb),
                        scale(b.scales, 2 * kb + 1), avx2_half_to_float(b.d));
    }
};

// Packing of the pieces above (Piece::get) into Q6_K's panel blocks, one per activation block, as
// pack_q6_k does for Q6_K (the scales as the kernel wants them: set_scales(block, row, piece)).
template <class Piece, int kRows, class Block, class Transpose, class SetScales>
void pack_pieces(const uint8_t *const (&rows)[kRows], int64_t b0, int64_t n, Block *out, Transpose transpose,
                 SetScales set_scales) {
    for (int64_t b = 0; b < n; ++b) {
        __m128i lo[kRows], hi[kRows];
        for (int i = 0; i < kRows; ++i) {
            const Q6Piece q = Piece::get(rows[i], b0 + b);
            lo[i] = q.lo, hi[i] = q.hi;
            set_scales(out[b], i, q);
            out[b].off[i] = q.off, out[b].d[i] = q.d;
        }
        transpose(lo, reinterpret_cast<uint8_t *>(out[b].w[0]));
        transpose(hi, reinterpret_cast<uint8_t *>(out[b].w[1]));
    }
}

#if defined(__AVX512F__)
// ---- 16-row panels (matmul_panel_avx512.cpp, matmul_panel_amx.cpp) -------------------------------------
// Both lay 16 rows out the same way: a packed block holds the rows' codes one per byte as 64-byte
// vectors, vector k holding elements 4k .. 4k + 3 of each row (dword i = row i). That is VPDPBUSD's
// operand with a row per lane, and AMX's B tile (K/4 rows of 16 dwords: VNNI layout) as it stands.
constexpr int kPanel16 = 16;

// 4-byte groups of 8 rows' 16 bytes (row i in src[i]) as 4 vectors, vector k holding group k of rows
// 0..7 (the AVX2 file's transpose: rows i and i + 4 in the two 128-bit lanes, two 4 x 4 transposes at
// once by 32/64-bit unpacks).
inline void transpose8(const __m128i *src, __m256i (&out)[4]) {
    __m256i v[4];
    for (int i = 0; i < 4; ++i) v[i] = _mm256_set_m128i(src[i + 4], src[i]);
    const __m256i x0 = _mm256_unpacklo_epi32(v[0], v[1]), x1 = _mm256_unpackhi_epi32(v[0], v[1]);
    const __m256i x2 = _mm256_unpacklo_epi32(v[2], v[3]), x3 = _mm256_unpackhi_epi32(v[2], v[3]);
    out[0] = _mm256_unpacklo_epi64(x0, x2);
    out[1] = _mm256_unpackhi_epi64(x0, x2);
    out[2] = _mm256_unpacklo_epi64(x1, x3);
    out[3] = _mm256_unpackhi_epi64(x1, x3);
}
// The same for 16 rows: vector k, dword i = group k of row i.
inline void transpose16(const __m128i (&src)[kPanel16], uint8_t *dst) {
    __m256i a[4], b[4];
    transpose8(src, a);
    transpose8(src + 8, b);
    auto *out = reinterpret_cast<__m512i *>(dst);
    for (int k = 0; k < 4; ++k) _mm512_store_si512(out + k, _mm512_inserti64x4(_mm512_castsi256_si512(a[k]), b[k], 1));
}

// Q4_0 and Q8_0 on 16-row panels: the codes (8 vectors of 64 bytes), s their scale d per row. pad: where
// Q4_K's mins were before it moved to Q4KBlock16, kept so that the chunks of the AVX-512 and AMX panels
// (a byte budget over this size) keep the block counts they were measured with.
struct alignas(64) Q4Block16 {
    uint8_t q[8 * 64];
    float s[kPanel16];
    float pad[kPanel16];
};

// Q4_0 blocks [b0, b0 + n) of 16 rows, codes less `offset` (0: the codes 0..15 as stored, for VPDPBUSD's
// unsigned operand; 8: the weights -8..7 themselves, for AMX's signed one). Byte l of qs holds element l
// (low nibble) and l + 16 (high nibble), so the transposed bytes split into vectors 0..3 and 4..7. The
// transposed vectors are gathered (one VPGATHERDD of 16 rows' dword k each): 16 row loads and
// transpose16's shuffles took longer (kernel, 2 threads, 3 alternating rounds: AMX +1-6 %, AVX-512 +0-3 %).
// The fp16 scales d of block b of 16 rows (block type Block, d its first field) as floats, gathered in
// registers: 16 two-byte stores and a vector load of them would wait for the stores to leave (a
// failed store forwarding, once per block). `offsets`: each row's byte offset from rows[0].
template <class Block>
inline __m512 gather_d16(const uint8_t *row0, const __m512i &offsets, int64_t b) {
    // 4 bytes at each d (the d and the first two code bytes, inside the block), the low half kept.
    const __m512i g = _mm512_i32gather_epi32(offsets, row0 + static_cast<size_t>(b) * sizeof(Block), 1);
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g));
}
inline __m512i row_offsets16(const uint8_t *const (&rows)[kPanel16]) {
    alignas(64) int32_t o[kPanel16];
    for (int i = 0; i < kPanel16; ++i) o[i] = static_cast<int32_t>(rows[i] - rows[0]);  // within one matrix
    return _mm512_load_si512(o);
}

inline void pack_q4_0_16(const uint8_t *const (&rows)[kPanel16], int64_t b0, int64_t n, Q4Block16 *out, int offset) {
    const __m512i low4 = _mm512_set1_epi8(0x0f), off = _mm512_set1_epi8(static_cast<char>(offset));
    const __m512i offsets = row_offsets16(rows);
    for (int64_t b = 0; b < n; ++b) {
        // Vector k: bytes 4k .. 4k + 3 of the 16 rows' qs (dword i = row i), gathered.
        const uint8_t *qs0 = rows[0] + static_cast<size_t>(b0 + b) * sizeof(BlockQ4_0) + offsetof(BlockQ4_0, qs);
        for (int k = 0; k < 4; ++k) {
            const __m512i v = _mm512_i32gather_epi32(offsets, qs0 + 4 * k, 1);
            _mm512_store_si512(out[b].q + 64 * k, _mm512_sub_epi8(_mm512_and_si512(v, low4), off));
            _mm512_store_si512(out[b].q + 64 * (4 + k), _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), low4), off));
        }
        _mm512_store_ps(out[b].s, gather_d16<BlockQ4_0>(rows[0], offsets, b0 + b));
    }
}

// Q8_0 blocks [b0, b0 + n) of 16 rows in Q4Block16's layout (m unused), the weights w XOR-ed with `flip`:
// 0x80 gives w + 128 (0..255), VPDPBUSD's unsigned operand; 0 leaves w, AMX's signed one. s = d.
inline void pack_q8_0_16(const uint8_t *const (&rows)[kPanel16], int64_t b0, int64_t n, Q4Block16 *out, uint8_t flip) {
    const __m512i f = _mm512_set1_epi8(static_cast<char>(flip));
    const __m512i offsets = row_offsets16(rows);
    for (int64_t b = 0; b < n; ++b) {
        __m128i lo[kPanel16], hi[kPanel16];
#pragma GCC unroll 16
        for (int i = 0; i < kPanel16; ++i) {
            const auto *blk = reinterpret_cast<const BlockQ8_0 *>(rows[i]) + b0 + b;
            lo[i] = _mm_loadu_si128(reinterpret_cast<const __m128i *>(blk->qs));
            hi[i] = _mm_loadu_si128(reinterpret_cast<const __m128i *>(blk->qs + 16));
        }
        transpose16(lo, out[b].q);
        transpose16(hi, out[b].q + 256);
        if (flip)
            for (int k = 0; k < 8; ++k)
                _mm512_store_si512(out[b].q + 64 * k, _mm512_xor_si512(_mm512_load_si512(out[b].q + 64 * k), f));
        _mm512_store_ps(out[b].s, gather_d16<BlockQ8_0>(rows[0], offsets, b0 + b));
    }
}

// Q4_K on 16-row panels against activations with one scale per super-block (QuantActsK): a super-block
// is 8 of these, one per sub-block j, whose integers the kernels combine exactly (the row's isum and msum,
// vec_dot.hpp), so they hold integers, not float scales. Codes as Q4Block16's (vector k: elements 4k .. 4k + 3
// of the sub-block, dword i = row i, unsigned 0..15), sc the 6-bit scale sc_j per row (an int32 whose high
// word is 0: VPDPWSSD's pair (sc_j, 0)), and in sb a share of the super-block's per-row fields, so that a
// super-block needs no block of another size: j = 0..3 the mins m_2j | m_(2j+1) << 16 (VPDPWSSD's pair
// against two block sums of the activations), j = 4 d and j = 5 dmin (floats, fp16 decoded: exact), 6 and
// 7 unused.
struct alignas(64) Q4KBlock16 {
    uint8_t q[8 * 64];
    int32_t sc[kPanel16];
    int32_t sb[kPanel16];
};
constexpr int kQ4KMins = 0, kQ4KD = 4, kQ4KDmin = 5;  // sub-blocks whose sb holds each field

// Q4_K super-blocks [b0 / 8, (b0 + n) / 8) of 16 rows in the file's layout as Q4KBlock16s: the codes
// transposed by q4k_codes (each half a transpose16), the scales and mins of each row unpacked by k_scale_min.
inline void pack_q4_k_16(const uint8_t *const (&rows)[kPanel16], int64_t b0, int64_t n, Q4KBlock16 *out) {
    constexpr int64_t kUnit = QK_K / 32;
    for (int64_t sb = 0; sb < n / kUnit; ++sb) {
        const int64_t s = b0 / kUnit + sb;
        Q4KBlock16 *pb = out + sb * kUnit;
        const BlockQ4_K *blk[kPanel16];
        for (int i = 0; i < kPanel16; ++i) {
            blk[i] = reinterpret_cast<const BlockQ4_K *>(rows[i]) + s;
            const KScaleMin sm = k_scale_min(blk[i]->scales);
            for (int j = 0; j < kUnit; ++j) pb[j].sc[i] = static_cast<int32_t>(sm.sc >> (8 * j) & 0xff);
            for (int p = 0; p < 4; ++p) pb[kQ4KMins + p].sb[i] = static_cast<int32_t>((sm.m >> (16 * p) & 0xff) | (sm.m >> (16 * p + 8) & 0xff) << 16);
            const float d = avx2_half_to_float(blk[i]->d), dmin = avx2_half_to_float(blk[i]->dmin);
            __builtin_memcpy(&pb[kQ4KD].sb[i], &d, 4);
            __builtin_memcpy(&pb[kQ4KDmin].sb[i], &dmin, 4);
        }
        q4k_codes<kPanel16>(blk, pb, transpose16);
    }
}

// ---- 16 rows interleaved at load (rows16.hpp) ----------------------------------------------------------
// A group's super-block is one record holding its 16 rows' fields side by side; the codes in 4-byte units,
// unit u of the 16 rows one 64-byte vector (dword i = row i). That is the packed blocks' layout already, so
// these read the panels' blocks from a record with no transpose: one load per 4 codes of 16 rows, and the
// scales unpacked for 16 rows at once (rows16_x86.hpp). The values are the file-layout packers' (
// pack_q4_k_16, PackQ6_K of each level), so the kernels give the same bits.

// Q4_K: the codes of the record at rec into the 8 packed blocks of its sub-blocks (field q): sub-block 2g /
// 2g + 1 the low / high nibbles of the record's code units 8g .. 8g + 7.
template <class Block>
inline void q4k_rows16_codes(const uint8_t *rec, Block *pb) {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const uint8_t *qs = rec + kQ4KRecQs;
    for (int g = 0; g < 4; ++g)
        for (int k = 0; k < 8; ++k) {
            const __m512i v = _mm512_loadu_si512(qs + 64 * (8 * g + k));
            _mm512_store_si512(pb[2 * g].q + 64 * k, _mm512_and_si512(v, low4));
            _mm512_store_si512(pb[2 * g + 1].q + 64 * k, _mm512_and_si512(_mm512_srli_epi16(v, 4), low4));
        }
}

// Q4_K super-blocks [b0 / 8, (b0 + n) / 8) of the group whose first record is at grp as Q4KBlock16s
// (pack_q4_k_16's values): the scales and mins of byte j of all 16 rows at once (q4k_rows16_scales), the
// codes straight from the record (q4k_rows16_codes).
inline void pack_q4_k_16_rows16(const uint8_t *grp, int64_t b0, int64_t n, Q4KBlock16 *out) {
    constexpr int64_t kUnit = QK_K / 32;
    auto bytes16 = [](const uint8_t *p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p))); };
    for (int64_t sb = 0; sb < n / kUnit; ++sb) {
        const uint8_t *rec = grp + static_cast<size_t>(b0 / kUnit + sb) * kQ4KRecord;
        Q4KBlock16 *pb = out + sb * kUnit;
        alignas(64) uint8_t sc[2][64], mn[2][64];
        q4k_rows16_scales(rec, sc, mn);
        for (int j = 0; j < kUnit; ++j) _mm512_store_si512(pb[j].sc, bytes16(&sc[j / 4][16 * (j % 4)]));
        __m512i mp[4];
        q4k_rows16_min_pairs(mn, mp);
        for (int p = 0; p < 4; ++p) _mm512_store_si512(pb[kQ4KMins + p].sb, mp[p]);
        _mm512_store_ps(pb[kQ4KD].sb, halves16(rec + kQ4KRecD));
        _mm512_store_ps(pb[kQ4KDmin].sb, halves16(rec + kQ4KRecDmin));
        q4k_rows16_codes(rec, pb);
    }
}
// Q4_0 and Q8_0: the blocks of pack_q4_0_16 and pack_q8_0_16 (the same offset / flip) for blocks [b0, b0 +
// n) of the group whose first record is at grp: code unit k of a record is vector k already (Q4_0: its
// low nibbles vector k, its high nibbles vector 4 + k).
inline void pack_q4_0_16_rows16(const uint8_t *grp, int64_t b0, int64_t n, Q4Block16 *out, int offset) {
    const __m512i low4 = _mm512_set1_epi8(0x0f), off = _mm512_set1_epi8(static_cast<char>(offset));
    for (int64_t b = 0; b < n; ++b) {
        const uint8_t *rec = grp + static_cast<size_t>(b0 + b) * kQ40Record;
        for (int k = 0; k < 4; ++k) {
            const __m512i v = _mm512_loadu_si512(rec + kB32RecQs + 64 * k);
            _mm512_store_si512(out[b].q + 64 * k, _mm512_sub_epi8(_mm512_and_si512(v, low4), off));
            _mm512_store_si512(out[b].q + 64 * (4 + k), _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), low4), off));
        }
        _mm512_store_ps(out[b].s, halves16(rec + kB32RecD));
    }
}
inline void pack_q8_0_16_rows16(const uint8_t *grp, int64_t b0, int64_t n, Q4Block16 *out, uint8_t flip) {
    const __m512i f = _mm512_set1_epi8(static_cast<char>(flip));
    for (int64_t b = 0; b < n; ++b) {
        const uint8_t *rec = grp + static_cast<size_t>(b0 + b) * kQ80Record;
        for (int k = 0; k < 8; ++k)
            _mm512_store_si512(out[b].q + 64 * k, _mm512_xor_si512(_mm512_loadu_si512(rec + kB32RecQs + 64 * k), f));
        _mm512_store_ps(out[b].s, halves16(rec + kB32RecD));
    }
}

// Q6_K activation block kb (= 4h + k) of a group's record at rec, as q6k_piece forms it per row: w[j] the
// weights w = code - 32 of elements 4j .. 4j + 3 of the 16 rows (dword i = row i), the low code bits
// from the low (k < 2) or high nibbles of code units 16h + 8 (k & 1) + j, the top two from bits 2k, 2k + 1
// of units 8h + j.
inline void q6k_rows16_w(const uint8_t *rec, int kb, __m512i (&w)[8]) {
    const __m512i m0f = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30), k32 = _mm512_set1_epi8(32);
    const int h = kb / 4, k = kb % 4;
    for (int j = 0; j < 8; ++j) {
        __m512i l = _mm512_loadu_si512(rec + kQ6KRecQl + 64 * (16 * h + 8 * (k & 1) + j));
        if (k >= 2) l = _mm512_srli_epi16(l, 4);
        __m512i hb = _mm512_loadu_si512(rec + kQ6KRecQh + 64 * (8 * h + j));
        hb = k < 2 ? _mm512_slli_epi16(hb, 4 - 2 * k) : _mm512_srli_epi16(hb, 2 * k - 4);
        w[j] = _mm512_sub_epi8(_mm512_or_si512(_mm512_and_si512(l, m0f), _mm512_and_si512(hb, m30)), k32);
    }
}
// Q6_K activation blocks [b0, b0 + n) (whole super-blocks) of a group whose first record is at rec0, as
// the AVX-512 and AMX packers take them: f(i, rec, kb, d, w) for packed block i, its record, its block kb
// within the record, the 16 rows' d and its weights (q6k_rows16_w).
template <class F>
inline void q6k_rows16_blocks(const uint8_t *rec0, int64_t b0, int64_t n, F &&f) {
    constexpr int64_t kUnit = QK_K / 32;
    for (int64_t sb = 0; sb < n / kUnit; ++sb) {
        const uint8_t *rec = rec0 + static_cast<size_t>(b0 / kUnit + sb) * kQ6KRecord;
        const __m512 d = halves16(rec + kQ6KRecD);
        for (int kb = 0; kb < kUnit; ++kb) {
            __m512i w[8];
            q6k_rows16_w(rec, kb, w);
            f(sb * kUnit + kb, rec, kb, d, w);
        }
    }
}

#endif

// A k-chunk of a panel is packed into a buffer on the stack of at most kPackBytes (in L1, which is 32 KiB
// here; 24 KiB leaves room for the activations passing through), and multiplied against kSlabTokens
// tokens before the next panel is packed. The slab's activations for one chunk (128 tokens x 76 blocks x
// 40 B = 380 KiB at most) stay in L2 across the panels.
constexpr size_t kPackBytes = 24 * 1024;
constexpr int64_t kSlabTokens = 128;

// Blocks per k-chunk of a panel packed as Pack: as many as kPackBytes holds, in whole Steps (a multiple
// of Pack::kUnit).
template <class Pack, int64_t Step = Pack::kUnit, size_t Bytes = kPackBytes>
constexpr int64_t panel_chunk() {
    static_assert(Step % Pack::kUnit == 0 || Pack::kUnit % Step == 0);
    constexpr int64_t step = Step > Pack::kUnit ? Step : Pack::kUnit;
    constexpr int64_t chunk = Bytes / sizeof(typename Pack::Block) / step * step;
    static_assert(chunk >= Pack::kUnit);
    return chunk;
}

// The loop nest of the panel GEMMs, rows [r0, r1) for all tokens: token slabs of Slab, then k-chunks
// (panel_chunk<Pack, Step>: a chunk's activations stay in cache across the panels), then panels of Rows
// rows, each packed once per slab and chunk. The ISA's parts come in: edges(nr, first_chunk,
// last_chunk) makes what a tile needs to know of the panel's edges, tiles(buf, b0, n, r, tb, te, edges)
// runs a slab's tiles.
template <class Pack, int Rows, int64_t Slab = kSlabTokens, int64_t Step = Pack::kUnit, size_t Bytes = kPackBytes, class Edges,
          class Tiles>
void panel_loop(const MatmulJob &job, int64_t r0, int64_t r1, Edges edges, Tiles tiles) {
    using Block = typename Pack::Block;
    constexpr int64_t kChunk = panel_chunk<Pack, Step, Bytes>();
    // Blocks of 32 inputs from n_in, not from xq.nb: Q4_K's products read the per-256 activations
    // (xq.k) alone, and the per-32 ones need not be there.
    const int64_t nb = job.n_in / 32;
    Block buf[kChunk];
    for (int64_t tb = 0; tb < job.n_tokens; tb += Slab) {
        const int64_t te = tb + Slab < job.n_tokens ? tb + Slab : job.n_tokens;
        for (int64_t b0 = 0; b0 < nb; b0 += kChunk) {
            const int64_t n = nb - b0 < kChunk ? nb - b0 : kChunk;  // a multiple of Pack::kUnit
            for (int64_t r = r0; r < r1; r += Rows) {
                const int64_t nr = r1 - r < Rows ? r1 - r : Rows;
                const uint8_t *rows[Rows];
                for (int i = 0; i < Rows; ++i) rows[i] = job.w + static_cast<size_t>(r + (i < nr ? i : nr - 1)) * job.row_bytes;
                Pack::pack(rows, b0, n, buf);
                tiles(buf, b0, n, r, tb, te, edges(nr, b0 == 0, b0 + n == nb));
            }
        }
    }
}

} // namespace

} // namespace ember::cpu::detail
