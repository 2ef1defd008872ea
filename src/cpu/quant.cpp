// quant.cpp — conversions between f32 and the stored weight types (scalar; none is on a hot path except
// the activation quantizer, which has an AVX2 twin in vec_dot_avx2.cpp). The K-quants' own conversions
// are in quant_k.cpp.
#include "core/error.hpp"
#include "core/fp16.hpp"
#include "cpu/kernels.hpp"
#include "cpu/quant_b32.hpp"
#include "cpu/quant_k.hpp"
#include "cpu/quant_round.hpp"
#include "cpu/vec_dot.hpp"

#include <cmath>
#include <cstring>

namespace ember::cpu {

using detail::round_even;

namespace {

// Bit 4 of element j's code in a Q5_0/Q5_1 block.
inline int q5_high_bit(const uint8_t *qh, int j) {
    uint32_t h;
    std::memcpy(&h, qh, 4);
    return static_cast<int>((h >> j) & 1) << 4;
}

// Q4_1/Q5_1 (value = d * code + m, code 0..kMax): m is the block's minimum rounded down to a half and d
// its range over kMax rounded up, so (x - m) / d lies in [0, kMax] and every element rounds to within
// d / 2 (no clamping is ever needed beyond float noise). llama.cpp rounds both to nearest, which can
// leave the extremes a little outside the representable range; either way the block is valid.
template <int kMax, class Block>
void quantize_affine(const float *x, Block &b, uint8_t *code) {
    float lo = x[0], hi = x[0];
    for (int j = 1; j < 32; ++j) {
        lo = std::fmin(lo, x[j]);
        hi = std::fmax(hi, x[j]);
    }
    b.m = fp32_to_fp16_floor(lo);
    const float m = fp16_to_fp32(b.m);
    b.d = fp32_to_fp16_ceil((hi - m) / kMax);
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < 32; ++j) {
        int q = d > 0 ? round_even((x[j] - m) / d) : 0;
        code[j] = static_cast<uint8_t>(q < 0 ? 0 : (q > kMax ? kMax : q));
    }
}

// Low nibbles of 32 codes in Q4_0's placement (element j < 16 low, j + 16 high nibble of qs[j]).
void pack_nibbles(const uint8_t *code, uint8_t *qs) {
    for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((code[j] & 15) | (code[j + 16] & 15) << 4);
}
void pack_high_bits(const uint8_t *code, uint8_t *qh) {
    uint32_t h = 0;
    for (int j = 0; j < 32; ++j) h |= static_cast<uint32_t>(code[j] >> 4) << j;
    std::memcpy(qh, &h, 4);
}

void quantize_row_q4_1(const float *src, BlockQ4_1 *dst, int64_t n) {
    uint8_t code[32];
    for (int64_t ib = 0; ib < n / 32; ++ib) {
        quantize_affine<15>(src + ib * 32, dst[ib], code);
        pack_nibbles(code, dst[ib].qs);
    }
}

void quantize_row_q5_1(const float *src, BlockQ5_1 *dst, int64_t n) {
    uint8_t code[32];
    for (int64_t ib = 0; ib < n / 32; ++ib) {
        quantize_affine<31>(src + ib * 32, dst[ib], code);
        pack_nibbles(code, dst[ib].qs);
        pack_high_bits(code, dst[ib].qh);
    }
}

// Q5_0 like Q4_0 (see quantize_row_q4_0) with codes 0..31 standing for -16..15 times d.
void quantize_row_q5_0(const float *src, BlockQ5_0 *dst, int64_t n) {
    for (int64_t ib = 0; ib < n / 32; ++ib) {
        const float *x = src + ib * 32;
        float amax = 0, max = 0;
        for (int j = 0; j < 32; ++j) {
            if (std::fabs(x[j]) > amax) {
                amax = std::fabs(x[j]);
                max = x[j];
            }
        }
        dst[ib].d = fp32_to_fp16(max / -16.0f);
        const float d = fp16_to_fp32(dst[ib].d);
        const float id = d != 0 ? 1.0f / d : 0.0f;
        uint8_t code[32];
        for (int j = 0; j < 32; ++j) {
            const int q = round_even(x[j] * id + 16.0f);
            code[j] = static_cast<uint8_t>(q < 0 ? 0 : (q > 31 ? 31 : q));
        }
        pack_nibbles(code, dst[ib].qs);
        pack_high_bits(code, dst[ib].qh);
    }
}

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
    case DType::Q4_1: {
        // d * code is exact (11 + 4 significant bits): one rounding per element, in the addition.
        const auto *b = static_cast<const BlockQ4_1 *>(src);
        for (int64_t ib = 0; ib < n / QK4_1; ++ib) {
            const float d = fp16_to_fp32(b[ib].d), m = fp16_to_fp32(b[ib].m);
            float *o = dst + ib * QK4_1;
            for (int j = 0; j < QK4_1 / 2; ++j) {
                o[j] = d * static_cast<float>(b[ib].qs[j] & 0x0f) + m;
                o[j + QK4_1 / 2] = d * static_cast<float>(b[ib].qs[j] >> 4) + m;
            }
        }
        return;
    }
    case DType::Q5_0: {
        const auto *b = static_cast<const BlockQ5_0 *>(src);
        for (int64_t ib = 0; ib < n / QK5_0; ++ib) {
            const float d = fp16_to_fp32(b[ib].d);
            float *o = dst + ib * QK5_0;
            for (int j = 0; j < QK5_0 / 2; ++j) {
                o[j] = d * static_cast<float>(((b[ib].qs[j] & 0x0f) | q5_high_bit(b[ib].qh, j)) - 16);
                o[j + 16] = d * static_cast<float>(((b[ib].qs[j] >> 4) | q5_high_bit(b[ib].qh, j + 16)) - 16);
            }
        }
        return;
    }
    case DType::Q5_1: {
        const auto *b = static_cast<const BlockQ5_1 *>(src);
        for (int64_t ib = 0; ib < n / QK5_1; ++ib) {
            const float d = fp16_to_fp32(b[ib].d), m = fp16_to_fp32(b[ib].m);
            float *o = dst + ib * QK5_1;
            for (int j = 0; j < QK5_1 / 2; ++j) {
                o[j] = d * static_cast<float>((b[ib].qs[j] & 0x0f) | q5_high_bit(b[ib].qh, j)) + m;
                o[j + 16] = d * static_cast<float>((b[ib].qs[j] >> 4) | q5_high_bit(b[ib].qh, j + 16)) + m;
            }
        }
        return;
    }
    case DType::Q4_K: detail::dequantize_row_q4_k(static_cast<const BlockQ4_K *>(src), dst, n); return;
    case DType::Q5_K: detail::dequantize_row_q5_k(static_cast<const BlockQ5_K *>(src), dst, n); return;
    case DType::Q6_K: detail::dequantize_row_q6_k(static_cast<const BlockQ6_K *>(src), dst, n); return;
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::IQ4_NL:
    case DType::IQ4_XS:
    case DType::MXFP4: detail::dequantize_row_b32(type, src, dst, n); return;
    default:
        fail(EMBER_ERR_UNSUPPORTED, "cpu: cannot dequantize tensor type %s", dtype_name(type));
    }
}

