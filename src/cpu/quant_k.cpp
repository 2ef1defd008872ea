// quant_k.cpp — conversions between f32 and the K-quant super-block formats (scalar: only get_rows,
// the tests and the synthetic-model writer use them).
#include "core/fp16.hpp"
#include "cpu/quant_k.hpp"
#include "cpu/quant_round.hpp"

#include <cmath>

namespace ember::cpu::detail {

namespace {

template <class Block, bool kHigh>
void dequantize_k45(const Block *src, float *dst, int64_t n) {
    for (int64_t ib = 0; ib < n / QK_K; ++ib) {
        const Block &b = src[ib];
        const KScaleMin sm = k_scale_min(b.scales);
        const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
        float *o = dst + ib * QK_K;
        for (int j = 0; j < 8; ++j) {
            // Both products are exact (11 + 6 significant bits, and + 5 more for the code), so each
            // element is rounded once, in the subtraction.
            const float ds = d * static_cast<float>((sm.sc >> (8 * j)) & 63);
            const float dm = dmin * static_cast<float>((sm.m >> (8 * j)) & 63);
            const uint8_t *q = b.qs + 32 * (j / 2);
            for (int l = 0; l < 32; ++l) {
                int code = (j & 1) ? q[l] >> 4 : q[l] & 15;
                if constexpr (kHigh) code |= ((b.qh[l] >> j) & 1) << 4;
                o[32 * j + l] = ds * static_cast<float>(code) - dm;
            }
        }
    }
}

// Q4_K/Q5_K codes for one super-block (kMax = 15 or 31), round to nearest with ranges that always fit:
// each sub-block j gets an offset M_j = dmin * m_j >= -min(0, min x) and a step e_j = d * sc_j with
// kMax * e_j >= max x + M_j, so (x + M_j) / e_j lies in [0, kMax] and every element is within e_j / 2
// of its value (plus float rounding). Hence dmin and d are rounded up to halves, and m_j, sc_j up to
// whole steps; llama.cpp's quantizer searches for better-fitting scales, which only changes which
// valid block is written.
template <int kMax>
struct KQuant45 {
    uint16_t d = 0, dmin = 0;
    uint8_t sc[8] = {}, m[8] = {};
    uint8_t code[QK_K] = {};

    explicit KQuant45(const float *x) {
        float lo[8], hi[8], off_max = 0;
        for (int j = 0; j < 8; ++j) {
            lo[j] = 0;  // the offset only ever moves values up: a sub-block with no negatives needs none
            hi[j] = x[32 * j];
            for (int l = 0; l < 32; ++l) {
                lo[j] = std::fmin(lo[j], x[32 * j + l]);
                hi[j] = std::fmax(hi[j], x[32 * j + l]);
            }
            off_max = std::fmax(off_max, -lo[j]);
        }
        dmin = fp32_to_fp16_ceil(off_max / 63.0f);
        const float dminf = fp16_to_fp32(dmin);
        float off[8], step[8], step_max = 0;
        for (int j = 0; j < 8; ++j) {
            m[j] = static_cast<uint8_t>(ceil_steps(-lo[j], dminf, 63));
            off[j] = dminf * static_cast<float>(m[j]);
            step[j] = std::fmax(hi[j] + off[j], 0.0f) / kMax;
            step_max = std::fmax(step_max, step[j]);
        }
        d = fp32_to_fp16_ceil(step_max / 63.0f);
        const float df = fp16_to_fp32(d);
        for (int j = 0; j < 8; ++j) {
            sc[j] = static_cast<uint8_t>(ceil_steps(step[j], df, 63));
            const float e = df * static_cast<float>(sc[j]);
            for (int l = 0; l < 32; ++l) {
                int q = e > 0 ? round_even((x[32 * j + l] + off[j]) / e) : 0;
                q = q < 0 ? 0 : (q > kMax ? kMax : q);
                code[32 * j + l] = static_cast<uint8_t>(q);
            }
        }
    }

