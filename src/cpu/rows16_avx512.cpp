// rows16_avx512.cpp — the AVX-512 tiles of Q4_K, Q6_K, Q4_0 and Q8_0 interleaved 16 rows at a time (rows16.hpp),
// for decode, small batches and short prompts (4 tokens per pass). Compiled with the AVX-512 flags and reached only
// through the kernel table after the CPU check (cpu_features.cpp).
//
// Lane i of every vector is row i of the group: VPDPBUSD of 4 codes of each row against 4 activations
// broadcast sums the row's exact integers in its lane, the integers the file layout's tiles reduce to
// (vec_dot_k_avx2.cpp's Q4K and Q6K, vec_dot_k_avx512.cpp's decode tiles), and then the same float
// operations follow in the same order, per row: the same bits. Q4_K multiplies the per-256 activations
// (QuantActsK) with q4k-spec.md's arithmetic: two exact integers per row and super-block (isum, msum)
// and one float epilogue per super-block; Q6_K, Q4_0 and Q8_0 the per-32 ones, one float step per block
// of 32.
#include "core/dtype.hpp"
#include "cpu/rows16.hpp"
#include "cpu/rows16_x86.hpp"
#include "cpu/vec_dot.hpp"

#include <immintrin.h>

namespace ember::cpu::detail {

namespace {

// How far ahead of its reads a decode tile prefetches its one stream (a record is 2304 bytes for Q4_K,
// 3360 for Q6_K), into L1; small batches leave it to the hardware. Measured (TinyLlama-shaped Q4_K_M
// decode at 2 threads, AVX-512 Xeon VM under load, tokens/s, alternating rounds), Q4_K tile alone: none
// 31.1 / 31.8 / 31.4, 1 KiB 32.1 / 32.8 / 32.0, 2 KiB 31.5 / 31.7 / 31.9, 4 KiB 28.7, 8 KiB 28.0 (into
// L2: 8 KiB 29.4, 16 KiB 31.4); both tiles: 1 KiB 32.9 / 33.4, none 32.7 / 32.4, 2 KiB 32.3 / 32.0, L2
// 2 KiB 32.3 / 31.6, 4 KiB 31.7 / 31.7, 8 KiB (PREFETCHT2) 33.4 / 33.2. The stream is memory-bound
// either way (the samples sit on the prefetches: no line-fill buffer free).
constexpr int64_t kAhead = 1024;
// The same for Q4_0 and Q8_0's records (288 and 544 bytes), measured on a Xeon with AVX-512 VNNI and no
// AMX (TinyLlama-shaped decode at 2 threads, tokens/s, 3 alternating rounds, 2026-11-26): Q4_0 none
// 27.0-27.9, 512 30.4-30.9, 1 KiB 29.8-32.7, 2 KiB 31.4-34.0, 3 KiB 32.1-34.6, 4 KiB 28.2-35.1 (into L2:
// 4 KiB 31.1-32.7, 8 KiB 31.1-31.9); Q8_0 1 KiB 16.8-17.6, 2 KiB 17.4-18.2. (The K-quant tiles on that
// machine, 1 / 2 / 3 KiB: within 2 % of each other.)
constexpr int64_t kAheadB32 = 2048;

// The 4 bytes at p (4 activations, or a pair of int16 block sums) in every 32-bit lane.
inline __m512i bcast4(const void *p) {
    int32_t v;
    __builtin_memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

// y = the 16 rows' acc[t] + bias, as the other tiles store (v + bias, or v + 0.0f).
template <int T>
inline void store16(const MatmulJob &job, int64_t r, int64_t t0, const __m512 (&acc)[T]) {
    const __m512 bias = job.bias ? _mm512_loadu_ps(job.bias + r) : _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) _mm512_storeu_ps(job.y + (t0 + t) * job.y_stride + r, _mm512_add_ps(acc[t], bias));
}

// Q4_K, 16 rows, tokens t0 .. t0 + T - 1, against the per-256 activations (QuantActsK; q4k-spec.md):
// per super-block, 8 VPDPBUSD per sub-block pair form each row's exact integers I_j (the high nibbles
// kept in place, so 16 I_j for odd j); isum = sum_j sc_j I_j is formed in float, exactly: each
// product float(sc_j) * float(I_j) (the odd ones as (sc_j / 16) * float(16 I_j)) is an integer below
// 63 * 32 * 15 * 128 < 2^22, the products of sub-blocks 0..3 and of 4..7 add up to integers below 2^24
// (exact, in any order), and their one final sum rounds as cvtdq2ps(isum) does. That takes one convert
// and one FMA per sub-block and token, where 32-bit multiplies (VPMULLD) take two port-0 micro-ops
// and an add. msum = sum_j m_j S_j is 4 VPDPWSSD (the mins in pairs, the block sums' pairs
// broadcast). Then per row the spec's two FMAs, once per super-block. Measured against the per-32 tile
// (its float steps per sub-block; 2048 inputs, GB/s of weights, medians of 3 alternating rounds, AVX-512
// Xeon VM, 2026-11-26): from L2 (512 rows, one core) 1 token 52 -> 63, 2 tokens 39 -> 46, 4 tokens 25 ->
// 29; from memory (576 MiB) the same either way, 13 / 26 on one / two cores: decode stays bound by the
// memory, and the tile now leaves more of the core to the rest.
template <int T>
void q4_k_tile(const MatmulJob &job, int64_t r, int64_t t0) {
    const QuantActsK &xk = job.xk;
    const int64_t nsb = job.n_in / QK_K;
    const uint8_t *grp = job.w + r * static_cast<int64_t>(job.row_bytes);
    const int8_t *xq[T];
    const float *xd[T];
    const int16_t *xs[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
        xq[t] = xk.qs + (t0 + t) * job.n_in;
        xd[t] = xk.d + (t0 + t) * xk.nsb;
        xs[t] = xk.sum + (t0 + t) * xk.nb;
    }
    const __m512i m0f = _mm512_set1_epi8(0x0f), mf0 = _mm512_set1_epi8(static_cast<char>(0xf0));
    const __m512 sixteenth = _mm512_set1_ps(1.0f / 16);
    __m512 acc[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t s = 0; s < nsb; ++s) {
        const uint8_t *rec = grp + s * static_cast<int64_t>(kQ4KRecord);
        if (T == 1) {
#pragma GCC unroll 36
            for (int k = 0; k < 36; ++k) _mm_prefetch(reinterpret_cast<const char *>(rec + kAhead + 64 * k), _MM_HINT_T0);
        }
        alignas(64) uint8_t sc[2][64], mn[2][64];
        q4k_rows16_scales(rec, sc, mn);
        const uint8_t *qs = rec + kQ4KRecQs;
        __m512 half[T], isum[T];  // the float sums of sc_j I_j over sub-blocks 0..3, then 4..7
#pragma GCC unroll 1
        for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) half[t] = _mm512_setzero_ps();
#pragma GCC unroll 1
            for (int g = 2 * h; g < 2 * h + 2; ++g) {  // sub-blocks 2g (low nibbles) and 2g + 1 (high nibbles)
                __m512i lo[T], hi[T];
#pragma GCC unroll 4
                for (int t = 0; t < T; ++t) lo[t] = hi[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
                for (int k = 0; k < 8; ++k) {
                    const __m512i v = _mm512_loadu_si512(qs + 64 * (8 * g + k));
                    const __m512i vl = _mm512_and_si512(v, m0f), vh = _mm512_and_si512(v, mf0);
#pragma GCC unroll 4
                    for (int t = 0; t < T; ++t) {
                        const int8_t *x = xq[t] + s * QK_K + 64 * g + 4 * k;
                        lo[t] = _mm512_dpbusd_epi32(lo[t], vl, bcast4(x));
                        hi[t] = _mm512_dpbusd_epi32(hi[t], vh, bcast4(x + 32));
                    }
                }
                const __m512 fl = widen16(&sc[h][32 * (g % 2)]);
                const __m512 fh = _mm512_mul_ps(widen16(&sc[h][32 * (g % 2) + 16]), sixteenth);  // exact
#pragma GCC unroll 4
                for (int t = 0; t < T; ++t) {
                    half[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo[t]), fl, half[t]);
                    half[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi[t]), fh, half[t]);
                }
            }
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) isum[t] = h == 0 ? half[t] : _mm512_add_ps(isum[t], half[t]);
        }
        __m512i mp[4];
        q4k_rows16_min_pairs(mn, mp);
        const __m512 d = halves16(rec + kQ4KRecD), dmin = halves16(rec + kQ4KRecDmin);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
            __m512i msum = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int k = 0; k < 4; ++k) msum = _mm512_dpwssd_epi32(msum, mp[k], bcast4(xs[t] + 8 * s + 2 * k));
            const __m512 xdv = _mm512_set1_ps(xd[t][s]);
            acc[t] = _mm512_fmadd_ps(isum[t], _mm512_mul_ps(d, xdv), acc[t]);
            acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(dmin, xdv), acc[t]);
        }
    }
    store16<T>(job, r, t0, acc);
}

