// vec_dot_scalar.cpp — portable matmul row kernels: the fallback for CPUs without AVX2 and the
// second opinion the tests hold the AVX2 kernels to.
//
// Each output is one dot product, summed in 8 interleaved partial sums (element i into sum i % 8) for
// the float types: that bounds the rounding error like the AVX2 lanes do and lets the compiler keep
// the sums in registers.
#include "core/dtype.hpp"
#include "core/fp16.hpp"
#include "cpu/vec_dot.hpp"

#include <cstring>
#include <vector>

namespace ember::cpu::detail {

namespace {

float dot_f32(const float *w, const float *x, int64_t n) {
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; ++l) s[l] += w[i + l] * x[i + l];
    for (; i < n; ++i) s[i & 7] += w[i] * x[i];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

// Float weights that need converting: convert each row once into a per-thread buffer and reuse it for
// every token (the buffer grows to the largest n_in once and stays).
template <class Convert>
void matmul_rows_converted(const MatmulJob &job, int64_t r0, int64_t r1, Convert convert) {
    thread_local std::vector<float> row;
    if (row.size() < static_cast<size_t>(job.n_in)) row.resize(static_cast<size_t>(job.n_in));
    for (int64_t r = r0; r < r1; ++r) {
        const auto *src = reinterpret_cast<const uint16_t *>(job.w + static_cast<size_t>(r) * job.row_bytes);
        for (int64_t i = 0; i < job.n_in; ++i) row[i] = convert(src[i]);
        const float b = job.bias ? job.bias[r] : 0.0f;
        for (int64_t t = 0; t < job.n_tokens; ++t)
            job.y[t * job.y_stride + r] = dot_f32(row.data(), job.x + t * job.n_in, job.n_in) + b;
    }
}

} // namespace

void matmul_rows_f32_scalar(const MatmulJob &job, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
        const auto *w = reinterpret_cast<const float *>(job.w + static_cast<size_t>(r) * job.row_bytes);
        const float b = job.bias ? job.bias[r] : 0.0f;
        for (int64_t t = 0; t < job.n_tokens; ++t)
            job.y[t * job.y_stride + r] = dot_f32(w, job.x + t * job.n_in, job.n_in) + b;
    }
}

void matmul_rows_f16_scalar(const MatmulJob &job, int64_t r0, int64_t r1) {
    matmul_rows_converted(job, r0, r1, [](uint16_t h) { return fp16_to_fp32(h); });
}

void matmul_rows_bf16_scalar(const MatmulJob &job, int64_t r0, int64_t r1) {
    matmul_rows_converted(job, r0, r1, [](uint16_t h) { return bf16_to_fp32(h); });
}

// Integer paths: each block's dot product is exact in int32 (32 * 128 * 127 fits easily); the two
// scales are applied per block in float.
void matmul_rows_q8_0_scalar(const MatmulJob &job, int64_t r0, int64_t r1) {
    const int64_t nb = job.xq.nb;
    for (int64_t r = r0; r < r1; ++r) {
        const auto *w = reinterpret_cast<const BlockQ8_0 *>(job.w + static_cast<size_t>(r) * job.row_bytes);
        const float b = job.bias ? job.bias[r] : 0.0f;
        for (int64_t t = 0; t < job.n_tokens; ++t) {
            const int8_t *xq = job.xq.qs + t * job.n_in;
            const float *xd = job.xq.d + t * nb;
            float acc = 0;
            for (int64_t ib = 0; ib < nb; ++ib) {
                int32_t s = 0;
                for (int j = 0; j < QK8_0; ++j) s += int32_t{w[ib].qs[j]} * xq[ib * QK8_0 + j];
                acc += static_cast<float>(s) * (fp16_to_fp32(w[ib].d) * xd[ib]);
            }
            job.y[t * job.y_stride + r] = acc + b;
        }
    }
}

