// vec_dot_k_avx512.cpp — the AVX-512 level's Q4_K decode tile (one token). Compiled with the AVX-512
// flags and reached only through the kernel table after the CPU check (cpu_features.cpp).
//
// Why: the AVX2 tile (vec_dot_k_avx2.cpp) runs out of instructions, not of memory, in decode: per
// 32-weight sub-block and row a load, a nibble split, a maddubs and a share of the 16-bit horizontal
// adds, ~33 micro-ops per sub-block of 4 rows (measured 18 GB/s of weights per core from cache, where a
// core streams 16 GB/s from memory, so two threads cannot keep the memory busy). Here a 512-bit vector
// holds a row's two sub-blocks that share 32 bytes of codes (low and high nibbles, the activations lie
// the same way), one VPDPBUSD forms their products and sums of 4, and a shuffle-and-add transpose
// (Q4_0's, vec_dot_avx512.cpp) reduces 4 rows to one exact integer per row and sub-block. After that the
// AVX2 tile's float operations, in its order, on the same scales (vec_dot_k_x86.hpp): the same bits.
#include "cpu/matmul_avx2.hpp"
#include "cpu/vec_dot.hpp"
#include "cpu/vec_dot_k_x86.hpp"

#include <immintrin.h>

namespace ember::cpu::detail {

namespace {

// The totals of 4 rows' 16 lanes, per 8-lane half: the low half's sub-block in the result's first
// quarter, the high half's in its third (row i in lane i of each).
inline __m512i row_totals4(const __m512i (&p)[4]) {
    const __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(p[0], p[1]), _mm512_unpackhi_epi32(p[0], p[1]));
    const __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(p[2], p[3]), _mm512_unpackhi_epi32(p[2], p[3]));
    const __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
    return _mm512_add_epi32(u, _mm512_shuffle_i32x4(u, u, _MM_SHUFFLE(2, 3, 0, 1)));
}

// Rows r .. r + 3, one token.
void q4_k_decode_tile(const MatmulJob &job, int64_t r) {
    constexpr int R = 4;
    const int64_t nsb = job.n_in / QK_K;
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const __m512i shift = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);  // the upper copy's high nibbles
    const TileOperands<BlockQ4_K, R, 1> op(job, r, 0);
    const auto &w = op.w;
    __m128 acc = _mm_setzero_ps();
    alignas(16) float dsc[8][4], dmn[8][4];  // [sub-block][row]: d * sc_j, dmin * m_j
    for (int64_t s = 0; s < nsb; ++s) {
        prefetch_step<R, sizeof(BlockQ4_K)>(w[0], s);
        alignas(32) float xm[8];  // d_x * sum x per activation block, as the AVX2 tile forms it
        _mm256_store_ps(xm, _mm256_mul_ps(_mm256_loadu_ps(op.xd[0] + 8 * s), _mm256_loadu_ps(op.xs[0] + 8 * s)));
        q4_k_scales<R>(w, s, dsc, dmn);
        // Sub-block j's scale and min applied to its 4 integers, as the AVX2 tile does.
        auto apply = [&](int j, __m128i ints) {
            const __m128 f = _mm_cvtepi32_ps(ints);
            acc = _mm_fmadd_ps(f, _mm_mul_ps(_mm_load_ps(dsc[j]), _mm_broadcast_ss(op.xd[0] + 8 * s + j)), acc);
            acc = _mm_fnmadd_ps(_mm_load_ps(dmn[j]), _mm_broadcast_ss(&xm[j]), acc);
        };
#pragma GCC unroll 4
        for (int g = 0; g < 4; ++g) {  // sub-blocks 2g (low nibbles) and 2g + 1 (high nibbles)
            const __m512i xv = _mm512_loadu_si512(op.xq[0] + s * QK_K + 64 * g);
            __m512i p[R];
#pragma GCC unroll 4
            for (int i = 0; i < R; ++i) {
                const __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(w[i][s].qs + 32 * g)));
                p[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(_mm512_srlv_epi64(v, shift), low4), xv);
            }
            const __m512i tot = row_totals4(p);
            apply(2 * g, _mm512_castsi512_si128(tot));
            apply(2 * g + 1, _mm512_extracti32x4_epi32(tot, 2));
        }
    }
    const __m128 accs[1] = {acc};
    store_lanes<R, 1>(job, r, 0, accs);
}

} // namespace

void matmul_rows_q4_k_decode_avx512(const MatmulJob &job, int64_t r0, int64_t r1) {
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) q4_k_decode_tile(job, r);
    if (r < r1) matmul_rows_q4_k_avx2(job, r, r1);  // the last rows one by one, with the same bits
}

} // namespace ember::cpu::detail