// Q6_K, 16 rows, tokens t0 .. t0 + T - 1. value = d * scale_k * (code - 32), one signed 8-bit scale per
// 16 elements; the file layout's tiles form, per row and activation block kb, the exact integer
// I = sum over the block's two halves of scale * sum (code - 32) x, and acc = fma(float(I), d * d_x, acc)
// in block order. Here: sum code * x per half with VPDPBUSD (each lane one row), 32 * sum x of the half
// (the same for every row) taken off, times the half's scales (one 32-bit multiply for 16 rows): the same
// integers (|half| <= 16 * 32 * 128, times |scale| <= 128: inside 32 bits), then the same float steps.
template <int T>
void q6_k_tile(const MatmulJob &job, int64_t r, int64_t t0) {
    const int64_t nsb = job.n_in / QK_K;
    const uint8_t *grp = job.w + r * static_cast<int64_t>(job.row_bytes);
    const int8_t *xq[T];
    const float *xd[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
        xq[t] = job.xq.qs + (t0 + t) * job.n_in;
        xd[t] = job.xq.d + (t0 + t) * job.xq.nb;
    }
    const __m512i m0f = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30), ones = _mm512_set1_epi8(1);
    __m512 acc[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t s = 0; s < nsb; ++s) {
        const uint8_t *rec = grp + s * static_cast<int64_t>(kQ6KRecord);
        if (T == 1) {
#pragma GCC unroll 53
            for (int k = 0; k < 53; ++k) _mm_prefetch(reinterpret_cast<const char *>(rec + kAhead + 64 * k), _MM_HINT_T0);
        }
        const __m512 d = halves16(rec + kQ6KRecD);
        // 32 * (sum of x over each 16-element half q of the super-block): lane 4 (q % 4) of off[t][q / 4].
        alignas(64) int32_t off[T][4][16];
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t)
#pragma GCC unroll 4
            for (int m = 0; m < 4; ++m) {
                __m512i v = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, _mm512_loadu_si512(xq[t] + s * QK_K + 64 * m));
                v = _mm512_add_epi32(v, _mm512_shuffle_epi32(v, _MM_PERM_BADC));
                v = _mm512_add_epi32(v, _mm512_shuffle_epi32(v, _MM_PERM_CDAB));
                _mm512_store_si512(off[t][m], _mm512_slli_epi32(v, 5));
            }
        const uint8_t *ql = rec + kQ6KRecQl, *qh = rec + kQ6KRecQh;
