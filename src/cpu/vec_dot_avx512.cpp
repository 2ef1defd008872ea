// vec_dot_avx512.cpp — the AVX-512 level's row kernels for decode: Q8_0 (the AVX2 level's tile from
// vec_dot_q8_0_x86.hpp with its integer products formed by 256-bit VPDPBUSD instead of maddubs + madd;
// its prefill goes to matmul_panel_avx512.cpp) and Q4_0 (two blocks per 512-bit VPDPBUSD). Both form the AVX2 kernels' exact integers and apply the
// scales with the same float operations, so they give the same bits. Compiled with the AVX-512 flags and
// reached only through the kernel table after the CPU check (cpu_features.cpp).
#include "cpu/matmul_avx2.hpp"
#include "cpu/vec_dot.hpp"
#include "cpu/vec_dot_q8_0_x86.hpp"

#include <immintrin.h>

namespace ember::cpu::detail {

namespace {

struct DotVnni {
    static __m256i dot(__m256i u, __m256i s) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }
};

// Q4_0 decode (one token), R = 4 or 1 rows: per row, blocks b and b + 1 in one 512-bit vector (each
// 128-bit quarter: 16 codes, the low nibbles of a block then its high nibbles, as the activations lie),
// one VPDPBUSD against the two blocks' 64 activation bytes, then the 16 lanes of R rows reduced to one
// exact integer per row and block. In the AVX2 tile a block costs each row a nibble split and a
// maddubs plus a share of three 16-bit hadds; here half a split and half a VPDPBUSD plus a share of a
// shuffle-and-add transpose: memory-bound decode keeps more loads in flight when it computes less.
// After that, the AVX2 tile's float operations per block, in block order (Q4_0 in vec_dot_avx2.cpp).
struct Q4_0Decode {
    // How far ahead of the tile's first row it prefetches (matmul_avx2.hpp: measured 8 KiB against 4).
    static constexpr int64_t kAhead = 8 * 1024;
    static constexpr int kPrefillRows = 4;  // unused: drive() gets only one token here

