// matmul_panel_avx2.cpp — the prefill GEMM for 4-bit weights (Q4_0, Q4_K) on AVX2: 8-row panels
// repacked on the fly into an interleaved layout, so that one integer product serves 8 rows at once.
// Compiled with -mavx2 -mfma -mf16c and reached only through the kernel table (see simd_avx2.hpp).
//
// Why. The row tiles of matmul_avx2.hpp multiply one row's 32 weights by one token's 32 activations
// per _mm256_maddubs_epi16, and then need a madd, a convert and an FMA per (row, token, block) to apply
// that block's scales: 4 vector ops per 32 multiply-adds, with 16 accumulators that spill. Here a
// 32-byte vector holds 4 consecutive weights of each of 8 rows, multiplied by the same 4 activations
// broadcast to every row: one maddubs still does 32 multiply-adds, but its 16-bit pair sums belong to
// 8 rows (2 lanes each), so the 8 products of a block add up in 16 bits (at most 8 * 2 * 15 * 127 =
// 30480, no saturation) and one madd, convert and FMA finish a block for 8 rows: about 2.6 ops per 32
// multiply-adds instead of 4, no horizontal sums, and 4 tokens' accumulators fit in registers.
// Measured on Zen 3, 2048 -> 5632, 128 tokens, 2 threads: see docs/benchmarks.md (2026-11-21).
//
// Layout. Weights stay as stored in the file (decode streams them as they are, and nothing is copied
// at load); a panel of 8 rows x up to kChunkBlocks blocks of 32 is repacked into a small buffer on the
// stack (24 KiB, in L1) and then multiplied against every token of a slab, so the repacking (a 4-byte
// transpose, ~2 % of the multiply time at 128 tokens) is amortised over the slab. A packed block holds
// the 8 rows' nibbles as 4 vectors P_k: byte 4i + j of P_k is row i's byte 4k + j in Q4_0's order (low
// nibble element 4k + j, high nibble element 16 + 4k + j), and the rows' scales as floats.
//
// Order. Every output lane computes its row alone with the same operations whatever panel, chunk or
// thread it falls in (partial panels repeat a row in the unused lanes and never store them), and
// between k-chunks the accumulator is stored to y and reloaded exactly, so results do not depend on
// the thread count.
#include "core/dtype.hpp"
#include "cpu/quant_k.hpp"
#include "cpu/simd_avx2.hpp"
#include "cpu/vec_dot.hpp"

namespace ember::cpu::detail {

namespace {

constexpr int kPanelRows = 8;
// Blocks of 32 per k-chunk: a chunk of a panel is 128 * 192 B = 24 KiB (L1 is 32 KiB), and the slab's
// activations for one chunk (kSlabTokens * 128 * 40 B = 640 KiB) come from L2/L3.
constexpr int64_t kChunkBlocks = 128;
// Tokens multiplied against one packed chunk before the next panel is packed.
constexpr int64_t kSlabTokens = 128;

// One block of 32 elements for the 8 rows of a panel: s is the scale of the codes (Q4_0: d; Q4_K:
// d * sc_j), m the offset per unit of sum x (Q4_K: dmin * m_j; Q4_0 takes its offset of 8 in the
// integers instead).
struct alignas(32) PanelBlock {
    uint8_t q[128];
    float s[kPanelRows];
    float m[kPanelRows];
};

// Transposes the 4-byte groups of 8 rows' 16-byte blocks (row i in src[i]) into P_0..P_3: rows i and
// i + 4 go in the two 128-bit lanes, so that the 32/64-bit unpacks do two 4 x 4 transposes at once.
inline void pack_nibbles(const __m128i (&src)[kPanelRows], uint8_t *dst) {
    __m256i v[4];
    for (int i = 0; i < 4; ++i) v[i] = _mm256_set_m128i(src[i + 4], src[i]);
    const __m256i x0 = _mm256_unpacklo_epi32(v[0], v[1]), x1 = _mm256_unpackhi_epi32(v[0], v[1]);
    const __m256i x2 = _mm256_unpacklo_epi32(v[2], v[3]), x3 = _mm256_unpackhi_epi32(v[2], v[3]);
    auto *out = reinterpret_cast<__m256i *>(dst);
    _mm256_store_si256(out + 0, _mm256_unpacklo_epi64(x0, x2));
    _mm256_store_si256(out + 1, _mm256_unpackhi_epi64(x0, x2));
    _mm256_store_si256(out + 2, _mm256_unpacklo_epi64(x1, x3));
    _mm256_store_si256(out + 3, _mm256_unpackhi_epi64(x1, x3));
}

// Q4_0: blocks [b0, b0 + n) of the panel's rows, already in the packed nibble order.
struct PackQ4_0 {
    static constexpr bool kMins = false;
    static constexpr int64_t kUnit = 1;  // activation blocks per weight block
    static void pack(const uint8_t *const (&rows)[kPanelRows], int64_t b0, int64_t n, PanelBlock *out) {
        for (int64_t b = 0; b < n; ++b) {
            __m128i src[kPanelRows];
            alignas(16) uint16_t d[kPanelRows];
            for (int i = 0; i < kPanelRows; ++i) {
                const auto *blk = reinterpret_cast<const BlockQ4_0 *>(rows[i]) + b0 + b;
                src[i] = _mm_loadu_si128(reinterpret_cast<const __m128i *>(blk->qs));
                d[i] = blk->d;
            }
            pack_nibbles(src, out[b].q);
            _mm256_store_ps(out[b].s, _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i *>(d))));
        }
    }
};

