// quant_b32.cpp — conversions between f32 and the formats of quant_b32.hpp (scalar: only get_rows, the
// tests and the synthetic-model writer use them).
//
// The quantizers round to nearest within scales chosen from each (sub-)block's range, no search for
// better scales (llama.cpp searches; that only changes which valid block is written). Every scale is
// rounded up where it is stored, so that the largest element is always representable and no code is
// clamped: each element ends within half a code step of its value (for the table formats, half the
// gap between the two table entries around it).
#include "cpu/quant_b32.hpp"
#include "cpu/quant_round.hpp"

#include "core/error.hpp"

#include <cmath>

namespace ember::cpu::detail {

namespace {

int clamp(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// The index of the table entry nearest to v (the first of two equally near ones).
int nearest_entry(const int8_t *table, float v) {
    int best = 0;
    float best_err = std::fabs(v - table[0]);
    for (int i = 1; i < 16; ++i) {
        const float e = std::fabs(v - table[i]);
        if (e < best_err) best = i, best_err = e;
    }
    return best;
}

float amax_of(const float *x, int n) {
    float a = 0;
    for (int i = 0; i < n; ++i) a = std::fmax(a, std::fabs(x[i]));
    return a;
}

// 32 table indices of x / d into nibbles placed as Q4_0's.
void table_nibbles(const float *x, float d, const int8_t *table, uint8_t *qs) {
    const float id = d > 0 ? 1.0f / d : 0.0f;
    uint8_t idx[32];
    for (int l = 0; l < 32; ++l) idx[l] = static_cast<uint8_t>(nearest_entry(table, x[l] * id));
    for (int l = 0; l < 16; ++l) qs[l] = static_cast<uint8_t>(idx[l] | idx[l + 16] << 4);
}

// The table's smallest zero-free scale: IQ4's entries reach -127 and 113, so d >= amax / 113 covers
// both signs.
constexpr float kIq4Top = 113.0f;

} // namespace

B32Decoder b32_decoder(DType t) {
    switch (t) {
    case DType::Q2_K: return b32_decode_q2_k;
    case DType::Q3_K: return b32_decode_q3_k;
    case DType::IQ4_NL: return b32_decode_iq4_nl;
    case DType::IQ4_XS: return b32_decode_iq4_xs;
    case DType::MXFP4: return b32_decode_mxfp4;
    default: return nullptr;
    }
}

void dequantize_row_b32(DType t, const void *src, float *dst, int64_t n) {
    const B32Decoder dec = b32_decoder(t);
    if (!dec) fail(EMBER_ERR_UNSUPPORTED, "cpu: cannot dequantize tensor type %s", dtype_name(t));
    const auto *row = static_cast<const uint8_t *>(src);
    Block32 b;
    for (int64_t ib = 0; ib < n / 32; ++ib) {
        dec(row, ib, b);
        for (int l = 0; l < 32; ++l) {
            // d * sc and then * q are exact (quant_b32.hpp): one rounding, in the subtraction.
            dst[ib * 32 + l] = (b.d * static_cast<float>(b.sc[l / 16])) * static_cast<float>(b.q[l]) - b.mn[l / 16];
        }
    }
}

// Q2_K as quant_k.cpp's Q4_K with 16-element sub-blocks and 4-bit scales, mins and 2-bit codes: sub-block
// j gets the offset M_j = dmin * m_j >= -min(0, min x) and the step e_j = d * sc_j with 3 e_j >= max x + M_j.
void quantize_row_q2_k(const float *src, BlockQ2_K *dst, int64_t n) {
    for (int64_t ib = 0; ib < n / QK_K; ++ib) {
        const float *x = src + ib * QK_K;
        BlockQ2_K &b = dst[ib];
        float lo[16], hi[16], off_max = 0;
        for (int j = 0; j < 16; ++j) {
            lo[j] = 0;
            hi[j] = x[16 * j];
            for (int l = 0; l < 16; ++l) {
                lo[j] = std::fmin(lo[j], x[16 * j + l]);
                hi[j] = std::fmax(hi[j], x[16 * j + l]);
            }
            off_max = std::fmax(off_max, -lo[j]);
        }
        b.dmin = fp32_to_fp16_ceil(off_max / 15.0f);
        const float dmin = fp16_to_fp32(b.dmin);
        int m[16];
        float off[16], step[16], step_max = 0;
        for (int j = 0; j < 16; ++j) {
            m[j] = ceil_steps(-lo[j], dmin, 15);
            off[j] = dmin * static_cast<float>(m[j]);
            step[j] = std::fmax(hi[j] + off[j], 0.0f) / 3.0f;
            step_max = std::fmax(step_max, step[j]);
        }
        b.d = fp32_to_fp16_ceil(step_max / 15.0f);
        const float d = fp16_to_fp32(b.d);
        for (int i = 0; i < QK_K / 4; ++i) b.qs[i] = 0;
        for (int j = 0; j < 16; ++j) {
            const int sc = ceil_steps(step[j], d, 15);
            b.scales[j] = static_cast<uint8_t>(sc | m[j] << 4);
            const float e = d * static_cast<float>(sc);
            for (int l = 0; l < 16; ++l) {
                const int i = 16 * j + l;
                const int q = e > 0 ? clamp(round_even((x[i] + off[j]) / e), 0, 3) : 0;
                b.qs[32 * (i / 128) + i % 32] |= static_cast<uint8_t>(q << (2 * (i % 128 / 32)));
            }
        }
    }
}

// Q3_K, symmetric with codes -3..3 (the format's -4 left unused, so that no element is ever clamped):
// sub-block j of 16 gets the step e_j = d * s_j >= max|x| / 3, s_j in 0..31.
void quantize_row_q3_k(const float *src, BlockQ3_K *dst, int64_t n) {
    for (int64_t ib = 0; ib < n / QK_K; ++ib) {
        const float *x = src + ib * QK_K;
        BlockQ3_K &b = dst[ib];
        float step[16], step_max = 0;
        for (int j = 0; j < 16; ++j) {
            step[j] = amax_of(x + 16 * j, 16) / 3.0f;
            step_max = std::fmax(step_max, step[j]);
        }
        b.d = fp32_to_fp16_ceil(step_max / 31.0f);
        const float d = fp16_to_fp32(b.d);
        for (int i = 0; i < 12; ++i) b.scales[i] = 0;
        for (int i = 0; i < QK_K / 4; ++i) b.qs[i] = 0;
        for (int i = 0; i < QK_K / 8; ++i) b.hmask[i] = 0;
        for (int j = 0; j < 16; ++j) {
            const int s = ceil_steps(step[j], d, 31);
            const int stored = s + 32;  // 6 bits: low nibble and top two bits apart
            b.scales[j % 8] |= static_cast<uint8_t>((stored & 15) << (j < 8 ? 0 : 4));
            b.scales[8 + j % 4] |= static_cast<uint8_t>((stored >> 4) << (2 * (j / 4)));
            const float e = d * static_cast<float>(s);
            for (int l = 0; l < 16; ++l) {
                const int i = 16 * j + l, kb = i / 32;
                const int q = e > 0 ? clamp(round_even(x[i] / e), -4, 3) : 0;
                // q = low - 4 with the high bit clear, low with it set.
                const int low = q < 0 ? q + 4 : q;
                b.qs[32 * (kb / 4) + i % 32] |= static_cast<uint8_t>(low << (2 * (kb % 4)));
                if (q >= 0) b.hmask[i % 32] |= static_cast<uint8_t>(1u << kb);
            }
        }
    }
}

void quantize_row_iq4_nl(const float *src, BlockIQ4_NL *dst, int64_t n) {
    for (int64_t ib = 0; ib < n / QK4_NL; ++ib) {
        const float *x = src + ib * QK4_NL;
        dst[ib].d = fp32_to_fp16_ceil(amax_of(x, 32) / kIq4Top);
        table_nibbles(x, fp16_to_fp32(dst[ib].d), kIq4nlValues, dst[ib].qs);
    }
}

// IQ4_XS: sub-block j's scale d_j = amax_j / 113 rounded up to a whole multiple of d (0..31 of them).
void quantize_row_iq4_xs(const float *src, BlockIQ4_XS *dst, int64_t n) {
    for (int64_t ib = 0; ib < n / QK_K; ++ib) {
        const float *x = src + ib * QK_K;
        BlockIQ4_XS &b = dst[ib];
        float dj[8], dj_max = 0;
        for (int j = 0; j < 8; ++j) {
            dj[j] = amax_of(x + 32 * j, 32) / kIq4Top;
            dj_max = std::fmax(dj_max, dj[j]);
        }
        b.d = fp32_to_fp16_ceil(dj_max / 31.0f);
        const float d = fp16_to_fp32(b.d);
        b.scales_h = 0;
        for (int j = 0; j < 4; ++j) b.scales_l[j] = 0;
        for (int j = 0; j < 8; ++j) {
            const int s = ceil_steps(dj[j], d, 31), stored = s + 32;
            b.scales_l[j / 2] |= static_cast<uint8_t>((stored & 15) << (4 * (j % 2)));
            b.scales_h = static_cast<uint16_t>(b.scales_h | (stored >> 4) << (2 * j));
            table_nibbles(x + 32 * j, d * static_cast<float>(s), kIq4nlValues, b.qs + 16 * j);
        }
    }
}

// MXFP4: the smallest power-of-two scale 2^(e - 128) with 12 * scale >= max|x| (12: the table's largest
// entry, 6.0 doubled). E8M0 255 is NaN, so e stops at 254.
void quantize_row_mxfp4(const float *src, BlockMXFP4 *dst, int64_t n) {
    for (int64_t ib = 0; ib < n / QK_MXFP4; ++ib) {
        const float *x = src + ib * QK_MXFP4;
        const float amax = amax_of(x, 32);
        int e = 0;
        if (amax > 0) {
            int k;
            const float m = std::frexp(amax / 12.0f, &k);  // amax / 12 = m 2^k, m in [0.5, 1)
            e = clamp((m == 0.5f ? k - 1 : k) + 128, 0, 254);
            while (e < 254 && e8m0_half_to_fp32(static_cast<uint8_t>(e)) * 12.0f < amax) ++e;  // amax / 12 rounded
        }
        dst[ib].e = static_cast<uint8_t>(e);
        table_nibbles(x, amax > 0 ? e8m0_half_to_fp32(dst[ib].e) : 0.0f, kMxfp4Values, dst[ib].qs);
    }
}

} // namespace ember::cpu::detail
