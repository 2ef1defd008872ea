// vec_dot_b32_scalar.cpp — portable matmul row kernels for the formats of quant_b32.hpp (Q2_K, Q3_K,
// IQ4_NL, IQ4_XS, MXFP4): the fallback without AVX2 and the second opinion for vec_dot_b32_avx2.cpp.
//
// Per block of 32: value_l = d * sc_h * q_l - mn_h (h = l / 16), so the block's share of a dot product
// with 8-bit activations x_l (scale d_x) is
//   d * d_x * (sc_0 * sum_{l<16} q x + sc_1 * sum_{l>=16} q x) - d_x * (mn_0 * sum_{l<16} x + mn_1 * ...).
// The integer parts are exact (|sc * sum q x| <= 32 * 16 * 127 * 127 < 2^24, so exact in float too).
#include "cpu/quant_b32.hpp"
#include "cpu/vec_dot.hpp"

namespace ember::cpu::detail {

namespace {

// A weight row's blocks are decoded once per group of kTokTile tokens, not once per token.
template <B32Decoder kDecode, bool kMin>
void matmul_rows_b32(const MatmulJob &job, int64_t r0, int64_t r1) {
    const int64_t nb = job.xq.nb;
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t *w = job.w + static_cast<size_t>(r) * job.row_bytes;
        const float bias = job.bias ? job.bias[r] : 0.0f;
        for (int64_t t0 = 0; t0 < job.n_tokens; t0 += kTokTile) {
            const int nt = job.n_tokens - t0 < kTokTile ? static_cast<int>(job.n_tokens - t0) : kTokTile;
            float acc[kTokTile] = {};
            Block32 b;
            for (int64_t ib = 0; ib < nb; ++ib) {
                kDecode(w, ib, b);
                for (int j = 0; j < nt; ++j) {
                    const int64_t t = t0 + j;
                    const int8_t *xb = job.xq.qs + t * job.n_in + ib * 32;
                    int32_t s[2] = {0, 0}, sx[2] = {0, 0};
                    for (int l = 0; l < 32; ++l) {
                        s[l / 16] += int32_t{b.q[l]} * xb[l];
                        if constexpr (kMin) sx[l / 16] += xb[l];
                    }
                    const float dx = job.xq.d[t * nb + ib];
                    acc[j] += static_cast<float>(s[0] * b.sc[0] + s[1] * b.sc[1]) * (b.d * dx);
                    if constexpr (kMin)
                        acc[j] -= dx * (b.mn[0] * static_cast<float>(sx[0]) + b.mn[1] * static_cast<float>(sx[1]));
                }
            }
            for (int j = 0; j < nt; ++j) job.y[(t0 + j) * job.y_stride + r] = acc[j] + bias;
        }
    }
}

} // namespace

void matmul_rows_q2_k_scalar(const MatmulJob &job, int64_t r0, int64_t r1) { matmul_rows_b32<b32_decode_q2_k, true>(job, r0, r1); }
void matmul_rows_q3_k_scalar(const MatmulJob &job, int64_t r0, int64_t r1) { matmul_rows_b32<b32_decode_q3_k, false>(job, r0, r1); }
void matmul_rows_iq4_nl_scalar(const MatmulJob &job, int64_t r0, int64_t r1) { matmul_rows_b32<b32_decode_iq4_nl, false>(job, r0, r1); }
void matmul_rows_iq4_xs_scalar(const MatmulJob &job, int64_t r0, int64_t r1) { matmul_rows_b32<b32_decode_iq4_xs, false>(job, r0, r1); }
void matmul_rows_mxfp4_scalar(const MatmulJob &job, int64_t r0, int64_t r1) { matmul_rows_b32<b32_decode_mxfp4, false>(job, r0, r1); }

} // namespace ember::cpu::detail