// Q4_K: super-blocks [b0 / 8, (b0 + n) / 8) (n and b0 multiples of 8), one packed block per sub-block.
// The 32-byte group g of qs holds sub-block 2g in its low nibbles and 2g + 1 in its high nibbles,
// element l in byte l; the pack moves element l + 16 into the high nibble of byte l, Q4_0's order.
struct PackQ4_K {
    static constexpr bool kMins = true;
    static constexpr int64_t kUnit = QK_K / 32;
    static void pack(const uint8_t *const (&rows)[kPanelRows], int64_t b0, int64_t n, PanelBlock *out) {
        const __m256i low4 = _mm256_set1_epi8(0x0f);
        for (int64_t sb = 0; sb < n / kUnit; ++sb) {
            const int64_t s = b0 / kUnit + sb;
            PanelBlock *pb = out + sb * kUnit;
            alignas(32) float dsc[kPanelRows][8], dmin[kPanelRows][8];
            __m128i lo[kPanelRows][4], hi[kPanelRows][4];
            for (int i = 0; i < kPanelRows; ++i) {
                const auto *blk = reinterpret_cast<const BlockQ4_K *>(rows[i]) + s;
                const KScaleMin sm = k_scale_min(blk->scales);
                auto widen = [](uint64_t bytes) {
                    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(bytes))));
                };
                // d * sc_j and dmin * m_j are exact (11 + 6 significant bits).
                _mm256_store_ps(dsc[i], _mm256_mul_ps(widen(sm.sc), _mm256_set1_ps(avx2_half_to_float(blk->d))));
                _mm256_store_ps(dmin[i], _mm256_mul_ps(widen(sm.m), _mm256_set1_ps(avx2_half_to_float(blk->dmin))));
                for (int g = 0; g < 4; ++g) {
                    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(blk->qs + 32 * g));
                    const __m256i l = _mm256_and_si256(v, low4);
                    const __m256i h = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
                    // Codes are < 16, so a 16-bit shift by 4 keeps each within its byte.
                    lo[i][g] = _mm_or_si128(_mm256_castsi256_si128(l), _mm_slli_epi16(_mm256_extracti128_si256(l, 1), 4));
                    hi[i][g] = _mm_or_si128(_mm256_castsi256_si128(h), _mm_slli_epi16(_mm256_extracti128_si256(h, 1), 4));
                }
            }
            for (int j = 0; j < kUnit; ++j) {
                __m128i src[kPanelRows];
                for (int i = 0; i < kPanelRows; ++i) {
                    src[i] = j % 2 ? hi[i][j / 2] : lo[i][j / 2];
                    pb[j].s[i] = dsc[i][j];
                    pb[j].m[i] = dmin[i][j];
                }
                pack_nibbles(src, pb[j].q);
            }
        }
    }
};

