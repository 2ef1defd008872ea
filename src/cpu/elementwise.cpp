// elementwise.cpp — normalisation and elementwise kernels. These touch each value once, so plain loops
// are enough except where a transcendental function or a conversion dominates: swiglu and store_f16 have
// AVX2 twins in elementwise_avx2.cpp, GELU runs on lanes (gelu_lanes.hpp).
#include "core/fp16.hpp"
#include "cpu/gelu_lanes.hpp"
#include "cpu/kernels.hpp"
#include "cpu/vec_dot.hpp"

#include <cmath>
#include <cstring>

namespace ember::cpu {

// The sum of squares in double, so that the result is within a few float roundings of exact whatever the
// dimension. Element i goes into running sum i % 8 and the eight are added in a fixed tree: one chain
// of dependent double additions was the whole cost (4 cycles an element, 2.7 % of a TinyLlama prefill),
// eight run side by side. A plain loop, not a per-level kernel, so every CPU gives the same bits, and
// each row's arithmetic is its own (the same for any batch).
static double sum_squares(const float *x, int64_t n) {
    auto sq = [x](int64_t i) { return static_cast<double>(x[i]) * x[i]; };
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;  // named: GCC keeps an array in memory
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        s0 += sq(i), s1 += sq(i + 1), s2 += sq(i + 2), s3 += sq(i + 3);
        s4 += sq(i + 4), s5 += sq(i + 5), s6 += sq(i + 6), s7 += sq(i + 7);
    }
    double *tail[7] = {&s0, &s1, &s2, &s3, &s4, &s5, &s6};
    for (int j = 0; i < n; ++i, ++j) *tail[j] += sq(i);
    return ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7));
}

void rms_norm(const float *x, const float *w, float *out, int64_t n_rows, int64_t dim, float eps) {
    for (int64_t r = 0; r < n_rows; ++r) {
        const float *xr = x + r * dim;
        float *o = out + r * dim;
        const double ss = sum_squares(xr, dim);
        const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(dim) + eps));
        if (w)
            for (int64_t i = 0; i < dim; ++i) o[i] = xr[i] * scale * w[i];
        else
            for (int64_t i = 0; i < dim; ++i) o[i] = xr[i] * scale;
    }
}

void swiglu(const float *gate, const float *up, float *out, int64_t n) { detail::kernels().swiglu(gate, up, out, n); }

void add_inplace(float *x, const float *y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void scale(const float *x, float s, float *out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * s;
}

void mul(const float *a, const float *b, float *out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
}

void softcap(const float *x, float cap, float *out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = cap * std::tanh(x[i] / cap);
}

// GELU's tanh form ("gelu_pytorch_tanh"), which graph.h specifies: gelu_lanes.hpp, through the kernel
// table (16 lanes at the AVX-512 levels, the same bits).
void geglu(const float *gate, const float *up, float *out, int64_t n) { detail::kernels().gelu(gate, up, out, n); }

// Mean and variance in double (two passes over the row: the variance of the centred values), so the
// result is within a few float roundings of exact whatever the row's offset.
void layer_norm(const float *x, const float *w, const float *b, float *out, int64_t n_rows, int64_t dim, float eps) {
    for (int64_t r = 0; r < n_rows; ++r) {
        const float *xr = x + r * dim;
        float *o = out + r * dim;
        double sum = 0;
        for (int64_t i = 0; i < dim; ++i) sum += xr[i];
        const double mean = sum / static_cast<double>(dim);
        double ss = 0;
        for (int64_t i = 0; i < dim; ++i) ss += (xr[i] - mean) * (xr[i] - mean);
        const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(dim) + eps));
        const float m = static_cast<float>(mean);
        for (int64_t i = 0; i < dim; ++i) {
            float y = (xr[i] - m) * inv;
            if (w) y *= w[i];
            if (b) y += b[i];
            o[i] = y;
        }
    }
}

void gelu(const float *x, float *out, int64_t n) { detail::kernels().gelu(x, nullptr, out, n); }

void store_f16(const float *src, uint16_t *dst, int64_t n_rows, int64_t n) {
    detail::kernels().f32_to_f16(src, dst, n_rows * n);
}

void store_kv_row(DType type, const float *src, uint8_t *dst, int64_t n) {
    if (type == DType::Q8_0)
        quantize_row_q8_0(src, reinterpret_cast<BlockQ8_0 *>(dst), n);
    else if (type == DType::Q4_0)
        quantize_row_q4_0(src, reinterpret_cast<BlockQ4_0 *>(dst), n);
    else
        detail::kernels().f32_to_f16(src, reinterpret_cast<uint16_t *>(dst), n);
}

namespace detail {

void swiglu_scalar(const float *gate, const float *up, float *out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float g = gate[i];
        out[i] = g / (1.0f + std::exp(-g)) * up[i];
    }
}

void gelu_lanes8(const float *x, const float *up, float *out, int64_t n) { GeluLanes<GeluF8, GeluI8, 8>::rows(x, up, out, n); }

void f32_to_f16_scalar(const float *src, uint16_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}

} // namespace detail

} // namespace ember::cpu
