// attention_avx512.cpp — attend_heads (the query heads of one KV head together, attention_avx2.cpp) on
// 512-bit vectors, for the AVX-512 and AMX levels, with the bits of the AVX2 kernels (attend_head's, head
// by head). Compiled with the AVX-512 flags (CMakeLists.txt: *_avx512.cpp) and reached only through the
// kernel table after the CPU check (cpu_features.cpp).
//
// Why. In prefill each head's scores and weighted values are FMA chains over the tile's keys (one per
// 8 dims or per key), and at head_dim 64 the AVX2 kernel already keeps both FMA ports busy with two
// heads' chains; a 512-bit FMA does two of those 8-lane steps at once. Attention was 12-18 % of a
// TinyLlama prefill of 512 tokens at the AMX level.
//
// Same bits. Nothing a lane computes changes, only how many lanes one instruction carries:
// - scores: the AVX2 kernel's chain for a key is acc = fma(q[i..i+8], k[i..i+8], acc) over i, then
//   hsum4's fixed tree. Here the K rows are widened in pairs (key 2p's dims 8c .. 8c + 7 beside key
//   2p + 1's), so one 512-bit FMA runs both keys' chains, each in its own 256-bit half, step for step,
//   and hsum4 takes the halves;
// - values: each output element is acc * corr, then one FMA per key in key order; 16 elements per vector
//   instead of 8 leaves every element's chain as it was;
// - widening (F16C or the Q8_0 scale), softmax_step and finish are attention_x86.hpp's, shared.
// tests/test_cpu_kernels.cpp (test_attention_batch) compares the levels bit for bit.
#include "cpu/attention_x86.hpp"
#include "cpu/vec_dot.hpp"

// As in matmul_panel_avx512.cpp: avx512fintrin.h's _mm512_undefined_* initialise themselves on purpose
// (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