// T tokens (t0 ..) against n packed blocks (activation blocks b0 ..) of one panel whose outputs are
// y[t][r .. r + 7] (lanes where `mask` is set). The accumulators start at 0 on the first chunk and
// from y otherwise; y gets them raw, plus the bias after the last chunk.
template <bool kMins, int T>
void panel_tile(const MatmulJob &job, const PanelBlock *pb, int64_t b0, int64_t n, int64_t r, int64_t t0, __m256i mask,
                bool first, bool last) {
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i ones = _mm256_set1_epi16(1);
    const int8_t *xq[T];
    const float *xd[T], *xs[T];
    float *y[T];
    __m256 acc[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
        xq[t] = job.xq.qs + (t0 + t) * job.n_in + b0 * 32;
        xd[t] = job.xq.d + (t0 + t) * job.xq.nb + b0;
        xs[t] = job.xq.sum + (t0 + t) * job.xq.nb + b0;
        y[t] = job.y + (t0 + t) * job.y_stride + r;
        acc[t] = first ? _mm256_setzero_ps() : _mm256_maskload_ps(y[t], mask);
    }
    for (int64_t b = 0; b < n; ++b) {
        __m256i isum[T];
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
            const __m256i p = _mm256_load_si256(reinterpret_cast<const __m256i *>(pb[b].q + 32 * k));
            const __m256i lo = _mm256_and_si256(p, low4);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(p, 4), low4);
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) {
                int32_t xl, xh;
                __builtin_memcpy(&xl, xq[t] + b * 32 + 4 * k, 4);
                __builtin_memcpy(&xh, xq[t] + b * 32 + 16 + 4 * k, 4);
                isum[t] = _mm256_add_epi16(isum[t], _mm256_maddubs_epi16(lo, _mm256_set1_epi32(xl)));
                isum[t] = _mm256_add_epi16(isum[t], _mm256_maddubs_epi16(hi, _mm256_set1_epi32(xh)));
            }
        }
        const __m256 s = _mm256_load_ps(pb[b].s);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
            __m256 f = _mm256_cvtepi32_ps(_mm256_madd_epi16(isum[t], ones));
            const __m256 dx = _mm256_broadcast_ss(xd[t] + b);
            if constexpr (kMins) {
                acc[t] = _mm256_fmadd_ps(f, _mm256_mul_ps(s, dx), acc[t]);
                acc[t] = _mm256_fnmadd_ps(_mm256_load_ps(pb[b].m), _mm256_set1_ps(xd[t][b] * xs[t][b]), acc[t]);
            } else {
                // Q4_0's codes sit 8 above the value: sum (q - 8) x = sum q x - 8 sum x, exact in float
                // (|sum q x| <= 32 * 15 * 127), then one rounding for the scales.
                f = _mm256_fnmadd_ps(_mm256_set1_ps(8.0f), _mm256_broadcast_ss(xs[t] + b), f);
                acc[t] = _mm256_fmadd_ps(f, _mm256_mul_ps(s, dx), acc[t]);
            }
        }
    }
    const __m256 bias = last && job.bias ? _mm256_maskload_ps(job.bias + r, mask) : _mm256_setzero_ps();
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) _mm256_maskstore_ps(y[t], mask, last ? _mm256_add_ps(acc[t], bias) : acc[t]);
}

template <bool kMins>
void panel_tokens(const MatmulJob &job, const PanelBlock *pb, int64_t b0, int64_t n, int64_t r, int64_t tb, int64_t te,
                  __m256i mask, bool first, bool last) {
    int64_t t = tb;
    for (; t + 4 <= te; t += 4) panel_tile<kMins, 4>(job, pb, b0, n, r, t, mask, first, last);
    switch (te - t) {
    case 1: panel_tile<kMins, 1>(job, pb, b0, n, r, t, mask, first, last); break;
    case 2: panel_tile<kMins, 2>(job, pb, b0, n, r, t, mask, first, last); break;
    case 3: panel_tile<kMins, 3>(job, pb, b0, n, r, t, mask, first, last); break;
    default: break;
    }
}

// Rows [r0, r1) for all tokens: token slabs, then k-chunks (so that a chunk's activations stay in
// cache across the panels), then panels of 8 rows, each packed once per slab and chunk.
template <class Pack>
void drive_panels(const MatmulJob &job, int64_t r0, int64_t r1) {
    const int64_t nb = job.xq.nb;
    PanelBlock buf[kChunkBlocks];
    for (int64_t tb = 0; tb < job.n_tokens; tb += kSlabTokens) {
        const int64_t te = tb + kSlabTokens < job.n_tokens ? tb + kSlabTokens : job.n_tokens;
        for (int64_t b0 = 0; b0 < nb; b0 += kChunkBlocks) {
            const int64_t n = nb - b0 < kChunkBlocks ? nb - b0 : kChunkBlocks;  // a multiple of Pack::kUnit
            for (int64_t r = r0; r < r1; r += kPanelRows) {
                const int64_t nr = r1 - r < kPanelRows ? r1 - r : kPanelRows;
                const uint8_t *rows[kPanelRows];
                for (int i = 0; i < kPanelRows; ++i) rows[i] = job.w + static_cast<size_t>(r + (i < nr ? i : nr - 1)) * job.row_bytes;
                Pack::pack(rows, b0, n, buf);
                const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(nr)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
                panel_tokens<Pack::kMins>(job, buf, b0, n, r, tb, te, mask, b0 == 0, b0 + n == nb);
            }
        }
    }
}

} // namespace

void matmul_panels_q4_0_avx2(const MatmulJob &job, int64_t r0, int64_t r1) { drive_panels<PackQ4_0>(job, r0, r1); }
void matmul_panels_q4_k_avx2(const MatmulJob &job, int64_t r0, int64_t r1) { drive_panels<PackQ4_K>(job, r0, r1); }

} // namespace ember::cpu::detail
