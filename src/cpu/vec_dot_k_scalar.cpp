// vec_dot_k_scalar.cpp — portable matmul row kernels for the K-quant weights (Q4_K, Q5_K, Q6_K): the
// fallback without AVX2 and the second opinion for vec_dot_k_avx2.cpp.
//
// Q4_K meets activations with one scale per super-block (QuantActsK): its eight sub-block integers,
// weighted by their 6-bit scales, sum exactly in int32 and take the float scales once per super-block
// (vec_dot.hpp gives the steps every level follows). Q5_K and Q6_K meet the activations in blocks of
// 32 with their own scales (QuantActs), so a super-block of 256 weights meets 8 activation scales: each
// 32-element piece is an exact integer dot product that gets its float scale on its own. Q5_K's
// sub-blocks are exactly those pieces; Q6_K's 16-element scales split a piece in two halves, which are
// weighted by their scales in integers first.
#include "core/dtype.hpp"
#include "core/fp16.hpp"
#include "cpu/quant_k.hpp"
#include "cpu/vec_dot.hpp"

namespace ember::cpu::detail {

namespace {

// Q5_K: value = d * sc_j * code - dmin * m_j: sum over sub-block j of value * x_q * d_x is
// d * d_x * (sc_j * sum code x_q) - dmin * m_j * d_x * sum x_q. The integer part is exact in float
// (|sc_j * sum| <= 63 * 32 * 31 * 127 < 2^24), and sum x_q comes with the activations.
void matmul_rows_k5(const MatmulJob &job, int64_t r0, int64_t r1) {
    const int64_t nb = job.xq.nb, nsb = job.n_in / QK_K;
    for (int64_t r = r0; r < r1; ++r) {
        const auto *w = reinterpret_cast<const BlockQ5_K *>(job.w + static_cast<size_t>(r) * job.row_bytes);
        const float bias = job.bias ? job.bias[r] : 0.0f;
        for (int64_t t = 0; t < job.n_tokens; ++t) {
            const int8_t *xq = job.xq.qs + t * job.n_in;
            const float *xd = job.xq.d + t * nb;
            const float *xs = job.xq.sum + t * nb;
            float acc = 0;
            for (int64_t s = 0; s < nsb; ++s) {
                const BlockQ5_K &b = w[s];
                const KScaleMin sm = k_scale_min(b.scales);
                const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
                for (int j = 0; j < 8; ++j) {
                    const int64_t blk = s * 8 + j;
                    const int8_t *xb = xq + blk * 32;
                    const uint8_t *q = b.qs + 32 * (j / 2);
                    int32_t isum = 0;
                    for (int l = 0; l < 32; ++l) {
                        int32_t code = (j & 1) ? q[l] >> 4 : q[l] & 15;
                        code |= ((b.qh[l] >> j) & 1) << 4;
                        isum += code * xb[l];
                    }
                    const int32_t sc = static_cast<int32_t>((sm.sc >> (8 * j)) & 63);
                    const float m = static_cast<float>((sm.m >> (8 * j)) & 63);
                    acc += static_cast<float>(isum * sc) * (d * xd[blk]);
                    acc -= (dmin * m) * (xd[blk] * xs[blk]);
                }
            }
            job.y[t * job.y_stride + r] = acc + bias;
        }
    }
}

} // namespace

// isum = sum_j sc_j * sum_l code x_q: |isum| <= 8 * 63 * 32 * 15 * 127 < 2^25, exact in int32 (its float
// conversion rounds, as every level's does); msum = sum_j m_j * sum_j < 2^24.
void matmul_rows_q4_k_scalar(const MatmulJob &job, int64_t r0, int64_t r1) {
    const QuantActsK &xk = job.xk;
    for (int64_t r = r0; r < r1; ++r) {
        const auto *w = reinterpret_cast<const BlockQ4_K *>(job.w + static_cast<size_t>(r) * job.row_bytes);
        const float bias = job.bias ? job.bias[r] : 0.0f;
        for (int64_t t = 0; t < job.n_tokens; ++t) {
            const int8_t *xq = xk.qs + t * job.n_in;
            float acc = 0;
            for (int64_t s = 0; s < xk.nsb; ++s) {
                const BlockQ4_K &b = w[s];
                const KScaleMin sm = k_scale_min(b.scales);
                int32_t isum = 0, msum = 0;
                for (int j = 0; j < 8; ++j) {
                    const int8_t *xb = xq + (s * 8 + j) * 32;
                    const uint8_t *q = b.qs + 32 * (j / 2);
                    int32_t dot = 0;
                    for (int l = 0; l < 32; ++l) dot += ((j & 1) ? q[l] >> 4 : q[l] & 15) * xb[l];
                    isum += static_cast<int32_t>((sm.sc >> (8 * j)) & 63) * dot;
                    msum += static_cast<int32_t>((sm.m >> (8 * j)) & 63) * xk.sum[t * xk.nb + s * 8 + j];
                }
                const float dx = xk.d[t * xk.nsb + s];
                acc = __builtin_fmaf(static_cast<float>(isum), fp16_to_fp32(b.d) * dx, acc);
                acc = __builtin_fmaf(-static_cast<float>(msum), fp16_to_fp32(b.dmin) * dx, acc);
            }
            job.y[t * job.y_stride + r] = acc + bias;
        }
    }
}

void matmul_rows_q5_k_scalar(const MatmulJob &job, int64_t r0, int64_t r1) { matmul_rows_k5(job, r0, r1); }

// value = d * scale * (code - 32). Activation block k of a super-block (elements 32k ..) has two
// 16-element halves with their own scales; sc_a * sum_a + sc_b * sum_b is exact in int32 and in float
// (at most 32 * 128 * 32 * 127 < 2^24).
void matmul_rows_q6_k_scalar(const MatmulJob &job, int64_t r0, int64_t r1) {
    const int64_t nb = job.xq.nb, nsb = job.n_in / QK_K;
    for (int64_t r = r0; r < r1; ++r) {
        const auto *w = reinterpret_cast<const BlockQ6_K *>(job.w + static_cast<size_t>(r) * job.row_bytes);
        const float bias = job.bias ? job.bias[r] : 0.0f;
        for (int64_t t = 0; t < job.n_tokens; ++t) {
            const int8_t *xq = job.xq.qs + t * job.n_in;
            const float *xd = job.xq.d + t * nb;
            float acc = 0;
            for (int64_t s = 0; s < nsb; ++s) {
                const BlockQ6_K &b = w[s];
                const float d = fp16_to_fp32(b.d);
                for (int kb = 0; kb < 8; ++kb) {
                    const int h = kb / 4, k = kb % 4;
                    const int64_t blk = s * 8 + kb;
                    const int8_t *xb = xq + blk * 32;
                    const uint8_t *ql = b.ql + 64 * h + 32 * (k & 1);
                    const uint8_t *qh = b.qh + 32 * h;
                    int32_t half[2] = {0, 0};
                    for (int l = 0; l < 32; ++l) {
                        const int32_t code = (k < 2 ? ql[l] & 15 : ql[l] >> 4) | ((qh[l] >> (2 * k)) & 3) << 4;
                        half[l / 16] += (code - 32) * xb[l];
                    }
                    const int32_t isum = half[0] * b.scales[8 * h + 2 * k] + half[1] * b.scales[8 * h + 2 * k + 1];
                    acc += static_cast<float>(isum) * (d * xd[blk]);
                }
            }
            job.y[t * job.y_stride + r] = acc + bias;
        }
    }
}

} // namespace ember::cpu::detail
