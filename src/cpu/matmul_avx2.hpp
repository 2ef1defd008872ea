// matmul_avx2.hpp — the tile driver shared by the AVX2 matmul kernels (vec_dot_avx2.cpp,
// vec_dot_k_avx2.cpp). Include it from *_avx2.cpp files only: everything here has internal linkage
// (an anonymous namespace), so each file gets private copies compiled for AVX2 (see simd_avx2.hpp).
//
// A kernel K provides K::kPrefillRows and K::tile<R, T>(job, r, t0), which computes rows r .. r + R - 1
// for tokens t0 .. t0 + T - 1 (R <= 4, T <= kTokTile); drive<K> walks a row range in cache blocks and
// token groups (see vec_dot_avx2.cpp for the shape of the work and why).
#pragma once

#include "cpu/matmul_walk.hpp"
#include "cpu/simd_avx2.hpp"
#include "cpu/vec_dot.hpp"

#include <cstddef>
#include <cstdint>
#include <utility>

namespace ember::cpu::detail {

namespace {

// Decode (T = 1) streams each weight once, mostly from DRAM: a whole model does not stay in L3 between
// tokens. The kernel is then too slow for the hardware prefetcher to keep enough lines in flight, so
// the tile prefetches the weight bytes kPrefetchBytes ahead of where it reads, at the rate it consumes
// them (a tile's rows are adjacent in memory, so "ahead" is simply further along the matrix).
// Measured, Q8_0 288 x 160000 (46 MB): 13.8 -> 20.6 GB/s on one thread, 23 -> 40 GB/s on two; 4 KiB is
// about DRAM latency times that rate with a margin (1 KiB: 16 GB/s, 8-16 KiB: no better).
constexpr int64_t kPrefetchBytes = 4096;
// Some tiles prefetch further ahead (prefetch_step's kAhead) or per row (prefetch_rows), chosen per tile
// by measurement (2026-11-25; AVX-512 Xeon VM, TinyLlama-shaped decode
// at 2 threads, tokens/s; medians of 3): AVX-512 Q4_0 4 KiB 41.6, 8 KiB 43.3, per row 39.8 (in another
// window 4 KiB 42.1, 8 KiB 42.2, 12 KiB 43.4, 16 KiB 41.9);
// Q8_0 4 KiB 20.5, 12 KiB 23.4, per row 24.6; Q4_K's AVX-512 tile 4 KiB 34.7, 8 KiB 31.3, 12 KiB 30.3,
// per row no different from 4 KiB.

// Whether a tile (tokens t0 .. t0 + T - 1) streams its weights from memory: in decode, and in the first
// token group of a small batch (a few sequences decoding together, a speculative verification of up to
// 7 drafts), which reads each row block from DRAM; later groups find the block in L2 (see drive()).
// Without it the first group of a 5-token verification ran at about half the rate of a 4-token one.
// Larger batches are left to the hardware prefetcher: their first group is a small share of the work.
inline bool streams(const MatmulJob &job, int T, int64_t t0) { return T == 1 || (t0 == 0 && job.n_tokens <= 2 * kTokTile); }

// Prefetches the lines a tile of R rows consumes at step `step`, when each row consumes `bytes` per
// step, kAhead bytes ahead of `row0`. Prefetches never fault, so running past the end is harmless.
template <int R, int bytes, int64_t kAhead = kPrefetchBytes>
inline void prefetch_step(const void *row0, int64_t step) {
    const char *p = static_cast<const char *>(row0) + kAhead + step * (R * bytes);
#pragma GCC unroll 8
    for (int k = 0; k <= R * bytes / 64; ++k) _mm_prefetch(p + 64 * k, _MM_HINT_T0);
}

// A prefetch into L1 that the compiler keeps: GCC 12 dropped every _mm_prefetch (__builtin_prefetch)
// of prefetch_rows, whose address depends on a comparison, from the tiles.
inline void prefetch_l1(const char *p) { asm volatile("prefetcht0 %0" : : "m"(*p)); }

// prefetch_step as one stream per row: for each of the R rows of a tile (row_bytes apart from row0), the
// lines that row consumes at step `step` (`bytes` per step), kPrefetchRowBytes ahead of it; past the
// row's end, in the same row of the next tile (R rows on), which a contiguous row range reads next.
// Every row gets the same lead, where prefetch_step's single stream ahead of the tile's first row leaves
// the last rows of a long tile (Q8_0 at 2048 inputs: 4 rows are 8.5 KiB) starting with little or none.
// `ember-bandwidth 2 512 rows` (4 rows side by side, 1152-byte rows, two cores): no prefetch 32.7 GB/s,
// the tile's stream 4 KiB ahead 32.1, 2 KiB ahead of every row 38.7 (1 KiB 37.5, 4 KiB 36.9).
constexpr int64_t kPrefetchRowBytes = 2048;
template <int R, int bytes>
inline void prefetch_rows(const void *row0, size_t row_bytes, int64_t step) {
    const int64_t rb = static_cast<int64_t>(row_bytes);
    int64_t off = step * bytes + kPrefetchRowBytes;
    if (off >= rb) off += (R - 1) * rb;
    const char *p = static_cast<const char *>(row0) + off;
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
        for (int k = 0; k <= bytes / 64; ++k) prefetch_l1(p + i * rb + 64 * k);
}

// One fp16 field (a scale, a min) of block b of R rows, as floats in lanes 0..R-1: the halves are
// gathered into one register and converted together, 1 ALU op per row where a scalar convert takes 2.
// The lane index of _mm_insert_epi16 must be a constant expression at every optimisation level, so the
// R - 1 inserts are expanded from an index sequence rather than a loop.
template <class Block, int R, size_t... I>
inline __m128i gather_halves(const Block *const (&w)[R], int64_t b, uint16_t Block::*field, std::index_sequence<I...>) {
    __m128i h = _mm_cvtsi32_si128(w[0][b].*field);
    ((h = _mm_insert_epi16(h, w[I + 1][b].*field, static_cast<int>(I + 1))), ...);
    return h;
}
template <class Block, int R>
inline __m128 load_halves(const Block *const (&w)[R], int64_t b, uint16_t Block::*field) {
    return _mm_cvtph_ps(gather_halves<Block, R>(w, b, field, std::make_index_sequence<R - 1>{}));
}

// The exact integer totals of R rows' 8-lane partial sums, row i in lane i (R = 1 or 4). The panel GEMM
// (matmul_panel_avx2.cpp) holds a block's product for each row as one integer in its row's lane and
// applies the block's scales to it; the Q4_0/Q4_K/Q6_K tiles reduce to the same integers and apply
// the same float operations in the same order, so that a token's result does not depend on how many
// tokens its matmul had (batched decoding, speculative verification and prefill agree bit for bit
// with decoding alone).
template <int R>
inline __m128i rows_in_lanes(const __m256i (&p)[R]) {
    if constexpr (R == 1) {
        return _mm_cvtsi32_si128(avx2_hsum_i32(p[0]));
    } else {
        static_assert(R == 4);
        const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
        return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    }
}
// The same from maddubs' 16-bit pair sums, when 4 of them add up without overflow in 16 bits (Q4_0:
// 4 * 3810): the pairs are added across rows first, so that one madd widens all R rows (R = 1 or 4).
template <int R>
inline __m128i rows_in_lanes16(const __m256i (&p)[R]) {
    const __m256i ones = _mm256_set1_epi16(1);
    if constexpr (R == 1) {
        return _mm_cvtsi32_si128(avx2_hsum_i32(_mm256_madd_epi16(p[0], ones)));
    } else {
        static_assert(R == 4);
        const __m256i h = _mm256_madd_epi16(_mm256_hadd_epi16(_mm256_hadd_epi16(p[0], p[1]), _mm256_hadd_epi16(p[2], p[3])), ones);
        return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    }
}

// y = the R lanes of acc[t] (rows r .. r + R - 1) + bias, as the panel GEMM stores them.
template <int R, int T>
inline void store_lanes(const MatmulJob &job, int64_t r, int64_t t0, const __m128 (&acc)[T]) {
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
        alignas(16) float v[4];
        _mm_store_ps(v, acc[t]);
#pragma GCC unroll 4
        for (int i = 0; i < R; ++i) job.y[(t0 + t) * job.y_stride + r + i] = v[i] + (job.bias ? job.bias[r + i] : 0.0f);
    }
}

// Where a tile of the integer kernels reads: R weight rows (as blocks of the weight type) and, for T
// tokens, the quantized activations (values, block scales and block sums; QuantActs' layout).
template <class Block, int R, int T>
struct TileOperands {
    const Block *w[R];
    const int8_t *xq[T];
    const float *xd[T];
    const float *xs[T];
    TileOperands(const MatmulJob &job, int64_t r, int64_t t0) {
        for (int i = 0; i < R; ++i) w[i] = reinterpret_cast<const Block *>(job.w + static_cast<size_t>(r + i) * job.row_bytes);
        for (int t = 0; t < T; ++t) {
            xq[t] = job.xq.qs + (t0 + t) * job.n_in;
            xd[t] = job.xq.d + (t0 + t) * job.xq.nb;
            xs[t] = job.xq.sum + (t0 + t) * job.xq.nb;
        }
    }
};

// Decode tiles 4 rows: one activation load serves 4 weight rows. Prefill tiles K::kPrefillRows rows x
// up to 4 tokens (chosen per kernel by measurement).
template <class K, int T>
void rows_for_tokens(const MatmulJob &job, int64_t rb, int64_t re, int64_t t0) {
    constexpr int R = T == 1 ? 4 : K::kPrefillRows;
    int64_t r = rb;
    for (; r + R <= re; r += R) K::template tile<R, T>(job, r, t0);
    for (; r < re; ++r) K::template tile<1, T>(job, r, t0);
}

template <class K>
void drive(const MatmulJob &job, int64_t r0, int64_t r1) {
    walk_row_blocks<kTokTile>(job, r0, r1,
                              [&job]<int T>(int64_t rb, int64_t re, int64_t t0) { rows_for_tokens<K, T>(job, rb, re, t0); });
}

} // namespace

} // namespace ember::cpu::detail
