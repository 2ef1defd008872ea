// attention_avx2.cpp — the per-(token, head) attention kernel for AVX2 + FMA + F16C; the algorithm and
// the paging are described in attention.cpp. K and V rows are read as f16 and widened with F16C on the
// fly, or as Q8_0 or Q4_0 and scaled on the fly, run by run (a tile may span several cache blocks). One
// kernel body serves every cache type through a row reader (F16Row, Q8Row, Q4Row): eight elements at a
// time, which for the quantized types always lie in one 32-element block since head_dim and head
// offsets are multiples of 8.
// attend_heads serves the query heads of one KV head together, widening each tile's rows once for all
// of them and running two heads' FMA chains side by side (measured, TinyLlama prefill of 512 tokens at
// the AMX level, 2 threads, 3 alternating runs each: Q4_0 292 -> 314 -> 334, Q4_K_M 246 -> 245 -> 257
// tokens/s for widening once, then pairs; attention was ~13 % of the prefill's samples before).
#include "cpu/attention_x86.hpp"
#include "cpu/simd_avx2.hpp"
#include "cpu/vec_dot.hpp"

namespace ember::cpu::detail {

namespace {


// q . k for one key, head_dim = n8 * 8 + tail.
template <class Row>
inline float dot_qk(const Row &row, const float *q, const uint8_t *k, int hd) {
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= hd; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), row.load8(k, i), acc);
    float s = _mm_cvtss_f32(hsum4(acc, acc, acc, acc));
    for (; i < hd; ++i) s += q[i] * row.at(k, i);
    return s;
}

// Four keys at once (rows k0, k0 + stride, ...): four independent FMA chains instead of one.
template <class Row>
inline __m128 dot_qk4(const Row &row, const float *q, const uint8_t *k0, size_t stride, int hd8) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int i = 0; i < hd8; i += 8) {
        const __m256 qv = _mm256_loadu_ps(q + i);
        a0 = _mm256_fmadd_ps(qv, row.load8(k0, i), a0);
        a1 = _mm256_fmadd_ps(qv, row.load8(k0 + stride, i), a1);
        a2 = _mm256_fmadd_ps(qv, row.load8(k0 + 2 * stride, i), a2);
        a3 = _mm256_fmadd_ps(qv, row.load8(k0 + 3 * stride, i), a3);
    }
    return hsum4(a0, a1, a2, a3);
}

// acc[0, 8 NV) = acc * corr + sum_j pr[j] * v_j[0, 8 NV), v_j the row of key j (v offset as in runs),
// with NV accumulators held in registers across all keys of the tile. With fewer than 4, the FMA chains
// wait out their own latency at every key, so what is left beyond whole passes of 4 joins the last
// pass: a head of 48 dims is one pass of 6, where a pass of 4 and two of 1 made the whole kernel ~10%
// slower. Not 8 per pass: two passes of 4 measured a few per cent faster at head_dim 64. Each element
// sums in key order whatever the passes, so how they are cut changes no result.
template <int NV, class Row>
inline void accumulate_v(const Row &row, float *acc, const uint8_t *v, int i0, size_t stride, const AttnRuns &runs,
                         const float *pr, __m256 corr) {
    __m256 a[NV];
#pragma GCC unroll 8
    for (int u = 0; u < NV; ++u) a[u] = _mm256_mul_ps(_mm256_load_ps(acc + 8 * u), corr);
    for (int r = 0; r < runs.n; ++r) {
        const uint8_t *vr = v + runs.off[r];
        for (int j = runs.start[r]; j < runs.start[r + 1]; ++j, vr += stride) {
            const __m256 pj = _mm256_broadcast_ss(pr + j);
#pragma GCC unroll 8
            for (int u = 0; u < NV; ++u) a[u] = _mm256_fmadd_ps(pj, row.load8(vr, i0 + 8 * u), a[u]);
        }
    }
#pragma GCC unroll 8
    for (int u = 0; u < NV; ++u) _mm256_store_ps(acc + 8 * u, a[u]);
}

