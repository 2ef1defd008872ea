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
//   hsum4's fixed tree. Here the K rows are widened in pairs (keys j and j + 4 of each group of 8, dims
//   8c .. 8c + 7 side by side), so one 512-bit FMA runs both keys' chains, each in its own 256-bit half,
//   step for step, and reduce_keys runs hsum4's tree for 16 keys at a time;
// - values: each output element is acc * corr, then one FMA per key in key order; 16 elements per vector
//   instead of 8 leaves every element's chain as it was;
// - softmax: softmax_step's operations with the exp on 16 lanes (avx512_exp) and its sums in its order;
// - widening (F16C, or the Q8_0 or Q4_0 scale) and finish are attention_x86.hpp's, shared.
// tests/test_cpu_kernels.cpp (test_attention_batch, test_attention_blocks) compares the levels bit for
// bit.
#include "cpu/attention_x86.hpp"
#include "cpu/simd_avx512.hpp"
#include "cpu/vec_dot.hpp"

// As in matmul_panel_avx512.cpp: avx512fintrin.h's _mm512_undefined_* initialise themselves on purpose
// (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

namespace ember::cpu::detail {

namespace {

// Where key j of a tile sits in the pair buffer (widen_k_pairs): keys go in groups of 8, and in group
// G pair p (0 .. 3) holds keys 8G + p and 8G + p + 4, dims 8c .. 8c + 7 of each side by side at
// 16 c + 8 h (h = 0, 1). That pairing makes the reduction below come out in key order.
inline float *k_pair_slot(float *buf, int hd, int j) { return buf + (j >> 3) * 8 * hd + (j & 3) * 2 * hd + 8 * ((j >> 2) & 1); }

// The tile's K rows (found by runs) widened into buf in pairs (k_pair_slot). Keys from nk up to a
// multiple of 8 are zero (their scores are formed and then overwritten with -inf).
template <class Row>
inline void widen_k_pairs(const Row &row, const uint8_t *src, size_t stride, const AttnRuns &runs, int hd, int nk, float *buf) {
    for (int r = 0; r < runs.n; ++r) {
        const uint8_t *p = src + runs.off[r];
        for (int j = runs.start[r]; j < runs.start[r + 1]; ++j, p += stride)
            for (int i = 0; i < hd; i += 8) _mm256_store_ps(k_pair_slot(buf, hd, j) + 2 * i, row.load8(p, i));
    }
    for (int j = nk; j < ((nk + 7) & ~7); ++j)
        for (int i = 0; i < hd; i += 8) _mm256_store_ps(k_pair_slot(buf, hd, j) + 2 * i, _mm256_setzero_ps());
}

// attention_x86.hpp's in_register for 512-bit vectors.
inline void in_register(__m512 &v) { asm("" : "+v"(v)); }

// hsum4's hadd on 512-bit vectors: in each 128-bit lane, [a0 + a1, a2 + a3, b0 + b1, b2 + b3].
inline __m512 hadd512(__m512 a, __m512 b) { return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x88), _mm512_shuffle_ps(a, b, 0xdd)); }

// The sums of the chains of 8 G keys (c[p]: pair p's two keys' 8 lanes each, as k_pair_slot pairs
// them), in key order in lanes 0 .. 8 G - 1, each by hsum4's tree: lanes (0 + 1) and (2 + 3), then
// those two, within each 128-bit half of a key's 8 lanes, then the halves. Two levels of hadd512 bring
// keys p and p + 4 of a group's four pairs into 128-bit lanes [(0123) of keys 0-3, (4567) of keys 0-3,
// (0123) of keys 4-7, (4567) of keys 4-7]; one shuffle of 128-bit lanes lines the halves up. 14
// shuffles per 16 keys where hsum4 on 256-bit halves took 36.
template <int G>
inline __m512 reduce_keys(const __m512 *c) {
    const __m512 y = hadd512(hadd512(c[0], c[1]), hadd512(c[2], c[3]));
    const __m512 z = G == 2 ? hadd512(hadd512(c[4], c[5]), hadd512(c[6], c[7])) : y;
    return _mm512_add_ps(_mm512_shuffle_f32x4(y, z, 0x88), _mm512_shuffle_f32x4(y, z, 0xdd));
}

