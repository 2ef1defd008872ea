// vec_dot_k_avx512.cpp — the AVX-512 level's Q4_K and Q6_K decode tiles (one token) on the file's
// layout. Compiled with the AVX-512 flags and reached only through the kernel table after the CPU check
// (cpu_features.cpp). The interleaved layout's tiles (rows16_avx512.cpp) serve most decode; these serve
// what stays in the file's layout (3-D expert tensors, the last n_out % 16 rows, tensors of < 16 rows).
//
// Why: the AVX2 tiles (vec_dot_k_avx2.cpp) run out of instructions, not of memory, in decode. Here a
// 512-bit vector holds a row's two sub-blocks that share 32 bytes of codes (low and high nibbles, the
// activations lie the same way), one VPDPBUSD forms their products and sums of 4, and a
// shuffle-and-add transpose (Q4_0's, vec_dot_avx512.cpp) reduces 4 rows to one exact integer per row
// and sub-block (Q6_K: per 16-element half).
// Q4_K multiplies the per-256 activations (QuantActsK) with q4k-spec.md's arithmetic: per super-block
// and row the exact integers isum = sum_j sc_j I_j and msum = sum_j m_j S_j, then two FMAs — the bits of
// every level's Q4_K kernel (see q4_k_decode_tile). Per-32 (the former arithmetic), the float epilogue
// of every sub-block was most of this tile's work: 512 rows x 2048 inputs from L2 on one core 21 -> 32
// GB/s of weights; from memory (576 MiB) one / two cores 9.7 / 21.6 -> 11.2 / 21.7 (medians of 3).
// Q6_K keeps the per-32 activations and the AVX2 tile's float operations, in its order, on the same
// integers (see q6_k_decode_tile): its AVX2 tile was the slowest per byte of TinyLlama Q4_K_M's
// decode, ~15 GB/s for two threads.
#include "core/dtype.hpp"
#include "cpu/matmul_avx2.hpp"
#include "cpu/vec_dot.hpp"

#include <immintrin.h>

namespace ember::cpu::detail {

namespace {

// The totals of 4 rows' 4 lanes in each 128-bit quarter: quarter q of the result holds row i's total of
// its quarter q in lane i.
inline __m512i quarter_totals4(const __m512i (&p)[4]) {
    const __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(p[0], p[1]), _mm512_unpackhi_epi32(p[0], p[1]));
    const __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(p[2], p[3]), _mm512_unpackhi_epi32(p[2], p[3]));
    return _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
}

// The totals of 4 rows' 16 lanes, per 8-lane half: the low half's sub-block in the result's first
// quarter, the high half's in its third (row i in lane i of each).
inline __m512i row_totals4(const __m512i (&p)[4]) {
    const __m512i u = quarter_totals4(p);
    return _mm512_add_epi32(u, _mm512_shuffle_i32x4(u, u, _MM_SHUFFLE(2, 3, 0, 1)));
}

// Super-block s's scales of 4 rows as int32, [sub-block][row]: lane 4j + i of sc[0] / mn[0] holds row
// i's sc_j / m_j for j = 0..3, of sc[1] / mn[1] for j = 4..7; and the rows' d and dmin as floats. The 16
// bytes at the start of each row's block (d, dmin, the 12 scale bytes) are transposed bytewise, so that
// each byte position of the block holds the 4 rows side by side, and k_scale_min's bit operations
// (quant_k.hpp) act on those vectors: the 6-bit values come out in [sub-block][row] order, ready to
// widen (about a quarter of unpacking each row's scales and transposing them, which was once half of
// this tile's instructions).
inline void q4_k_scales4(const BlockQ4_K *const (&w)[4], int64_t s, __m512i (&sc)[2], __m512i (&mn)[2], __m128 &d, __m128 &dmin) {
    __m128i b[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) b[i] = _mm_loadu_si128(reinterpret_cast<const __m128i *>(&w[i][s]));
    const __m128i a01 = _mm_unpacklo_epi8(b[0], b[1]), c01 = _mm_unpackhi_epi8(b[0], b[1]);
    const __m128i a23 = _mm_unpacklo_epi8(b[2], b[3]), c23 = _mm_unpackhi_epi8(b[2], b[3]);
    const __m128i t0 = _mm_unpacklo_epi16(a01, a23);  // bytes 0..3: d, dmin (low, high bytes)
    const __m128i t1 = _mm_unpackhi_epi16(a01, a23);  // scales[0..3]
    const __m128i t2 = _mm_unpacklo_epi16(c01, c23);  // scales[4..7]
    const __m128i t3 = _mm_unpackhi_epi16(c01, c23);  // scales[8..11]
    const __m128i m3f = _mm_set1_epi8(0x3f), m0f = _mm_set1_epi8(0x0f), m30 = _mm_set1_epi8(0x30);
    sc[0] = _mm512_cvtepu8_epi32(_mm_and_si128(t1, m3f));
    mn[0] = _mm512_cvtepu8_epi32(_mm_and_si128(t2, m3f));
    sc[1] = _mm512_cvtepu8_epi32(_mm_or_si128(_mm_and_si128(t3, m0f), _mm_and_si128(_mm_srli_epi16(t1, 2), m30)));
    mn[1] = _mm512_cvtepu8_epi32(_mm_or_si128(_mm_and_si128(_mm_srli_epi16(t3, 4), m0f), _mm_and_si128(_mm_srli_epi16(t2, 2), m30)));
    // The 4 rows' d and dmin as halves (low byte, high byte interleaved), then floats.
    d = _mm_cvtph_ps(_mm_unpacklo_epi8(t0, _mm_srli_si128(t0, 4)));
    dmin = _mm_cvtph_ps(_mm_unpacklo_epi8(_mm_srli_si128(t0, 8), _mm_srli_si128(t0, 12)));
}