    // The 12-byte packing (see BlockQ4_K in core/dtype.hpp).
    void pack_scales(uint8_t *s) const {
        for (int j = 0; j < 4; ++j) {
            s[j] = static_cast<uint8_t>(sc[j] | (sc[j + 4] >> 4) << 6);
            s[j + 4] = static_cast<uint8_t>(m[j] | (m[j + 4] >> 4) << 6);
            s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
        }
    }
    // Low nibbles: 32-byte group g holds sub-block 2g low, 2g + 1 high.
    void pack_nibbles(uint8_t *qs) const {
        for (int g = 0; g < 4; ++g)
            for (int l = 0; l < 32; ++l)
                qs[32 * g + l] = static_cast<uint8_t>((code[64 * g + l] & 15) | (code[64 * g + 32 + l] & 15) << 4);
    }
};

} // namespace

void dequantize_row_q4_k(const BlockQ4_K *src, float *dst, int64_t n) { dequantize_k45<BlockQ4_K, false>(src, dst, n); }
void dequantize_row_q5_k(const BlockQ5_K *src, float *dst, int64_t n) { dequantize_k45<BlockQ5_K, true>(src, dst, n); }

void dequantize_row_q6_k(const BlockQ6_K *src, float *dst, int64_t n) {
    for (int64_t ib = 0; ib < n / QK_K; ++ib) {
        const BlockQ6_K &b = src[ib];
        const float d = fp16_to_fp32(b.d);
        float *o = dst + ib * QK_K;
        for (int i = 0; i < QK_K; ++i) {
            const int h = i / 128, k = i % 128 / 32, l = i % 32;
            const uint8_t lo = b.ql[64 * h + 32 * (k & 1) + l];
            const int code = (k < 2 ? lo & 15 : lo >> 4) | ((b.qh[32 * h + l] >> (2 * k)) & 3) << 4;
            // d * scale is exact (11 + 8 significant bits); the element is rounded once.
            o[i] = (d * static_cast<float>(b.scales[i / 16])) * static_cast<float>(code - 32);
        }
    }
}

void quantize_row_q4_k(const float *src, BlockQ4_K *dst, int64_t n) {
    for (int64_t ib = 0; ib < n / QK_K; ++ib) {
        const KQuant45<15> q(src + ib * QK_K);
        dst[ib].d = q.d;
        dst[ib].dmin = q.dmin;
        q.pack_scales(dst[ib].scales);
        q.pack_nibbles(dst[ib].qs);
    }
}

void quantize_row_q5_k(const float *src, BlockQ5_K *dst, int64_t n) {
    for (int64_t ib = 0; ib < n / QK_K; ++ib) {
        const KQuant45<31> q(src + ib * QK_K);
        dst[ib].d = q.d;
        dst[ib].dmin = q.dmin;
        q.pack_scales(dst[ib].scales);
        q.pack_nibbles(dst[ib].qs);
        for (int l = 0; l < 32; ++l) {
            uint8_t h = 0;
            for (int j = 0; j < 8; ++j) h = static_cast<uint8_t>(h | (q.code[32 * j + l] >> 4) << j);
            dst[ib].qh[l] = h;
        }
    }
}

// Q6_K, symmetric: sub-block j of 16 gets the step e_j = d * sc_j >= max|x| / 31, so x / e_j lies in
// [-31, 31] (the format's codes reach -32, which this leaves unused) and rounding costs at most e_j / 2.
// As for Q4_K, d and sc_j are rounded up so that the step never falls short.
void quantize_row_q6_k(const float *src, BlockQ6_K *dst, int64_t n) {
    for (int64_t ib = 0; ib < n / QK_K; ++ib) {
        const float *x = src + ib * QK_K;
        BlockQ6_K &b = dst[ib];
        float step[16], step_max = 0;
        for (int j = 0; j < 16; ++j) {
            float amax = 0;
            for (int l = 0; l < 16; ++l) amax = std::fmax(amax, std::fabs(x[16 * j + l]));
            step[j] = amax / 31.0f;
            step_max = std::fmax(step_max, step[j]);
        }
        b.d = fp32_to_fp16_ceil(step_max / 127.0f);
        const float d = fp16_to_fp32(b.d);
        uint8_t code[QK_K];
        for (int j = 0; j < 16; ++j) {
            const int sc = ceil_steps(step[j], d, 127);
            b.scales[j] = static_cast<int8_t>(sc);
            const float e = d * static_cast<float>(sc);
            for (int l = 0; l < 16; ++l) {
                int q = e > 0 ? round_even(x[16 * j + l] / e) : 0;
                q = q < -32 ? -32 : (q > 31 ? 31 : q);
                code[16 * j + l] = static_cast<uint8_t>(q + 32);
            }
        }
        for (int i = 0; i < QK_K / 2; ++i) b.ql[i] = 0;
        for (int i = 0; i < QK_K / 4; ++i) b.qh[i] = 0;
        for (int i = 0; i < QK_K; ++i) {
            const int h = i / 128, k = i % 128 / 32, l = i % 32;
            b.ql[64 * h + 32 * (k & 1) + l] |= static_cast<uint8_t>((code[i] & 15) << (k < 2 ? 0 : 4));
            b.qh[32 * h + l] |= static_cast<uint8_t>((code[i] >> 4) << (2 * k));
        }
    }
}

} // namespace ember::cpu::detail