#pragma GCC unroll 1
        for (int h = 0; h < 2; ++h) {  // blocks 4h .. 4h + 3
            __m512i ints[4][T];
#pragma GCC unroll 2
            for (int hf = 0; hf < 2; ++hf) {  // the blocks' first and second 16 elements
                __m512i p[4][T];
#pragma GCC unroll 4
                for (int k = 0; k < 4; ++k)
#pragma GCC unroll 4
                    for (int t = 0; t < T; ++t) p[k][t] = _mm512_setzero_si512();
#pragma GCC unroll 4
                for (int c = 4 * hf; c < 4 * hf + 4; ++c) {
                    const __m512i a = _mm512_loadu_si512(ql + 64 * (16 * h + c));
                    const __m512i b = _mm512_loadu_si512(ql + 64 * (16 * h + 8 + c));
                    const __m512i q = _mm512_loadu_si512(qh + 64 * (8 * h + c));
                    const __m512i code[4] = {
                        _mm512_or_si512(_mm512_and_si512(a, m0f), _mm512_and_si512(_mm512_slli_epi16(q, 4), m30)),
                        _mm512_or_si512(_mm512_and_si512(b, m0f), _mm512_and_si512(_mm512_slli_epi16(q, 2), m30)),
                        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(a, 4), m0f), _mm512_and_si512(q, m30)),
                        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(b, 4), m0f), _mm512_and_si512(_mm512_srli_epi16(q, 2), m30)),
                    };