// How far ahead of its reads the Q4_K tile prefetches (one stream ahead of its first row: the 4 rows
// are adjacent). Measured with the per-256 arithmetic (2048 inputs x 524288 rows, 576 MiB on huge pages,
// one / two threads, GB/s of weights; AVX-512 Xeon VM, 2026-11-26): 1 KiB 10.1 / 20.9, 1.5 KiB 10.8 / 21-25,
// 2 KiB 11.4 / 22.7, 3 KiB 11.4 / 22.6, 4 KiB (matmul_avx2.hpp's default, which the slower per-32 tile
// used at 11.5 / 23.2) 9.2 / 17.7, 8 KiB 8.8 / 17.3: the faster tile falls off a cliff beyond 3 KiB.
constexpr int64_t kQ4KAhead = 2048;

// Rows r .. r + 3 of the file's layout, one token, against the per-256 activations (QuantActsK;
// q4k-spec.md); rows from r + n on (n < 4: the range's last rows) read row r + n - 1 again and are not
// stored. A 512-bit vector holds a row's two sub-blocks that share 32 bytes of codes (low and high
// nibbles; the activations lie the same way), one VPDPBUSD forms their products in sums of 4, and a
// shuffle-and-add transpose (row_totals4) leaves one exact integer per row and sub-block. Two sub-block
// pairs' integers go into one vector in [sub-block][row] order, the scales' order: one VPMULLD weights
// 16 of them by sc_j (the integers need 17 bits), one VPDPWSSD weights 16 activation block sums by m_j
// (both fit in 16 bits), and a last transpose adds each row's isum and msum. Then the spec's two FMAs
// per super-block.
void q4_k_decode_tile(const MatmulJob &job, int64_t r, int n) {
    const QuantActsK &xk = job.xk;
    const int64_t nsb = job.n_in / QK_K;
    const int8_t *xq = xk.qs;
    const float *xd = xk.d;
    const int16_t *xs = xk.sum;
    const BlockQ4_K *w[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
        const int64_t row = r + (i < n ? i : n - 1);
        w[i] = reinterpret_cast<const BlockQ4_K *>(job.w + static_cast<size_t>(row) * job.row_bytes);
    }
    // The lower copy of the 32 code bytes keeps its low nibbles, the upper copy its high nibbles in
    // place (16 x the code: no shift per row); those totals are divided by 16 after the transpose (one
    // masked shift for two pairs of 4 rows), which is exact (every product is a multiple of 16).
    const long long lo = 0x0f0f0f0f0f0f0f0fLL, hi = static_cast<long long>(0xf0f0f0f0f0f0f0f0ULL);
    const __m512i nibbles = _mm512_set_epi64(hi, hi, hi, hi, lo, lo, lo, lo);
    // Lane 4j + i <- activation block sum j (of 4, in the lower 4 int32) for row i.
    const __m512i spread = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    __m128 acc = _mm_setzero_ps();
    for (int64_t s = 0; s < nsb; ++s) {
        prefetch_step<4, sizeof(BlockQ4_K), kQ4KAhead>(w[0], s);
        __m512i sc[2], mn[2];
        __m128 d, dmin;
        q4_k_scales4(w, s, sc, mn, d, dmin);
        __m512i tot[4];  // pair g: quarter 0 row i's I_2g, quarter 2 its 16 I_(2g + 1)
#pragma GCC unroll 4
        for (int g = 0; g < 4; ++g) {
            const __m512i xv = _mm512_loadu_si512(xq + s * QK_K + 64 * g);
            __m512i p[4];
#pragma GCC unroll 4
            for (int i = 0; i < 4; ++i) {
                const __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(w[i][s].qs + 32 * g)));
                p[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(v, nibbles), xv);
            }
            tot[g] = row_totals4(p);
        }
        // [I_0, I_1, I_2, I_3] and [I_4 .. I_7], each a quarter of 4 rows (the odd ones divided by 16).
        __m512i is = _mm512_setzero_si512();
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
            __m512i v = _mm512_shuffle_i32x4(tot[2 * h], tot[2 * h + 1], _MM_SHUFFLE(2, 0, 2, 0));
            v = _mm512_mask_srai_epi32(v, 0xf0f0, v, 4);
            is = _mm512_add_epi32(is, _mm512_mullo_epi32(v, sc[h]));
        }
        // The block sums S_j as int32 (|S_j| <= 32 * 128: VPDPWSSD takes their low 16 bits against the
        // mins' zero-extended low 16 bits, their high halves against 0).
        const __m128i s8x16 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(xs + 8 * s));
        const __m512i s8 = _mm512_castsi256_si512(_mm256_cvtepi16_epi32(s8x16));
        __m512i ms = _mm512_dpwssd_epi32(_mm512_setzero_si512(), mn[0], _mm512_permutexvar_epi32(spread, s8));
        ms = _mm512_dpwssd_epi32(ms, mn[1], _mm512_permutexvar_epi32(_mm512_add_epi32(spread, _mm512_set1_epi32(4)), s8));
        // Quarter sums: z = [is q0 + q1, is q2 + q3, ms q0 + q1, ms q2 + q3], then isum in quarter 0, msum
        // in quarter 2.
        const __m512i z = _mm512_add_epi32(_mm512_shuffle_i32x4(is, ms, _MM_SHUFFLE(2, 0, 2, 0)),
                                           _mm512_shuffle_i32x4(is, ms, _MM_SHUFFLE(3, 1, 3, 1)));
        const __m512 f = _mm512_cvtepi32_ps(_mm512_add_epi32(z, _mm512_shuffle_i32x4(z, z, _MM_SHUFFLE(2, 3, 0, 1))));
        const __m128 xdv = _mm_broadcast_ss(xd + s);
        acc = _mm_fmadd_ps(_mm512_castps512_ps128(f), _mm_mul_ps(d, xdv), acc);
        acc = _mm_fnmadd_ps(_mm512_extractf32x4_ps(f, 2), _mm_mul_ps(dmin, xdv), acc);
    }
    alignas(16) float v[4];
    _mm_store_ps(v, acc);
    for (int i = 0; i < n; ++i) job.y[r + i] = v[i] + (job.bias ? job.bias[r + i] : 0.0f);
}