    // The totals of R rows' 16 lanes, per 8-lane half: block b in the result's first quarter, block b + 1
    // in its third (row i in lane i of each); the second and fourth quarters (the high nibbles, 16 x
    // the codes) divided by 16 before they are added.
    template <int R>
    static __m512i row_totals(const __m512i (&p)[R]) {
        __m512i u;
        if constexpr (R == 4) {
            const __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(p[0], p[1]), _mm512_unpackhi_epi32(p[0], p[1]));
            const __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(p[2], p[3]), _mm512_unpackhi_epi32(p[2], p[3]));
            u = _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
        } else {
            static_assert(R == 1);
            u = _mm512_add_epi32(p[0], _mm512_shuffle_epi32(p[0], _MM_PERM_BADC));
            u = _mm512_add_epi32(u, _mm512_shuffle_epi32(u, _MM_PERM_CDAB));  // every lane: its quarter's total
            u = _mm512_maskz_mov_epi32(0x1111, u);
        }
        u = _mm512_srav_epi32(u, _mm512_set_epi32(4, 4, 4, 4, 0, 0, 0, 0, 4, 4, 4, 4, 0, 0, 0, 0));  // see decode()
        return _mm512_add_epi32(u, _mm512_shuffle_i32x4(u, u, _MM_SHUFFLE(2, 3, 0, 1)));
    }

    template <int R, int T>
    static void tile(const MatmulJob &job, int64_t r, int64_t t0) {
        // drive() instantiates every token count, but the caller sends one token only.
        if constexpr (T != 1) __builtin_unreachable();
        else decode<R>(job, r, t0);
    }

    template <int R>
    static void decode(const MatmulJob &job, int64_t r, int64_t t0) {
        const int64_t nb = job.xq.nb;
        // Each block's codes twice: the low nibbles kept in the first copy, the high nibbles in place in
        // the second (16 x the code, no shift per row); row_totals divides those totals by 16, once for
        // all rows, which is exact (every product is a multiple of 16).
        const long long lo = 0x0f0f0f0f0f0f0f0fLL, hi = static_cast<long long>(0xf0f0f0f0f0f0f0f0ULL);
        const __m512i nibbles = _mm512_set_epi64(hi, hi, lo, lo, hi, hi, lo, lo);
        const TileOperands<BlockQ4_0, R, 1> op(job, r, t0);
        __m128 acc = _mm_setzero_ps();
        // Applies block b's scales (dw: its R rows' d) to its R exact integers, as the AVX2 tile does.
        auto apply = [&](int64_t b, __m128 dw, __m128i ints) {
            __m128 f = _mm_cvtepi32_ps(ints);
            f = _mm_fnmadd_ps(_mm_set1_ps(8.0f), _mm_broadcast_ss(op.xs[0] + b), f);
            acc = _mm_fmadd_ps(f, _mm_mul_ps(dw, _mm_broadcast_ss(op.xd[0] + b)), acc);
        };
        // The 4 rows' d of block b as floats: the halves gathered in a general register and moved over
        // once. load_halves' inserts and the 256-bit inserts of the codes all wanted the one shuffle
        // port, which bounded this tile (19 GB/s per core from cache, below the AVX2 tile's 22).
        auto d4 = [&](int64_t b) {
            uint64_t h = 0;
#pragma GCC unroll 4
            for (int i = 0; i < 4; ++i) h |= static_cast<uint64_t>(op.w[i][b].d) << (16 * i);
            return _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(h)));
        };
        for (int64_t b = 0; b < nb; b += 2) {
            const bool pair = b + 1 < nb;
            const int64_t b1 = pair ? b + 1 : b;  // a lone last block meets zero activations in the upper half
            if (streams(job, 1, t0)) {
                prefetch_step<R, sizeof(BlockQ4_0), kAhead>(op.w[0], b);
                prefetch_step<R, sizeof(BlockQ4_0), kAhead>(op.w[0], b1);
            }
            const __m512i xv = _mm512_maskz_loadu_epi8(pair ? ~__mmask64{0} : __mmask64{0xffffffff}, op.xq[0] + b * 32);
            __m512i p[R];
#pragma GCC unroll 4
            for (int i = 0; i < R; ++i) {
                // Block b's 16 code bytes in the lower 256 bits (twice), block b1's in the upper: a
                // broadcast and a masked broadcast, both from memory.
                const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(op.w[i][b].qs));
                const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(op.w[i][b1].qs));
                const __m512i q = _mm512_mask_broadcast_i32x4(_mm512_broadcast_i32x4(q0), 0xff00, q1);
                p[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(q, nibbles), xv);
            }
            const __m512i tot = row_totals<R>(p);
            if constexpr (R == 4) {
                apply(b, d4(b), _mm512_castsi512_si128(tot));
                if (pair) apply(b + 1, d4(b + 1), _mm512_extracti32x4_epi32(tot, 2));
            } else {
                apply(b, load_halves<BlockQ4_0, R>(op.w, b, &BlockQ4_0::d), _mm512_castsi512_si128(tot));
                if (pair) apply(b + 1, load_halves<BlockQ4_0, R>(op.w, b + 1, &BlockQ4_0::d), _mm512_extracti32x4_epi32(tot, 2));
            }
        }
        const __m128 accs[1] = {acc};
        store_lanes<R, 1>(job, r, t0, accs);
    }
};

} // namespace

void matmul_rows_q4_0_decode_avx512(const MatmulJob &job, int64_t r0, int64_t r1) {
    // drive() walks the rows in cache blocks and tiles of 4 (then 1); one token only (see the caller).
    drive<Q4_0Decode>(job, r0, r1);
}

void matmul_rows_q8_0_avx512(const MatmulJob &job, int64_t r0, int64_t r1) {
    if (job.n_tokens > kTokTile) return matmul_panels_q8_0_avx512(job, r0, r1);  // same bits, matmul_panel_avx512.cpp
    drive<Q8_0T<DotVnni>>(job, r0, r1);
}

} // namespace ember::cpu::detail