void quantize_row(DType type, const float *src, void *dst, int64_t n) {
    switch (type) {
    case DType::Q8_0: quantize_row_q8_0(src, static_cast<BlockQ8_0 *>(dst), n); return;
    case DType::Q4_0: quantize_row_q4_0(src, static_cast<BlockQ4_0 *>(dst), n); return;
    case DType::Q4_1: quantize_row_q4_1(src, static_cast<BlockQ4_1 *>(dst), n); return;
    case DType::Q5_0: quantize_row_q5_0(src, static_cast<BlockQ5_0 *>(dst), n); return;
    case DType::Q5_1: quantize_row_q5_1(src, static_cast<BlockQ5_1 *>(dst), n); return;
    case DType::Q4_K: detail::quantize_row_q4_k(src, static_cast<BlockQ4_K *>(dst), n); return;
    case DType::Q5_K: detail::quantize_row_q5_k(src, static_cast<BlockQ5_K *>(dst), n); return;
    case DType::Q6_K: detail::quantize_row_q6_k(src, static_cast<BlockQ6_K *>(dst), n); return;
    case DType::Q2_K: detail::quantize_row_q2_k(src, static_cast<BlockQ2_K *>(dst), n); return;
    case DType::Q3_K: detail::quantize_row_q3_k(src, static_cast<BlockQ3_K *>(dst), n); return;
    case DType::IQ4_NL: detail::quantize_row_iq4_nl(src, static_cast<BlockIQ4_NL *>(dst), n); return;
    case DType::IQ4_XS: detail::quantize_row_iq4_xs(src, static_cast<BlockIQ4_XS *>(dst), n); return;
    case DType::MXFP4: detail::quantize_row_mxfp4(src, static_cast<BlockMXFP4 *>(dst), n); return;
    default: fail(EMBER_ERR_UNSUPPORTED, "cpu: no quantizer for tensor type %s", dtype_name(type));
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
// 32 activations rounded against the inverse step `id` into qs; returns their integer sum.
static int32_t round_block(const float *x, float id, int8_t *qs) {
    int32_t s = 0;
    for (int j = 0; j < 32; ++j) {
        const int q = round_even(x[j] * id);
        qs[j] = static_cast<int8_t>(q);
        s += q;
    }
    return s;
}

// The largest |x_j| of n values, and the step amax / 127 (inverse: id; zero for an all-zero block).
static float block_step(const float *x, int n, float *id) {
    float amax = 0;
    for (int j = 0; j < n; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    *id = amax > 0 ? 127.0f / amax : 0.0f;
    return amax / 127.0f;
}

void quantize_acts_scalar(const float *x, int64_t n, int8_t *qs, float *d, float *sum) {
    for (int64_t ib = 0; ib < n / QK8_0; ++ib) {
        float id;
        d[ib] = block_step(x + ib * QK8_0, QK8_0, &id);
        sum[ib] = static_cast<float>(round_block(x + ib * QK8_0, id, qs + ib * QK8_0));
    }
}

// Activations for Q4_K weights (QuantActsK): the same steps over super-blocks of 256, and each
// 32-element block's integer sum (exact in int16: |sum| <= 32 * 127).
void quantize_acts_k_scalar(const float *x, int64_t n, int8_t *qs, float *d, int16_t *sum) {
    for (int64_t s = 0; s < n / QK_K; ++s) {
        float id;
        d[s] = block_step(x + s * QK_K, QK_K, &id);
        for (int b = 0; b < QK_K / 32; ++b)
            sum[s * (QK_K / 32) + b] = static_cast<int16_t>(round_block(x + s * QK_K + 32 * b, id, qs + s * QK_K + 32 * b));
    }
}

} // namespace detail

} // namespace ember::cpu