// Q6_K, rows r .. r + 3, one token. value = d * scale_k * (code - 32), one signed 8-bit scale per 16
// elements. The AVX2 tile forms, per row and activation block, the exact integer
// sum_k scale_k * sum_l (code_l - 32) x_l over the block's two 16-element halves, converts it and applies
// d * d_x with one multiply and one FMA per block, in block order. Here: one row's two activation
// blocks (64 codes) in a 512-bit vector, one VPDPBUSD for sum code * x in sums of 4, the 4 rows
// transposed so that each 128-bit quarter (one 16-element half) holds the 4 rows' totals of that half,
// the half's sum of 32 x (one VPDPBUSD shared by the rows) taken off, the scales applied with one 32-bit
// multiply for 4 rows x 4 halves, and the two halves of each block added: the same integers (|half| <=
// 16 * 32 * 127, times |scale| <= 128: far inside 32 bits), then the AVX2 tile's float operations.
void q6_k_decode_tile(const MatmulJob &job, int64_t r) {
    constexpr int R = 4;
    const int64_t nsb = job.n_in / QK_K;
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const __m512i top2 = _mm512_set1_epi8(0x30);
    const __m512i c32 = _mm512_set1_epi8(32);
    // Activation block kb = 4h + k takes bits 2k, 2k + 1 of qh[32h ..] as its code's bits 4, 5. A vector
    // holds blocks k, k + 1 (k = 0 or 2) in its lower and upper 256 bits, so the shift differs per half
    // (what crosses a byte boundary is masked off by top2).
    const __m512i qh_left01 = _mm512_set_epi64(2, 2, 2, 2, 4, 4, 4, 4);   // k = 0, 1: bits 0,1 / 2,3 up to 4,5
    const __m512i qh_right23 = _mm512_set_epi64(2, 2, 2, 2, 0, 0, 0, 0);  // k = 2, 3: bits 4,5 stay / 6,7 down
    const TileOperands<BlockQ6_K, R, 1> op(job, r, 0);
    const auto &w = op.w;
    __m128 acc = _mm_setzero_ps();
    for (int64_t s = 0; s < nsb; ++s) {
        prefetch_step<R, sizeof(BlockQ6_K)>(w[0], s);
        const __m128 dw = load_halves<BlockQ6_K, R>(w, s, &BlockQ6_K::d);
        // scl[m], lane 4q + i: row i's scale of 16-element half 4m + q (the halves of blocks 2m, 2m + 1),
        // the 4 rows' 16 scales transposed bytewise, then widened.
        __m512i scl[4];
        {
            __m128i sr[R];
#pragma GCC unroll 4
            for (int i = 0; i < R; ++i) sr[i] = _mm_loadu_si128(reinterpret_cast<const __m128i *>(w[i][s].scales));
            const __m128i a = _mm_unpacklo_epi8(sr[0], sr[1]), b = _mm_unpackhi_epi8(sr[0], sr[1]);
            const __m128i c = _mm_unpacklo_epi8(sr[2], sr[3]), d = _mm_unpackhi_epi8(sr[2], sr[3]);
            scl[0] = _mm512_cvtepi8_epi32(_mm_unpacklo_epi16(a, c));
            scl[1] = _mm512_cvtepi8_epi32(_mm_unpackhi_epi16(a, c));
            scl[2] = _mm512_cvtepi8_epi32(_mm_unpacklo_epi16(b, d));
            scl[3] = _mm512_cvtepi8_epi32(_mm_unpackhi_epi16(b, d));
        }
        auto apply = [&](int kb, __m128i ints) {  // as the AVX2 tile applies block kb's scales
            acc = _mm_fmadd_ps(_mm_cvtepi32_ps(ints), _mm_mul_ps(dw, _mm_broadcast_ss(op.xd[0] + 8 * s + kb)), acc);
        };
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
            __m512i ql[R], qh[R];
#pragma GCC unroll 4
            for (int i = 0; i < R; ++i) {
                ql[i] = _mm512_loadu_si512(w[i][s].ql + 64 * h);
                qh[i] = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(w[i][s].qh + 32 * h)));
            }
