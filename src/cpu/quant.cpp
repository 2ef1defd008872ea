// quant.cpp — conversions between f32 and the stored weight types (scalar; none is on a hot path except
// the activation quantizer, which has an AVX2 twin in vec_dot_avx2.cpp).
#include "core/error.hpp"
#include "core/fp16.hpp"
#include "cpu/kernels.hpp"
#include "cpu/vec_dot.hpp"

#include <cmath>
#include <cstring>

namespace ember::cpu {

namespace {

// Round to nearest, ties to even (the default FP environment), as _mm256_round_ps does in the AVX2
// variant, so both variants produce the same integers.
inline int round_even(float v) { return static_cast<int>(std::nearbyint(v)); }

} // namespace

void dequantize_row(DType type, const void *src, float *dst, int64_t n) {
    switch (type) {
    case DType::F32:
        std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
        return;
    case DType::F16: {
        const auto *h = static_cast<const uint16_t *>(src);
        for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
        return;
    }
    case DType::BF16: {
        const auto *h = static_cast<const uint16_t *>(src);
        for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(h[i]);
        return;
    }
    case DType::Q8_0: {
        const auto *b = static_cast<const BlockQ8_0 *>(src);
        for (int64_t ib = 0; ib < n / QK8_0; ++ib) {
            const float d = fp16_to_fp32(b[ib].d);
            for (int j = 0; j < QK8_0; ++j) dst[ib * QK8_0 + j] = d * static_cast<float>(b[ib].qs[j]);
        }
        return;
    }
    case DType::Q4_0: {
        const auto *b = static_cast<const BlockQ4_0 *>(src);
        for (int64_t ib = 0; ib < n / QK4_0; ++ib) {
            const float d = fp16_to_fp32(b[ib].d);
            float *o = dst + ib * QK4_0;
            for (int j = 0; j < QK4_0 / 2; ++j) {
                o[j] = d * static_cast<float>((b[ib].qs[j] & 0x0f) - 8);
                o[j + QK4_0 / 2] = d * static_cast<float>((b[ib].qs[j] >> 4) - 8);
            }
        }
        return;
    }
    default:
        fail(EMBER_ERR_UNSUPPORTED, "cpu: cannot dequantize tensor type %s", dtype_name(type));
    }
}

// Q8_0: d = max|x| / 127, stored as fp16; q = round(x / d_stored), ties to even, clamped to ±127.
// Dividing by the stored (rounded) scale rather than the exact one keeps the reconstruction error
// within d_stored / 2; with the exact scale it could exceed that by |q| * (d - d_stored) ≈ 127 * d * 2^-11.
void quantize_row_q8_0(const float *src, BlockQ8_0 *dst, int64_t n) {
    for (int64_t ib = 0; ib < n / QK8_0; ++ib) {
        const float *x = src + ib * QK8_0;
        float amax = 0;
        for (int j = 0; j < QK8_0; ++j) amax = std::fmax(amax, std::fabs(x[j]));
        const uint16_t dh = fp32_to_fp16(amax / 127.0f);
        const float d = fp16_to_fp32(dh);
        const float id = d != 0 ? 1.0f / d : 0.0f;
        dst[ib].d = dh;
        for (int j = 0; j < QK8_0; ++j) {
            int q = round_even(x[j] * id);
            q = q > 127 ? 127 : (q < -127 ? -127 : q);
            dst[ib].qs[j] = static_cast<int8_t>(q);
        }
    }
}

// Q4_0, following the GGUF reference quantizer: take the element of largest magnitude, with its sign,
// `max`; d = max / -8, so that element maps exactly to code 0 (value -8 d) and the full range -8..7 is
// used on its side. q = clamp(round(x / d_stored + 8), 0, 15) with round to nearest, ties to even.
void quantize_row_q4_0(const float *src, BlockQ4_0 *dst, int64_t n) {
    for (int64_t ib = 0; ib < n / QK4_0; ++ib) {
        const float *x = src + ib * QK4_0;
        float amax = 0, max = 0;
        for (int j = 0; j < QK4_0; ++j) {
            if (std::fabs(x[j]) > amax) {
                amax = std::fabs(x[j]);
                max = x[j];
            }
        }
        const uint16_t dh = fp32_to_fp16(max / -8.0f);
        const float d = fp16_to_fp32(dh);
        const float id = d != 0 ? 1.0f / d : 0.0f;
        dst[ib].d = dh;
        for (int j = 0; j < QK4_0 / 2; ++j) {
            int q0 = round_even(x[j] * id + 8.0f);
            int q1 = round_even(x[j + QK4_0 / 2] * id + 8.0f);
            q0 = q0 < 0 ? 0 : (q0 > 15 ? 15 : q0);
            q1 = q1 < 0 ? 0 : (q1 > 15 ? 15 : q1);
            dst[ib].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
        }
    }
}

void get_rows(const WeightView &w, const int32_t *ids, int64_t n_ids, float *out) {
    const auto *base = static_cast<const uint8_t *>(w.data);
    for (int64_t t = 0; t < n_ids; ++t)
        dequantize_row(w.type, base + static_cast<size_t>(ids[t]) * w.row_bytes, out + t * w.n_in, w.n_in);
}

namespace detail {

// Activations: d = max|x| / 127 (f32), q = round(x * (127 / max|x|)), ties to even. Multiplying by the
// reciprocal (as the AVX2 twin does) rather than dividing keeps the two variants bit-identical; the
// product is at most 127 * (1 + 2^-22), which still rounds to 127.
void quantize_acts_scalar(const float *x, int64_t n, int8_t *qs, float *d, float *sum) {
    for (int64_t ib = 0; ib < n / QK8_0; ++ib) {
        const float *xb = x + ib * QK8_0;
        float amax = 0;
        for (int j = 0; j < QK8_0; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
        const float id = amax > 0 ? 127.0f / amax : 0.0f;
        d[ib] = amax / 127.0f;
        int32_t s = 0;
        for (int j = 0; j < QK8_0; ++j) {
            const int q = round_even(xb[j] * id);
            qs[ib * QK8_0 + j] = static_cast<int8_t>(q);
            s += q;
        }
        sum[ib] = static_cast<float>(s);
    }
}

} // namespace detail

} // namespace ember::cpu