// Scores of heads a and b for 8 G keys from the pair buffer (kp: their first group): 8 G independent
// FMA chains per head, each dot_qk4x2's chain for its key, step for step.
template <int G>
inline void scores_pass(const AttnHead &a, const AttnHead &b, const float *kp, int hd, float *sa, float *sb) {
    constexpr int P = 4 * G;
    __m512 ca[P], cb[P];
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) ca[p] = cb[p] = _mm512_setzero_ps();
    for (int i = 0; i < hd; i += 8) {
        const __m512 qa = _mm512_broadcast_f32x8(_mm256_loadu_ps(a.q + i)), qb = _mm512_broadcast_f32x8(_mm256_loadu_ps(b.q + i));
#pragma GCC unroll 8
        for (int p = 0; p < P; ++p) {
            __m512 kv = _mm512_load_ps(kp + p * 2 * hd + 2 * i);
            in_register(kv);
            ca[p] = _mm512_fmadd_ps(qa, kv, ca[p]);
            cb[p] = _mm512_fmadd_ps(qb, kv, cb[p]);
        }
    }
    const __m512 ra = _mm512_mul_ps(reduce_keys<G>(ca), _mm512_set1_ps(a.scale));
    const __m512 rb = _mm512_mul_ps(reduce_keys<G>(cb), _mm512_set1_ps(b.scale));
    if (G == 2) {
        _mm512_storeu_ps(sa, ra);
        _mm512_storeu_ps(sb, rb);
    } else {
        _mm256_storeu_ps(sa, _mm512_castps512_ps256(ra));
        _mm256_storeu_ps(sb, _mm512_castps512_ps256(rb));
    }
}

// Scores of heads a and b (head_dim a multiple of 8) for the tile's keys from the pair buffer, 16 keys
// per pass (32 chains) while more than 8 are left, then 8. Then the caps and the -inf padding.
inline void tile_scores2(const AttnHead &a, const AttnHead &b, const float *kp, int nk, float *sa, float *sb) {
    const int hd = a.head_dim;
    for (int j = 0; j < nk;) {
        if (nk - j > 8) {
            scores_pass<2>(a, b, kp + j * hd, hd, sa + j, sb + j);
            j += 16;
        } else {
            scores_pass<1>(a, b, kp + j * hd, hd, sa + j, sb + j);
            j += 8;
        }
    }
    finish_scores(a, sa, nk);
    finish_scores(b, sb, nk);
}

// acc_h = acc_h * corr[h] + sum_j pr_h[j] v_j for H heads (head h's accumulator at acc + h hd, its
// weights at pr + h kAttnTile) over the nk widened V rows (key j at v + j hd), dims i0 .. i0 + 16 NV - 1
// (the last vector's lanes cut to `last`): H NV chains, each V vector loaded once for the H heads.
template <int H, int NV>
inline void accumulate_v(const float *v, int hd, int nk, int i0, __mmask16 last, const float *pr, float *acc, const float *corr) {
    __m512 a[H][NV];
    __mmask16 m[NV];
#pragma GCC unroll 4
    for (int u = 0; u < NV; ++u) m[u] = u + 1 < NV ? __mmask16{0xffff} : last;
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h) {
        const __m512 cv = _mm512_set1_ps(corr[h]);
#pragma GCC unroll 4
        for (int u = 0; u < NV; ++u) a[h][u] = _mm512_mul_ps(_mm512_maskz_loadu_ps(m[u], acc + h * hd + i0 + 16 * u), cv);
    }
    for (int j = 0; j < nk; ++j, v += hd) {
        __m512 pj[H];
#pragma GCC unroll 4
        for (int h = 0; h < H; ++h) pj[h] = _mm512_set1_ps(pr[h * kAttnTile + j]);
#pragma GCC unroll 4
        for (int u = 0; u < NV; ++u) {
            __m512 vv = _mm512_maskz_loadu_ps(m[u], v + i0 + 16 * u);
            in_register(vv);
#pragma GCC unroll 4
            for (int h = 0; h < H; ++h) a[h][u] = _mm512_fmadd_ps(pj[h], vv, a[h][u]);
        }
    }
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h)
#pragma GCC unroll 4
        for (int u = 0; u < NV; ++u) _mm512_mask_storeu_ps(acc + h * hd + i0 + 16 * u, m[u], a[h][u]);
}

// accumulate_v over the whole head: passes of 64 dims (4 H chains), then the rest (8 .. 56 dims).
template <int H>
inline void tile_values(const float *v, int hd, int nk, const float *pr, float *acc, const float *corr) {
    int i = 0;
    for (; hd - i >= 64; i += 64) accumulate_v<H, 4>(v, hd, nk, i, 0xffff, pr, acc, corr);
    const int rest = hd - i;  // a multiple of 8
    const __mmask16 last = rest % 16 ? __mmask16{0x00ff} : __mmask16{0xffff};
    switch ((rest + 15) / 16) {
    case 1: accumulate_v<H, 1>(v, hd, nk, i, last, pr, acc, corr); break;
    case 2: accumulate_v<H, 2>(v, hd, nk, i, last, pr, acc, corr); break;
    case 3: accumulate_v<H, 3>(v, hd, nk, i, last, pr, acc, corr); break;
    default: break;
    }
}