#pragma GCC unroll 2
            for (int hi = 0; hi < 2; ++hi) {  // k = 2 hi, 2 hi + 1: blocks kb = 4h + 2hi, + 1
                const int m = 2 * h + hi;
                const __m512i xv = _mm512_loadu_si512(op.xq[0] + s * QK_K + 64 * m);
                __m512i p[R];
#pragma GCC unroll 4
                for (int i = 0; i < R; ++i) {
                    const __m512i lo = hi ? _mm512_srli_epi64(ql[i], 4) : ql[i];
                    const __m512i hb = hi ? _mm512_srlv_epi64(qh[i], qh_right23) : _mm512_sllv_epi64(qh[i], qh_left01);
                    const __m512i code = _mm512_or_si512(_mm512_and_si512(lo, low4), _mm512_and_si512(hb, top2));
                    p[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), code, xv);
                }
                // Every lane: the total of 32 x over its quarter.
                __m512i off = _mm512_dpbusd_epi32(_mm512_setzero_si512(), c32, xv);
                off = _mm512_add_epi32(off, _mm512_shuffle_epi32(off, _MM_PERM_BADC));
                off = _mm512_add_epi32(off, _mm512_shuffle_epi32(off, _MM_PERM_CDAB));
                const __m512i t = _mm512_mullo_epi32(_mm512_sub_epi32(quarter_totals4(p), off), scl[m]);
                const __m512i v = _mm512_add_epi32(t, _mm512_shuffle_i32x4(t, t, _MM_SHUFFLE(2, 3, 0, 1)));
                apply(2 * m, _mm512_castsi512_si128(v));
                apply(2 * m + 1, _mm512_extracti32x4_epi32(v, 2));
            }
        }
    }
    const __m128 accs[1] = {acc};
    store_lanes<R, 1>(job, r, 0, accs);
}

} // namespace

void matmul_rows_q4_k_decode_avx512(const MatmulJob &job, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r += 4) q4_k_decode_tile(job, r, r1 - r < 4 ? static_cast<int>(r1 - r) : 4);
}

void matmul_rows_q6_k_decode_avx512(const MatmulJob &job, int64_t r0, int64_t r1) {
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) q6_k_decode_tile(job, r);
    if (r < r1) matmul_rows_q6_k_avx2(job, r, r1);
}

} // namespace ember::cpu::detail