#pragma GCC unroll 4
                    for (int k = 0; k < 4; ++k)
#pragma GCC unroll 4
                        for (int t = 0; t < T; ++t)
                            p[k][t] = _mm512_dpbusd_epi32(p[k][t], code[k], bcast4(xq[t] + s * QK_K + 128 * h + 32 * k + 4 * c));
                }
#pragma GCC unroll 4
                for (int k = 0; k < 4; ++k) {
                    const int kb = 4 * h + k, q = 2 * kb + hf;  // the half's index in the super-block
                    const __m512i sc = q6k_rows16_scale(rec, q);
#pragma GCC unroll 4
                    for (int t = 0; t < T; ++t) {
                        const __m512i v = _mm512_mullo_epi32(_mm512_sub_epi32(p[k][t], _mm512_set1_epi32(off[t][q / 4][4 * (q % 4)])), sc);
                        ints[k][t] = hf ? _mm512_add_epi32(ints[k][t], v) : v;
                    }
                }
            }
#pragma GCC unroll 4
            for (int k = 0; k < 4; ++k)
#pragma GCC unroll 4
                for (int t = 0; t < T; ++t)
                    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ints[k][t]), _mm512_mul_ps(d, _mm512_set1_ps(xd[t][8 * s + 4 * h + k])), acc[t]);
        }
    }
    store16<T>(job, r, t0, acc);
}

// Q4_0 and Q8_0, 16 rows, tokens t0 .. t0 + T - 1, against the per-32 activations (QuantActs). Per block
// each row's sum of code x by VPDPBUSD, the codes as its unsigned operand: Q4_0's 0..15 (the high nibbles
// kept in place, 16 x the code, in their own sums and divided by 16 once: exact), Q8_0's w + 128 (w XOR
// 0x80). The codes' offset (8, 128) times the activations' sum is taken off in float, exactly (both terms
// and the difference are integers below 2^24), which is the file layout's exact integer as a float, as
// the panels form it (matmul_panel_avx512.cpp's Q4Panel); then the same FMA with d * d_x: the same bits.
template <DType Type, int T>
void b32_tile(const MatmulJob &job, int64_t r, int64_t t0) {
    constexpr bool kQ4 = Type == DType::Q4_0;
    constexpr int64_t kRecord = static_cast<int64_t>(kQ4 ? kQ40Record : kQ80Record);
    const QuantActs &xq = job.xq;
    const int64_t nb = xq.nb;
    const uint8_t *grp = job.w + r * static_cast<int64_t>(job.row_bytes);
    const int8_t *xv[T];
    const float *xd[T], *xs[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
        xv[t] = xq.qs + (t0 + t) * job.n_in;
        xd[t] = xq.d + (t0 + t) * nb;
        xs[t] = xq.sum + (t0 + t) * nb;
    }
    const __m512i m0f = _mm512_set1_epi8(0x0f), mf0 = _mm512_set1_epi8(static_cast<char>(0xf0));
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    const __m512 offset = _mm512_set1_ps(kQ4 ? 8.0f : 128.0f);
    __m512 acc[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    // The next line to prefetch (decode only): kAheadB32 past the block being read.
    const uint8_t *pf = grp + kAheadB32;
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t *rec = grp + b * kRecord, *qs = rec + kB32RecQs;
        if (T == 1)
            for (; pf < rec + kRecord + kAheadB32; pf += 64) _mm_prefetch(reinterpret_cast<const char *>(pf), _MM_HINT_T0);
        __m512i lo[T], hi[T];
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) lo[t] = hi[t] = _mm512_setzero_si512();
        if constexpr (kQ4) {
#pragma GCC unroll 4
            for (int k = 0; k < 4; ++k) {  // unit k: elements 4k .. 4k + 3 (low nibbles), 16 + 4k .. (high)
                const __m512i v = _mm512_loadu_si512(qs + 64 * k);
                const __m512i vl = _mm512_and_si512(v, m0f), vh = _mm512_and_si512(v, mf0);
#pragma GCC unroll 4
                for (int t = 0; t < T; ++t) {
                    lo[t] = _mm512_dpbusd_epi32(lo[t], vl, bcast4(xv[t] + 32 * b + 4 * k));
                    hi[t] = _mm512_dpbusd_epi32(hi[t], vh, bcast4(xv[t] + 32 * b + 16 + 4 * k));
                }
            }
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) lo[t] = _mm512_add_epi32(lo[t], _mm512_srai_epi32(hi[t], 4));
        } else {
#pragma GCC unroll 8
            for (int k = 0; k < 8; ++k) {  // unit k: elements 4k .. 4k + 3; two sums, to halve the chain
                const __m512i v = _mm512_xor_si512(_mm512_loadu_si512(qs + 64 * k), flip);
#pragma GCC unroll 4
                for (int t = 0; t < T; ++t) {
                    __m512i &s = k % 2 ? hi[t] : lo[t];
                    s = _mm512_dpbusd_epi32(s, v, bcast4(xv[t] + 32 * b + 4 * k));
                }
            }
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) lo[t] = _mm512_add_epi32(lo[t], hi[t]);
        }
        const __m512 d = halves16(rec + kB32RecD);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
            const __m512 f = _mm512_fnmadd_ps(offset, _mm512_set1_ps(xs[t][b]), _mm512_cvtepi32_ps(lo[t]));
            acc[t] = _mm512_fmadd_ps(f, _mm512_mul_ps(d, _mm512_set1_ps(xd[t][b])), acc[t]);
        }
    }
    store16<T>(job, r, t0, acc);
}

} // namespace