// softmax_step (attention_x86.hpp) for n heads of one token, s[g] head g's scores, pr + g kAttnTile
// its weights, with softmax_step's bits: the maximum by tile_max; the weights 16 at a time by
// avx512_exp (avx2_exp's bits lane by lane); their sum lane-wise over the four 8-weight pieces in
// order (0 + p0 + p8 + p16 + p24), then avx2_hsum; the n heads' correction factors e^(m - m_new) by
// one avx512_exp for all (softmax_step takes one exp each).
inline void softmax_heads(const float (*s)[kAttnTile], int n, float *pr, float *m, float *l, float *corr) {
    alignas(64) float m_new[16], d[16] = {};
    for (int g = 0; g < n; ++g) {
        const float tmax = tile_max(s[g]);
        m_new[g] = m[g] > tmax ? m[g] : tmax;
        d[g] = m[g] - m_new[g];
    }
    alignas(64) float cf[16];
    _mm512_store_ps(cf, avx512_exp(_mm512_load_ps(d)));
    const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
    for (int g = 0; g < n; ++g, pr += kAttnTile) {
        const __m512 mv = _mm512_set1_ps(m_new[g]);
        __m256 lsum = _mm256_setzero_ps();
        for (int c = 0; c < kAttnTile; c += 16) {
            const __m512 sv = _mm512_load_ps(s[g] + c);
            const __m512 p = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(sv, ninf, _CMP_NEQ_OQ), avx512_exp(_mm512_sub_ps(sv, mv)));
            _mm512_store_ps(pr + c, p);
            lsum = _mm256_add_ps(_mm256_add_ps(lsum, _mm512_castps512_ps256(p)), _mm512_extractf32x8_ps(p, 1));
        }
        corr[g] = cf[g];
        l[g] = l[g] * cf[g] + avx2_hsum(lsum);
        m[g] = m_new[g];
    }
}

// attention_avx2.cpp's attend_heads (a block of tokens' heads, each tile's rows widened once for all):
// scores two heads per pass (an odd last head runs as its own pair's second head too, its copy's
// scores going to a spare row), values four heads per pass, then two, then one.
template <class Row>
void attend_heads(const AttnHead *a, int n, int n_tok) {
    const Row row{a[0].head_off};
    const int hd = a[0].head_dim;
    alignas(64) float buf[kAttnTile * kMaxHeadDim];
    alignas(64) float s[kMaxAttnGroup + 1][kAttnTile];
    BlockState st;
    st.init(n * n_tok, hd);
    const AttnHead &lead = block_lead(a, n, n_tok);
    AttnRuns runs;
    for (int64_t j0 = lead.first_key; j0 < lead.n_keys; j0 += kAttnTile) {
        const int nk_lead = static_cast<int>(lead.n_keys - j0 < kAttnTile ? lead.n_keys - j0 : kAttnTile);
        attn_tile_runs(lead, j0, nk_lead, runs);
        widen_k_pairs(row, lead.k, lead.kv_stride, runs, hd, nk_lead, buf);
        for (int t = 0; t < n_tok; ++t) {
            const AttnHead *at = a + t * n;
            if (j0 >= at->n_keys) continue;
            const int nk = static_cast<int>(at->n_keys - j0 < kAttnTile ? at->n_keys - j0 : kAttnTile);
            for (int g = 0; g < n; g += 2) {
                const bool pair = g + 1 < n;
                tile_scores2(at[g], at[pair ? g + 1 : g], buf, nk, s[g], s[pair ? g + 1 : kMaxAttnGroup]);
            }
            const int i = t * n;
            softmax_heads(s, n, st.pr + i * kAttnTile, st.m + i, st.l + i, st.corr + i);
        }
        widen_tile(row, lead.v, lead.kv_stride, runs, hd, buf);
        for (int t = 0; t < n_tok; ++t) {
            if (j0 >= a[t * n].n_keys) continue;
            const int nk = static_cast<int>(a[t * n].n_keys - j0 < kAttnTile ? a[t * n].n_keys - j0 : kAttnTile);
            int i = t * n;
            const int end = i + n;
            for (; i + 4 <= end; i += 4) tile_values<4>(buf, hd, nk, st.pr + i * kAttnTile, st.acc + i * hd, st.corr + i);
            for (; i + 2 <= end; i += 2) tile_values<2>(buf, hd, nk, st.pr + i * kAttnTile, st.acc + i * hd, st.corr + i);
            if (i < end) tile_values<1>(buf, hd, nk, st.pr + i * kAttnTile, st.acc + i * hd, st.corr + i);
        }
    }
    for (int i = 0; i < n * n_tok; ++i) finish(a[i], st.acc + i * hd, st.m[i], st.l[i]);
}

} // namespace

void attend_heads_avx512(const AttnHead *a, int n, int n_tok) { attend_heads<F16Row>(a, n, n_tok); }
void attend_heads_q8_0_avx512(const AttnHead *a, int n, int n_tok) { attend_heads<Q8Row>(a, n, n_tok); }
void attend_heads_q4_0_avx512(const AttnHead *a, int n, int n_tok) { attend_heads<Q4Row>(a, n, n_tok); }

} // namespace ember::cpu::detail