namespace ember::cpu::detail {

namespace {

// The tile's K rows (found by runs) widened into buf in pairs: key j's dims 8c .. 8c + 7 at
// buf + (j / 2) 2 hd + 16 c + 8 (j % 2). Keys from nk up to a multiple of 8 are zero (their scores are
// formed and then overwritten with -inf).
template <class Row>
inline void widen_k_pairs(const Row &row, const uint8_t *src, size_t stride, const AttnRuns &runs, int hd, int nk, float *buf) {
    auto at = [buf, hd](int j) { return buf + (j / 2) * 2 * hd + 8 * (j % 2); };
    for (int r = 0; r < runs.n; ++r) {
        const uint8_t *p = src + runs.off[r];
        for (int j = runs.start[r]; j < runs.start[r + 1]; ++j, p += stride)
            for (int i = 0; i < hd; i += 8) _mm256_store_ps(at(j) + 2 * i, row.load8(p, i));
    }
    for (int j = nk; j < ((nk + 7) & ~7); ++j)
        for (int i = 0; i < hd; i += 8) _mm256_store_ps(at(j) + 2 * i, _mm256_setzero_ps());
}

inline __m256 lo256(__m512 v) { return _mm512_castps512_ps256(v); }
inline __m256 hi256(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }

// Scores of heads a and b (head_dim a multiple of 8) for the tile's keys from the pair buffer, 8 keys
// (4 pairs) per pass: 8 independent FMA chains, as dot_qk4x2's. Then the caps and the -inf padding.
inline void tile_scores2(const AttnHead &a, const AttnHead &b, const float *kp, int nk, float *sa, float *sb) {
    const int hd = a.head_dim;
    const __m128 scale_a = _mm_set1_ps(a.scale), scale_b = _mm_set1_ps(b.scale);
    for (int j = 0; j < nk; j += 8, kp += 8 * hd) {
        __m512 ca[4], cb[4];
#pragma GCC unroll 4
        for (int p = 0; p < 4; ++p) ca[p] = cb[p] = _mm512_setzero_ps();
        for (int i = 0; i < hd; i += 8) {
            const __m512 qa = _mm512_broadcast_f32x8(_mm256_loadu_ps(a.q + i)), qb = _mm512_broadcast_f32x8(_mm256_loadu_ps(b.q + i));
#pragma GCC unroll 4
            for (int p = 0; p < 4; ++p) {
                const __m512 kv = _mm512_load_ps(kp + p * 2 * hd + 2 * i);
                ca[p] = _mm512_fmadd_ps(qa, kv, ca[p]);
                cb[p] = _mm512_fmadd_ps(qb, kv, cb[p]);
            }
        }
        _mm_storeu_ps(sa + j, _mm_mul_ps(hsum4(lo256(ca[0]), hi256(ca[0]), lo256(ca[1]), hi256(ca[1])), scale_a));
        _mm_storeu_ps(sa + j + 4, _mm_mul_ps(hsum4(lo256(ca[2]), hi256(ca[2]), lo256(ca[3]), hi256(ca[3])), scale_a));
        _mm_storeu_ps(sb + j, _mm_mul_ps(hsum4(lo256(cb[0]), hi256(cb[0]), lo256(cb[1]), hi256(cb[1])), scale_b));
        _mm_storeu_ps(sb + j + 4, _mm_mul_ps(hsum4(lo256(cb[2]), hi256(cb[2]), lo256(cb[3]), hi256(cb[3])), scale_b));
    }
    auto finish_scores = [nk](const AttnHead &h, float *s) {
        if (h.softcap > 0) attn_softcap(s, nk, h.softcap);
        for (int j = nk; j < kAttnTile; ++j) s[j] = -__builtin_inff();
    };
    finish_scores(a, sa);
    finish_scores(b, sb);
}

// acc = acc * corr + sum_j pr_j v_j for two heads over the nk widened V rows (key j at v + j hd), dims
// i0 .. i0 + 16 NV - 1 (the last vector's lanes cut to `last`): 2 NV chains.
template <int NV>
inline void accumulate_v2(const float *v, int hd, int nk, int i0, __mmask16 last, const float *pa, const float *pb, float *acc_a,
                          float *acc_b, __m512 corr_a, __m512 corr_b) {
    __m512 a[NV], b[NV];
    __mmask16 m[NV];
#pragma GCC unroll 4
    for (int u = 0; u < NV; ++u) {
        m[u] = u + 1 < NV ? __mmask16{0xffff} : last;
        a[u] = _mm512_mul_ps(_mm512_maskz_loadu_ps(m[u], acc_a + i0 + 16 * u), corr_a);
        b[u] = _mm512_mul_ps(_mm512_maskz_loadu_ps(m[u], acc_b + i0 + 16 * u), corr_b);
    }
    for (int j = 0; j < nk; ++j, v += hd) {
        const __m512 paj = _mm512_set1_ps(pa[j]), pbj = _mm512_set1_ps(pb[j]);
#pragma GCC unroll 4
        for (int u = 0; u < NV; ++u) {
            const __m512 vv = _mm512_maskz_loadu_ps(m[u], v + i0 + 16 * u);
            a[u] = _mm512_fmadd_ps(paj, vv, a[u]);
            b[u] = _mm512_fmadd_ps(pbj, vv, b[u]);
        }
    }
#pragma GCC unroll 4
    for (int u = 0; u < NV; ++u) {
        _mm512_mask_storeu_ps(acc_a + i0 + 16 * u, m[u], a[u]);
        _mm512_mask_storeu_ps(acc_b + i0 + 16 * u, m[u], b[u]);
    }
}

// accumulate_v2 over the whole head: passes of 64 dims (8 chains), then the rest (8 .. 56 dims).
inline void tile_values2(const float *v, int hd, int nk, const float *pa, const float *pb, float *acc_a, float *acc_b, float corr_a,
                         float corr_b) {
    const __m512 ca = _mm512_set1_ps(corr_a), cb = _mm512_set1_ps(corr_b);
    int i = 0;
    for (; hd - i >= 64; i += 64) accumulate_v2<4>(v, hd, nk, i, 0xffff, pa, pb, acc_a, acc_b, ca, cb);
    const int rest = hd - i;  // a multiple of 8
    const __mmask16 last = rest % 16 ? __mmask16{0x00ff} : __mmask16{0xffff};
    switch ((rest + 15) / 16) {
    case 1: accumulate_v2<1>(v, hd, nk, i, last, pa, pb, acc_a, acc_b, ca, cb); break;
    case 2: accumulate_v2<2>(v, hd, nk, i, last, pa, pb, acc_a, acc_b, ca, cb); break;
    case 3: accumulate_v2<3>(v, hd, nk, i, last, pa, pb, acc_a, acc_b, ca, cb); break;
    case 4: accumulate_v2<4>(v, hd, nk, i, last, pa, pb, acc_a, acc_b, ca, cb); break;
    default: break;
    }
}

// attention_avx2.cpp's attend_heads, two heads per pass; an odd last head runs as its own pair's second
// head too, its copy's results going to a spare state.
template <class Row>
void attend_heads(const AttnHead *a, int n) {
    const Row row{a[0].head_off};
    const int hd = a[0].head_dim;
    alignas(64) float buf[kAttnTile * kMaxHeadDim];
    HeadState h[kMaxAttnGroup], spare;
    for (int g = 0; g < n; ++g) h[g].init(hd);
    spare.init(hd);
    AttnRuns runs;
    for (int64_t j0 = a[0].first_key; j0 < a[0].n_keys; j0 += kAttnTile) {
        const int nk = static_cast<int>(a[0].n_keys - j0 < kAttnTile ? a[0].n_keys - j0 : kAttnTile);
        attn_tile_runs(a[0], j0, nk, runs);
        widen_k_pairs(row, a[0].k, a[0].kv_stride, runs, hd, nk, buf);
        for (int g = 0; g < n; g += 2) {
            const bool pair = g + 1 < n;
            tile_scores2(a[g], a[pair ? g + 1 : g], buf, nk, h[g].s, pair ? h[g + 1].s : spare.s);
        }
        float corr[kMaxAttnGroup];
        for (int g = 0; g < n; ++g) corr[g] = softmax_step(h[g]);
        widen_tile(row, a[0].v, a[0].kv_stride, runs, hd, buf);
        for (int g = 0; g < n; g += 2) {
            if (g + 1 < n) tile_values2(buf, hd, nk, h[g].pr, h[g + 1].pr, h[g].acc, h[g + 1].acc, corr[g], corr[g + 1]);
            else tile_values2(buf, hd, nk, h[g].pr, h[g].pr, h[g].acc, spare.acc, corr[g], corr[g]);
        }
    }
    for (int g = 0; g < n; ++g) finish(a[g], h[g]);
}

} // namespace

void attend_heads_avx512(const AttnHead *a, int n) { attend_heads<F16Row>(a, n); }
void attend_heads_q8_0_avx512(const AttnHead *a, int n) { attend_heads<Q8Row>(a, n); }

} // namespace ember::cpu::detail