// The scaled (and capped) scores of a tile's keys, rows found by runs (k offset as in them, `stride`
// bytes apart along a run); the padding past nk is -inf, so it takes part in the max harmlessly and
// gets weight 0 in softmax_step.
template <class Row>
inline void tile_scores(const Row &row, const AttnHead &a, const uint8_t *k, size_t stride, const AttnRuns &runs, int nk,
                        float *s) {
    const int hd = a.head_dim, hd8 = hd & ~7;
    const __m128 scale = _mm_set1_ps(a.scale);
    for (int r = 0; r < runs.n; ++r) {
        const uint8_t *kr = k + runs.off[r];
        int j = runs.start[r];
        const int end = runs.start[r + 1];
        if (hd8 == hd)
            for (; j + 4 <= end; j += 4, kr += 4 * stride) _mm_storeu_ps(s + j, _mm_mul_ps(dot_qk4(row, a.q, kr, stride, hd8), scale));
        for (; j < end; ++j, kr += stride) s[j] = dot_qk(row, a.q, kr, hd) * a.scale;
    }
    finish_scores(a, s, nk);
}

// acc = acc * corr + sum_j pr_j v_j over the tile's keys: passes of 32 dims, the last one taking the
// rest (up to 56 dims) so that no pass is left with only a few accumulators.
template <class Row>
inline void tile_values(const Row &row, float *acc, const uint8_t *v, size_t stride, const AttnRuns &runs, const float *pr,
                        float corr, int hd) {
    const int hd8 = hd & ~7;
    const __m256 cv = _mm256_set1_ps(corr);
    int i = 0;
    for (; hd8 - i >= 64; i += 32) accumulate_v<4>(row, acc + i, v, i, stride, runs, pr, cv);
    switch ((hd8 - i) / 8) {
    case 1: accumulate_v<1>(row, acc + i, v, i, stride, runs, pr, cv); break;
    case 2: accumulate_v<2>(row, acc + i, v, i, stride, runs, pr, cv); break;
    case 3: accumulate_v<3>(row, acc + i, v, i, stride, runs, pr, cv); break;
    case 4: accumulate_v<4>(row, acc + i, v, i, stride, runs, pr, cv); break;
    case 5: accumulate_v<5>(row, acc + i, v, i, stride, runs, pr, cv); break;
    case 6: accumulate_v<6>(row, acc + i, v, i, stride, runs, pr, cv); break;
    case 7: accumulate_v<7>(row, acc + i, v, i, stride, runs, pr, cv); break;
    default: break;
    }
    for (i = hd8; i < hd; ++i) {
        float a0 = acc[i] * corr;
        for (int r = 0; r < runs.n; ++r) {
            const uint8_t *vr = v + runs.off[r];
            for (int j = runs.start[r]; j < runs.start[r + 1]; ++j, vr += stride) a0 += pr[j] * row.at(vr, i);
        }
        acc[i] = a0;
    }
}

template <class Row>
void attend_head(const AttnHead &a) {
    const Row row{a.head_off};
    HeadState h;
    h.init(a.head_dim);
    AttnRuns runs;
    for (int64_t j0 = a.first_key; j0 < a.n_keys; j0 += kAttnTile) {
        const int nk = static_cast<int>(a.n_keys - j0 < kAttnTile ? a.n_keys - j0 : kAttnTile);
        attn_tile_runs(a, j0, nk, runs);
        tile_scores(row, a, a.k, a.kv_stride, runs, nk, h.s);
        const float corr = softmax_step(h.s, h.pr, h.m, h.l);
        tile_values(row, h.acc, a.v, a.kv_stride, runs, h.pr, corr, a.head_dim);
    }
    finish(a, h.acc, h.m, h.l);
}

// ---- two heads at once (attend_heads) ----------------------------------------------------------------------
// At head_dim 64 one head's work is latency-bound: dot_qk4's four FMA chains and accumulate_v's four
// accumulators each wait out the FMA latency at every step, so the core runs about half its FMA rate.
// Two heads that read the same rows interleave their chains (8 independent ones) over one load of each
// row. Every chain is the one-head kernel's, step for step, so each head keeps its bits.

// dot_qk4 for heads qa and qb against the same four keys.
template <class Row>
inline void dot_qk4x2(const Row &row, const float *qa, const float *qb, const uint8_t *k0, size_t stride, int hd8, __m128 &ra,
                      __m128 &rb) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    for (int i = 0; i < hd8; i += 8) {
        const __m256 qva = _mm256_loadu_ps(qa + i), qvb = _mm256_loadu_ps(qb + i);
        __m256 k0v = row.load8(k0, i), k1v = row.load8(k0 + stride, i);
        in_register(k0v), in_register(k1v);
        a0 = _mm256_fmadd_ps(qva, k0v, a0), b0 = _mm256_fmadd_ps(qvb, k0v, b0);
        a1 = _mm256_fmadd_ps(qva, k1v, a1), b1 = _mm256_fmadd_ps(qvb, k1v, b1);
        __m256 k2v = row.load8(k0 + 2 * stride, i), k3v = row.load8(k0 + 3 * stride, i);
        in_register(k2v), in_register(k3v);
        a2 = _mm256_fmadd_ps(qva, k2v, a2), b2 = _mm256_fmadd_ps(qvb, k2v, b2);
        a3 = _mm256_fmadd_ps(qva, k3v, a3), b3 = _mm256_fmadd_ps(qvb, k3v, b3);
    }
    ra = hsum4(a0, a1, a2, a3);
    rb = hsum4(b0, b1, b2, b3);
}

