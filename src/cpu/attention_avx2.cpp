// attention_avx2.cpp — the per-(token, head) attention kernel for AVX2 + FMA + F16C; the algorithm and
// the paging are described in attention.cpp. K and V rows are read as f16 and widened with F16C on the
// fly, each through its offset in the tile's row table (a tile may span several cache blocks).
#include "cpu/simd_avx2.hpp"
#include "cpu/vec_dot.hpp"

namespace ember::cpu::detail {

namespace {


inline __m256 load_h8(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p))); }

// q . k for one key, head_dim = n8 * 8 + tail.
inline float dot_qk(const float *q, const uint16_t *k, int hd) {
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= hd; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load_h8(k + i), acc);
    float s = avx2_hsum(acc);
    for (; i < hd; ++i) s += q[i] * avx2_half_to_float(k[i]);
    return s;
}

// Four keys at once: four independent FMA chains instead of one, and one combined horizontal sum.
inline __m128 dot_qk4(const float *q, const uint16_t *k, const size_t *off, int hd8) {
    const uint16_t *k0 = k + off[0], *k1 = k + off[1], *k2 = k + off[2], *k3 = k + off[3];
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int i = 0; i < hd8; i += 8) {
        const __m256 qv = _mm256_loadu_ps(q + i);
        a0 = _mm256_fmadd_ps(qv, load_h8(k0 + i), a0);
        a1 = _mm256_fmadd_ps(qv, load_h8(k1 + i), a1);
        a2 = _mm256_fmadd_ps(qv, load_h8(k2 + i), a2);
        a3 = _mm256_fmadd_ps(qv, load_h8(k3 + i), a3);
    }
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

// acc[0, 8 NV) = acc * corr + sum_j pr[j] * (v + off[j])[0, 8 NV), with NV accumulators held in
// registers across all keys of the tile. Up to 8 (64 dims) per pass, so that a head of 48 dims is one
// pass of 6 rather than a pass of 4 and a pass of 1, whose lone FMA chain would wait out the FMA
// latency at every key. Each element still sums in key order, so the pass split changes no result.
template <int NV>
inline void accumulate_v(float *acc, const uint16_t *v, const size_t *off, const float *pr, int nk, __m256 corr) {
    __m256 a[NV];
#pragma GCC unroll 8
    for (int u = 0; u < NV; ++u) a[u] = _mm256_mul_ps(_mm256_load_ps(acc + 8 * u), corr);
    for (int jj = 0; jj < nk; ++jj) {
        const __m256 pj = _mm256_broadcast_ss(pr + jj);
        const uint16_t *vr = v + off[jj];
#pragma GCC unroll 8
        for (int u = 0; u < NV; ++u) a[u] = _mm256_fmadd_ps(pj, load_h8(vr + 8 * u), a[u]);
    }
#pragma GCC unroll 8
    for (int u = 0; u < NV; ++u) _mm256_store_ps(acc + 8 * u, a[u]);
}

} // namespace

void attend_head_avx2(const AttnHead &a) {
    const int hd = a.head_dim;
    const int hd8 = hd & ~7;
    alignas(32) float acc[kMaxHeadDim];
    for (int i = 0; i < hd; ++i) acc[i] = 0;
    float m = -__builtin_inff(), l = 0;
    alignas(32) float s[kAttnTile], pr[kAttnTile];
    size_t off[kAttnTile];

    for (int64_t j0 = 0; j0 < a.n_keys; j0 += kAttnTile) {
        const int nk = static_cast<int>(a.n_keys - j0 < kAttnTile ? a.n_keys - j0 : kAttnTile);
        attn_tile_rows(a, j0, nk, off);

        // Scores of the tile; the padding past nk is -inf, so it takes part in the max harmlessly
        // and gets weight 0 below.
        int j = 0;
        if (hd8 == hd) {
            const __m128 scale = _mm_set1_ps(a.scale);
            for (; j + 4 <= nk; j += 4)
                _mm_store_ps(s + j, _mm_mul_ps(dot_qk4(a.q, a.k, off + j, hd8), scale));
        }
        for (; j < nk; ++j) s[j] = dot_qk(a.q, a.k + off[j], hd) * a.scale;
        for (; j < kAttnTile; ++j) s[j] = -__builtin_inff();
        __m256 vmax = _mm256_load_ps(s);
        for (int c = 8; c < kAttnTile; c += 8) vmax = _mm256_max_ps(vmax, _mm256_load_ps(s + c));
        const float tmax = avx2_hmax(vmax);
        const float m_new = m > tmax ? m : tmax;

        // e^(s - m_new) for the tile; then mask the padding to exactly 0 (the clamped exp leaves ~1e-38).
        const __m256 mv = _mm256_set1_ps(m_new);
        __m256 lsum = _mm256_setzero_ps();
        for (int c = 0; c < kAttnTile; c += 8) {
            const __m256 live = _mm256_cmp_ps(_mm256_load_ps(s + c), _mm256_set1_ps(-__builtin_inff()), _CMP_NEQ_OQ);
            const __m256 p = _mm256_and_ps(avx2_exp(_mm256_sub_ps(_mm256_load_ps(s + c), mv)), live);
            _mm256_store_ps(pr + c, p);
            lsum = _mm256_add_ps(lsum, p);
        }
        // Rescale what came before. On the first tile m = -inf: the clamped exp gives ~1e-38 times l = 0
        // and acc = 0, still 0.
        const float corr = _mm256_cvtss_f32(avx2_exp(_mm256_set1_ps(m - m_new)));
        l = l * corr + avx2_hsum(lsum);

        // acc = acc * corr + sum_j p_j v_j, up to 64 dims per pass over the tile's keys.
        const __m256 cv = _mm256_set1_ps(corr);
        int i = 0;
        for (; i + 64 <= hd8; i += 64) accumulate_v<8>(acc + i, a.v + i, off, pr, nk, cv);
        switch ((hd8 - i) / 8) {
        case 1: accumulate_v<1>(acc + i, a.v + i, off, pr, nk, cv); break;
        case 2: accumulate_v<2>(acc + i, a.v + i, off, pr, nk, cv); break;
        case 3: accumulate_v<3>(acc + i, a.v + i, off, pr, nk, cv); break;
        case 4: accumulate_v<4>(acc + i, a.v + i, off, pr, nk, cv); break;
        case 5: accumulate_v<5>(acc + i, a.v + i, off, pr, nk, cv); break;
        case 6: accumulate_v<6>(acc + i, a.v + i, off, pr, nk, cv); break;
        case 7: accumulate_v<7>(acc + i, a.v + i, off, pr, nk, cv); break;
        default: break;
        }
        i = hd8;
        for (; i < hd; ++i) {
            float a0 = acc[i] * corr;
            for (int jj = 0; jj < nk; ++jj) a0 += pr[jj] * avx2_half_to_float(a.v[off[jj] + i]);
            acc[i] = a0;
        }
        m = m_new;
    }
    const float inv = l > 0 ? 1.0f / l : 0.0f;
    for (int i = 0; i < hd; ++i) a.out[i] = acc[i] * inv;
}

} // namespace ember::cpu::detail
