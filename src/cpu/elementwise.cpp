// elementwise.cpp — normalisation and elementwise kernels. These touch each value once, so plain loops
// are enough except where a transcendental function or a conversion dominates (swiglu, store_f16),
// which have AVX2 twins in elementwise_avx2.cpp.
#include "core/fp16.hpp"
#include "cpu/kernels.hpp"
#include "cpu/vec_dot.hpp"

#include <cmath>

namespace ember::cpu {

// The sum of squares is taken in double: the rows are short (one per token), and it keeps the result
// within a few float roundings of exact whatever the dimension.
void rms_norm(const float *x, const float *w, float *out, int64_t n_rows, int64_t dim, float eps) {
    for (int64_t r = 0; r < n_rows; ++r) {
        const float *xr = x + r * dim;
        float *o = out + r * dim;
        double ss = 0;
        for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
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

void softcap(const float *x, float cap, float *out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = cap * std::tanh(x[i] / cap);
}

// GELU's tanh form ("gelu_pytorch_tanh"), which graph.h specifies.
void geglu(const float *gate, const float *up, float *out, int64_t n) {
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    for (int64_t i = 0; i < n; ++i) {
        const float g = gate[i];
        out[i] = 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * (g + 0.044715f * g * g * g))) * up[i];
    }
}

void store_f16(const float *src, uint16_t *dst, int64_t n_rows, int64_t n) {
    detail::kernels().f32_to_f16(src, dst, n_rows * n);
}

void store_kv_row(DType type, const float *src, uint8_t *dst, int64_t n) {
    if (type == DType::Q8_0)
        quantize_row_q8_0(src, reinterpret_cast<BlockQ8_0 *>(dst), n);
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

void f32_to_f16_scalar(const float *src, uint16_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}

} // namespace detail

} // namespace ember::cpu
