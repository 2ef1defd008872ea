// q4k_rows16_avx512.cpp — the AVX-512 tile of Q4_K interleaved 16 rows at a time (q4k_rows16.hpp), for
// one to four tokens (decode, small batches). Compiled with the AVX-512 flags and reached only through
// the kernel table after the CPU check (cpu_features.cpp).
//
// Lane i of every vector is row i of the group. Per 32-weight sub-block, 8 VPDPBUSD (4 codes of each
// row against 4 activations broadcast) sum the row's exact integer in its lane: the integer the file
// layout's tiles reduce to (vec_dot_k_avx2.cpp's Q4K, vec_dot_k_avx512.cpp's decode tile). Then their
// float operations, in their order, per row: acc = fma(float(I_j), (float(sc_j) d) d_x, acc),
// acc = fnma(float(m_j) dmin, d_x sum_x, acc) for the sub-blocks j in order; so the same bits.
#include "core/dtype.hpp"
#include "cpu/q4k_rows16.hpp"
#include "cpu/vec_dot.hpp"

#include <immintrin.h>

namespace ember::cpu::detail {

namespace {

// How far ahead of its reads the decode tile prefetches its one stream (a record is 2304 bytes), into
// L1. Measured (TinyLlama-shaped Q4_K_M decode at 2 threads, AVX-512 Xeon VM under load, tokens/s, 3
// alternating rounds): none 31.1 / 31.8 / 31.4, 1 KiB 32.1 / 32.8 / 32.0, 2 KiB 31.5 / 31.7 / 31.9,
// 4 KiB 28.7, 8 KiB 28.0 (L2: 8 KiB 29.4, 16 KiB 31.4); small batches leave it to the hardware.
constexpr int64_t kAhead = 1024;

inline __m512i bcast4(const int8_t *p) {
    int32_t v;
    __builtin_memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

template <int T>
void tile(const MatmulJob &job, int64_t r, int64_t t0) {
    const int64_t nsb = job.n_in / QK_K;
    const uint8_t *grp = job.w + r * static_cast<int64_t>(job.row_bytes);
    const int8_t *xq[T];
    const float *xd[T], *xs[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
        xq[t] = job.xq.qs + (t0 + t) * job.n_in;
        xd[t] = job.xq.d + (t0 + t) * job.xq.nb;
        xs[t] = job.xq.sum + (t0 + t) * job.xq.nb;
    }
    const __m512i m0f = _mm512_set1_epi8(0x0f), mf0 = _mm512_set1_epi8(static_cast<char>(0xf0));
    const __m512i m3f = _mm512_set1_epi8(0x3f), m30 = _mm512_set1_epi8(0x30);
    __m512 acc[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t s = 0; s < nsb; ++s) {
        const uint8_t *rec = grp + s * static_cast<int64_t>(kQ4KRows16Record);
        if (T == 1) {
#pragma GCC unroll 36
            for (int k = 0; k < 36; ++k) _mm_prefetch(reinterpret_cast<const char *>(rec + kAhead + 64 * k), _MM_HINT_T0);
        }
        // The 16 rows' 6-bit scales and mins, as k_scale_min (quant_k.hpp) forms them, on byte b of all
        // rows at once: 16-byte quarter j of sc[0] holds sc_j of rows 0..15, of sc[1] sc_(4 + j).
        const __m512i a = _mm512_loadu_si512(rec + 64), b = _mm512_loadu_si512(rec + 128), c = _mm512_loadu_si512(rec + 192);
        alignas(64) uint8_t sc[2][64], mn[2][64];
        _mm512_store_si512(sc[0], _mm512_and_si512(a, m3f));
        _mm512_store_si512(mn[0], _mm512_and_si512(b, m3f));
        _mm512_store_si512(sc[1], _mm512_or_si512(_mm512_and_si512(c, m0f), _mm512_and_si512(_mm512_srli_epi16(a, 2), m30)));
        _mm512_store_si512(mn[1], _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(c, 4), m0f),
                                                  _mm512_and_si512(_mm512_srli_epi16(b, 2), m30)));
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(rec)));
        const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(rec + 32)));
        alignas(32) float xm[T][8];  // d_x * sum x per activation block, as the other tiles form it
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t)
            _mm256_store_ps(xm[t], _mm256_mul_ps(_mm256_loadu_ps(xd[t] + 8 * s), _mm256_loadu_ps(xs[t] + 8 * s)));
        auto widen = [](const uint8_t *p) {
            return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i *>(p))));
        };
        auto apply = [&](int j, const __m512i (&ints)[T]) {
            const __m512 dsc = _mm512_mul_ps(widen(&sc[j / 4][16 * (j % 4)]), d);
            const __m512 dmn = _mm512_mul_ps(widen(&mn[j / 4][16 * (j % 4)]), dmin);
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) {
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ints[t]), _mm512_mul_ps(dsc, _mm512_set1_ps(xd[t][8 * s + j])), acc[t]);
                acc[t] = _mm512_fnmadd_ps(dmn, _mm512_set1_ps(xm[t][j]), acc[t]);
            }
        };
        const uint8_t *qs = rec + 256;
#pragma GCC unroll 1
        for (int g = 0; g < 4; ++g) {  // sub-blocks 2g (low nibbles) and 2g + 1 (high nibbles)
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
            // The high nibbles were kept in place (16 x the code): their totals are 16 x the integer, exact.
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) hi[t] = _mm512_srai_epi32(hi[t], 4);
            apply(2 * g, lo);
            apply(2 * g + 1, hi);
        }
    }
    const __m512 bias = job.bias ? _mm512_loadu_ps(job.bias + r) : _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) _mm512_storeu_ps(job.y + (t0 + t) * job.y_stride + r, _mm512_add_ps(acc[t], bias));
}

} // namespace

void matmul_rows_q4_k_rows16_avx512(const MatmulJob &job, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r += kQ4KRows16) {
        switch (job.n_tokens) {
        case 1: tile<1>(job, r, 0); break;
        case 2: tile<2>(job, r, 0); break;
        case 3: tile<3>(job, r, 0); break;
        default: tile<4>(job, r, 0); break;
        }
    }
}

} // namespace ember::cpu::detail