namespace {

template <void (&Tile1)(const MatmulJob &, int64_t, int64_t), void (&Tile2)(const MatmulJob &, int64_t, int64_t),
          void (&Tile3)(const MatmulJob &, int64_t, int64_t), void (&Tile4)(const MatmulJob &, int64_t, int64_t)>
void groups(const MatmulJob &job, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r += kRows16) {
        for (int64_t t0 = 0; t0 < job.n_tokens; t0 += kTokTile) {
            switch (job.n_tokens - t0 < kTokTile ? job.n_tokens - t0 : kTokTile) {
            case 1: Tile1(job, r, t0); break;
            case 2: Tile2(job, r, t0); break;
            case 3: Tile3(job, r, t0); break;
            default: Tile4(job, r, t0); break;
            }
        }
    }
}

} // namespace

void matmul_rows_q4_k_rows16_avx512(const MatmulJob &job, int64_t r0, int64_t r1) {
    groups<q4_k_tile<1>, q4_k_tile<2>, q4_k_tile<3>, q4_k_tile<4>>(job, r0, r1);
}

void matmul_rows_q6_k_rows16_avx512(const MatmulJob &job, int64_t r0, int64_t r1) {
    groups<q6_k_tile<1>, q6_k_tile<2>, q6_k_tile<3>, q6_k_tile<4>>(job, r0, r1);
}

void matmul_rows_q4_0_rows16_avx512(const MatmulJob &job, int64_t r0, int64_t r1) {
    groups<b32_tile<DType::Q4_0, 1>, b32_tile<DType::Q4_0, 2>, b32_tile<DType::Q4_0, 3>, b32_tile<DType::Q4_0, 4>>(job, r0, r1);
}

void matmul_rows_q8_0_rows16_avx512(const MatmulJob &job, int64_t r0, int64_t r1) {
    groups<b32_tile<DType::Q8_0, 1>, b32_tile<DType::Q8_0, 2>, b32_tile<DType::Q8_0, 3>, b32_tile<DType::Q8_0, 4>>(job, r0, r1);
}

} // namespace ember::cpu::detail