// tile_scores for heads a and b (head_dim a multiple of 8) over rows found by runs.
template <class Row>
inline void tile_scores2(const Row &row, const AttnHead &a, const AttnHead &b, const uint8_t *k, size_t stride,
                         const AttnRuns &runs, int nk, float *sa, float *sb) {
    const int hd = a.head_dim;
    const __m128 scale_a = _mm_set1_ps(a.scale), scale_b = _mm_set1_ps(b.scale);
    for (int r = 0; r < runs.n; ++r) {
        const uint8_t *kr = k + runs.off[r];
        int j = runs.start[r];
        const int end = runs.start[r + 1];
        for (; j + 4 <= end; j += 4, kr += 4 * stride) {
            __m128 ra, rb;
            dot_qk4x2(row, a.q, b.q, kr, stride, hd, ra, rb);
            _mm_storeu_ps(sa + j, _mm_mul_ps(ra, scale_a));
            _mm_storeu_ps(sb + j, _mm_mul_ps(rb, scale_b));
        }
        for (; j < end; ++j, kr += stride) {
            sa[j] = dot_qk(row, a.q, kr, hd) * a.scale;
            sb[j] = dot_qk(row, b.q, kr, hd) * b.scale;
        }
    }
    finish_scores(a, sa, nk);
    finish_scores(b, sb, nk);
}

// accumulate_v for two heads' accumulators and weights over the same rows.
template <int NV, class Row>
inline void accumulate_v2(const Row &row, float *acc_a, float *acc_b, const uint8_t *v, int i0, size_t stride,
                          const AttnRuns &runs, const float *pa, const float *pb, __m256 corr_a, __m256 corr_b) {
    __m256 a[NV], b[NV];
#pragma GCC unroll 8
    for (int u = 0; u < NV; ++u) {
        a[u] = _mm256_mul_ps(_mm256_load_ps(acc_a + 8 * u), corr_a);
        b[u] = _mm256_mul_ps(_mm256_load_ps(acc_b + 8 * u), corr_b);
    }
    for (int r = 0; r < runs.n; ++r) {
        const uint8_t *vr = v + runs.off[r];
        for (int j = runs.start[r]; j < runs.start[r + 1]; ++j, vr += stride) {
            const __m256 paj = _mm256_broadcast_ss(pa + j), pbj = _mm256_broadcast_ss(pb + j);
#pragma GCC unroll 8
            for (int u = 0; u < NV; ++u) {
                __m256 vv = row.load8(vr, i0 + 8 * u);
                in_register(vv);
                a[u] = _mm256_fmadd_ps(paj, vv, a[u]);
                b[u] = _mm256_fmadd_ps(pbj, vv, b[u]);
            }
        }
    }
#pragma GCC unroll 8
    for (int u = 0; u < NV; ++u) {
        _mm256_store_ps(acc_a + 8 * u, a[u]);
        _mm256_store_ps(acc_b + 8 * u, b[u]);
    }
}

// tile_values for two heads (head_dim a multiple of 8), in passes of 32 dims and the rest.
template <class Row>
inline void tile_values2(const Row &row, float *acc_a, float *acc_b, const uint8_t *v, size_t stride, const AttnRuns &runs,
                         const float *pa, const float *pb, float corr_a, float corr_b, int hd) {
    const __m256 ca = _mm256_set1_ps(corr_a), cb = _mm256_set1_ps(corr_b);
    int i = 0;
    for (; hd - i >= 32; i += 32) accumulate_v2<4>(row, acc_a + i, acc_b + i, v, i, stride, runs, pa, pb, ca, cb);
    switch ((hd - i) / 8) {
    case 1: accumulate_v2<1>(row, acc_a + i, acc_b + i, v, i, stride, runs, pa, pb, ca, cb); break;
    case 2: accumulate_v2<2>(row, acc_a + i, acc_b + i, v, i, stride, runs, pa, pb, ca, cb); break;
    case 3: accumulate_v2<3>(row, acc_a + i, acc_b + i, v, i, stride, runs, pa, pb, ca, cb); break;
    default: break;
    }
}