void matmul_rows_q4_0_scalar(const MatmulJob &job, int64_t r0, int64_t r1) {
    const int64_t nb = job.xq.nb;
    for (int64_t r = r0; r < r1; ++r) {
        const auto *w = reinterpret_cast<const BlockQ4_0 *>(job.w + static_cast<size_t>(r) * job.row_bytes);
        const float b = job.bias ? job.bias[r] : 0.0f;
        for (int64_t t = 0; t < job.n_tokens; ++t) {
            const int8_t *xq = job.xq.qs + t * job.n_in;
            const float *xd = job.xq.d + t * nb;
            float acc = 0;
            for (int64_t ib = 0; ib < nb; ++ib) {
                const int8_t *xb = xq + ib * QK4_0;
                int32_t s = 0;
                for (int j = 0; j < QK4_0 / 2; ++j) {
                    s += ((w[ib].qs[j] & 0x0f) - 8) * int32_t{xb[j]};
                    s += ((w[ib].qs[j] >> 4) - 8) * int32_t{xb[j + QK4_0 / 2]};
                }
                acc += static_cast<float>(s) * (fp16_to_fp32(w[ib].d) * xd[ib]);
            }
            job.y[t * job.y_stride + r] = acc + b;
        }
    }
}

namespace {

// Q4_1, Q5_0 and Q5_1: per block the integer sum of code * x is exact, and the format's offset enters
// through the activations' block sum: Q5_0's code - 16 inside the integer sum, Q4_1/Q5_1's m as
// m * d_x * sum x in float.
template <class Block, bool kHigh, bool kMin>
void matmul_rows_legacy(const MatmulJob &job, int64_t r0, int64_t r1) {
    const int64_t nb = job.xq.nb;
    for (int64_t r = r0; r < r1; ++r) {
        const auto *w = reinterpret_cast<const Block *>(job.w + static_cast<size_t>(r) * job.row_bytes);
        const float b = job.bias ? job.bias[r] : 0.0f;
        for (int64_t t = 0; t < job.n_tokens; ++t) {
            const int8_t *xq = job.xq.qs + t * job.n_in;
            const float *xd = job.xq.d + t * nb;
            const float *xs = job.xq.sum + t * nb;
            float acc = 0;
            for (int64_t ib = 0; ib < nb; ++ib) {
                const int8_t *xb = xq + ib * 32;
                uint32_t h = 0;
                if constexpr (kHigh) std::memcpy(&h, w[ib].qh, 4);
                int32_t s = 0;
                for (int j = 0; j < 16; ++j) {
                    int32_t c0 = w[ib].qs[j] & 0x0f, c1 = w[ib].qs[j] >> 4;
                    if constexpr (kHigh) {
                        c0 |= static_cast<int32_t>((h >> j) & 1) << 4;
                        c1 |= static_cast<int32_t>((h >> (j + 16)) & 1) << 4;
                    }
                    if constexpr (!kMin) c0 -= 16, c1 -= 16;
                    s += c0 * xb[j] + c1 * xb[j + 16];
                }
                acc += static_cast<float>(s) * (fp16_to_fp32(w[ib].d) * xd[ib]);
                if constexpr (kMin) acc += fp16_to_fp32(w[ib].m) * (xd[ib] * xs[ib]);
            }
            job.y[t * job.y_stride + r] = acc + b;
        }
    }
}

} // namespace

void matmul_rows_q4_1_scalar(const MatmulJob &job, int64_t r0, int64_t r1) {
    matmul_rows_legacy<BlockQ4_1, false, true>(job, r0, r1);
}
void matmul_rows_q5_0_scalar(const MatmulJob &job, int64_t r0, int64_t r1) {
    matmul_rows_legacy<BlockQ5_0, true, false>(job, r0, r1);
}
void matmul_rows_q5_1_scalar(const MatmulJob &job, int64_t r0, int64_t r1) {
    matmul_rows_legacy<BlockQ5_1, true, true>(job, r0, r1);
}

} // namespace ember::cpu::detail