// n query heads that read the same KV head (grouped-query attention), of n_tok tokens of one sequence,
// head_dim a multiple of 8: each tile's K and V rows are widened to f32 once for all the block's heads
// (F16C or the Q8_0 scale, which attend_head does per head and key: half of its vector work at head_dim
// 64), and each head then runs attend_head's steps on the widened rows. Widening is exact and the same
// value either way, and tile_scores' and accumulate_v's results do not depend on how keys are grouped
// into runs (hsum4, and key order per element), so every head gets attend_head's bits. A token whose
// keys end before a tile sits it out; one whose keys end inside it reads the tile's first nk rows,
// which hold its keys as they would alone.
template <class Row>
void attend_heads(const AttnHead *a, int n, int n_tok) {
    const Row row{a[0].head_off};
    const int hd = a[0].head_dim;
    const size_t stride = static_cast<size_t>(hd) * sizeof(float);
    alignas(32) float buf[kAttnTile * kMaxHeadDim];
    alignas(32) float s[2][kAttnTile];
    BlockState st;
    st.init(n * n_tok, hd);
    const AttnHead &lead = block_lead(a, n, n_tok);
    AttnRuns runs, flat;
    flat.n = 1;
    flat.start[0] = 0;
    flat.off[0] = 0;
    const auto *rows = reinterpret_cast<const uint8_t *>(buf);
    for (int64_t j0 = lead.first_key; j0 < lead.n_keys; j0 += kAttnTile) {
        attn_tile_runs(lead, j0, static_cast<int>(lead.n_keys - j0 < kAttnTile ? lead.n_keys - j0 : kAttnTile), runs);
        widen_tile(row, lead.k, lead.kv_stride, runs, hd, buf);
        for (int t = 0; t < n_tok; ++t) {
            const AttnHead *at = a + t * n;
            if (j0 >= at->n_keys) continue;
            const int nk = static_cast<int>(at->n_keys - j0 < kAttnTile ? at->n_keys - j0 : kAttnTile);
            flat.start[1] = nk;
            const int i0 = t * n;
            int g = 0;
            for (; g + 2 <= n; g += 2) {
                tile_scores2(F32Row{0}, at[g], at[g + 1], rows, stride, flat, nk, s[0], s[1]);
                for (int u = 0; u < 2; ++u) {
                    const int i = i0 + g + u;
                    st.corr[i] = softmax_step(s[u], st.pr + i * kAttnTile, st.m[i], st.l[i]);
                }
            }
            if (g < n) {
                tile_scores(F32Row{0}, at[g], rows, stride, flat, nk, s[0]);
                const int i = i0 + g;
                st.corr[i] = softmax_step(s[0], st.pr + i * kAttnTile, st.m[i], st.l[i]);
            }
        }
        widen_tile(row, lead.v, lead.kv_stride, runs, hd, buf);
        for (int t = 0; t < n_tok; ++t) {
            if (j0 >= a[t * n].n_keys) continue;
            flat.start[1] = static_cast<int>(a[t * n].n_keys - j0 < kAttnTile ? a[t * n].n_keys - j0 : kAttnTile);
            int i = t * n;
            const int end = i + n;
            for (; i + 2 <= end; i += 2)
                tile_values2(F32Row{0}, st.acc + i * hd, st.acc + (i + 1) * hd, rows, stride, flat, st.pr + i * kAttnTile,
                             st.pr + (i + 1) * kAttnTile, st.corr[i], st.corr[i + 1], hd);
            if (i < end) tile_values(F32Row{0}, st.acc + i * hd, rows, stride, flat, st.pr + i * kAttnTile, st.corr[i], hd);
        }
    }
    for (int i = 0; i < n * n_tok; ++i) finish(a[i], st.acc + i * hd, st.m[i], st.l[i]);
}

} // namespace

void attend_head_avx2(const AttnHead &a) { attend_head<F16Row>(a); }
void attend_head_q8_0_avx2(const AttnHead &a) { attend_head<Q8Row>(a); }
void attend_heads_avx2(const AttnHead *a, int n, int n_tok) { attend_heads<F16Row>(a, n, n_tok); }
void attend_heads_q8_0_avx2(const AttnHead *a, int n, int n_tok) { attend_heads<Q8Row>(a, n, n_tok); }
void attend_head_q4_0_avx2(const AttnHead &a) { attend_head<Q4Row>(a); }
void attend_heads_q4_0_avx2(const AttnHead *a, int n, int n_tok) { attend_heads<Q4Row>(a, n, n_tok); }

} // namespace ember::cpu::detail
