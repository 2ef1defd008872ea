// vk_weights.cpp — repacking GGUF tensors for the shaders (see vk_weights.hpp).
#include "vk_weights.hpp"

#include "core/error.hpp"
#include "core/fp16.hpp"

#include <cstring>

namespace ember::vk {

bool weight_type_supported(DType t) {
    switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: case DType::Q8_0: case DType::Q4_0: case DType::Q4_1:
    case DType::Q5_0: case DType::Q5_1: case DType::Q2_K: case DType::Q3_K: case DType::Q4_K: case DType::Q5_K:
    case DType::Q6_K: case DType::IQ4_NL: case DType::IQ4_XS: case DType::MXFP4: return true;
    default: return false;
    }
}

Layout weight_layout(DType t) {
    switch (t) {
    case DType::F32: return Layout::F32;
    case DType::F16: return Layout::F16;
    case DType::BF16: return Layout::BF16;
    case DType::Q4_0: return Layout::Q4;
    case DType::Q8_0: case DType::Q5_0: case DType::IQ4_NL: case DType::IQ4_XS: case DType::MXFP4: return Layout::Q8;
    case DType::Q4_1: case DType::Q5_1: case DType::Q3_K: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K:
        return Layout::K;
    case DType::Q2_K: return Layout::K2;
    default: fail(EMBER_ERR_UNSUPPORTED, "vulkan: weight type %s is not supported yet", dtype_name(t));
    }
}

namespace {

constexpr uint32_t kKWords = 11, kK2Words = 12;

// One block of 32 in the K layout (see vk_weights.hpp).
void put_k_block(uint32_t *dst, float d, int sc_a, int sc_b, float mn, const int8_t *codes) {
    std::memcpy(dst, &d, 4);
    dst[1] = static_cast<uint32_t>(static_cast<uint8_t>(sc_a)) | static_cast<uint32_t>(static_cast<uint8_t>(sc_b)) << 8;
    std::memcpy(dst + 2, &mn, 4);
    std::memcpy(dst + 3, codes, 32);
}

// Q4_K/Q5_K's 6-bit scale and min of sub-block j (layout: core/dtype.hpp's BlockQ4_K).
void k45_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
        *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

template <class Block, bool kHigh>
void pack_k45(const Block *src, size_t n_super, uint32_t *dst) {
    for (size_t s = 0; s < n_super; ++s) {
        const Block &b = src[s];
        const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
        for (int j = 0; j < 8; ++j) {
            int sc, m;
            k45_scale_min(b.scales, j, &sc, &m);
            int8_t codes[32];
            for (int l = 0; l < 32; ++l) {
                int code = (j & 1) ? b.qs[32 * (j / 2) + l] >> 4 : b.qs[32 * (j / 2) + l] & 15;
                if constexpr (kHigh) code |= ((b.qh[l] >> j) & 1) << 4;
                codes[l] = static_cast<int8_t>(code);
            }
            put_k_block(dst + (s * 8 + j) * kKWords, d, sc, sc, dmin * static_cast<float>(m), codes);
        }
    }
}

void pack_q6_k(const BlockQ6_K *src, size_t n_super, uint32_t *dst) {
    for (size_t s = 0; s < n_super; ++s) {
        const BlockQ6_K &b = src[s];
        const float d = fp16_to_fp32(b.d);
        for (int kb = 0; kb < 8; ++kb) {
            const int h = kb / 4, k = kb % 4;
            int8_t codes[32];
            for (int l = 0; l < 32; ++l) {
                const uint8_t lo = b.ql[64 * h + 32 * (k & 1) + l];
                const int code = (k < 2 ? lo & 15 : lo >> 4) | ((b.qh[32 * h + l] >> (2 * k)) & 3) << 4;
                codes[l] = static_cast<int8_t>(code - 32);
            }
            put_k_block(dst + (s * 8 + kb) * kKWords, d, b.scales[8 * h + 2 * k], b.scales[8 * h + 2 * k + 1], 0.0f, codes);
        }
    }
}

// Q3_K: element 128 h + 32 k + l has its low bits at bits 2k of qs[32 h + l] and its high bit at bit
// 4h + k of hmask[l]; code = low - 4 where that bit is clear (core/dtype.hpp).
void pack_q3_k(const BlockQ3_K *src, size_t n_super, uint32_t *dst) {
    auto scale = [](const uint8_t *s, int j) {
        return (((s[j % 8] >> (j < 8 ? 0 : 4)) & 15) | ((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32;
    };
    for (size_t s = 0; s < n_super; ++s) {
        const BlockQ3_K &b = src[s];
        const float d = fp16_to_fp32(b.d);
        for (int kb = 0; kb < 8; ++kb) {
            int8_t codes[32];
            for (int l = 0; l < 32; ++l) {
                const int low = (b.qs[32 * (kb / 4) + l] >> (2 * (kb % 4))) & 3;
                codes[l] = static_cast<int8_t>(low - (((b.hmask[l] >> kb) & 1) ? 0 : 4));
            }
            put_k_block(dst + (s * 8 + kb) * kKWords, d, scale(b.scales, 2 * kb), scale(b.scales, 2 * kb + 1), 0.0f, codes);
        }
    }
}

// Q2_K into K2 (d, scales, offset of each half, codes): element 128 h + 32 k + l's code at bits 2k of
// qs[32 h + l]; sub-block i / 16 has the scale (low nibble) and min (high nibble) of scales[i / 16].
void pack_q2_k(const BlockQ2_K *src, size_t n_super, uint32_t *dst) {
    for (size_t s = 0; s < n_super; ++s) {
        const BlockQ2_K &b = src[s];
        const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
        for (int kb = 0; kb < 8; ++kb) {
            uint32_t *o = dst + (s * 8 + kb) * kK2Words;
            const uint8_t s0 = b.scales[2 * kb], s1 = b.scales[2 * kb + 1];
            const float d_mn[3] = {d, dmin * static_cast<float>(s0 >> 4), dmin * static_cast<float>(s1 >> 4)};
            std::memcpy(o, &d_mn[0], 4);
            o[1] = static_cast<uint32_t>(s0 & 15) | static_cast<uint32_t>(s1 & 15) << 8;
            std::memcpy(o + 2, &d_mn[1], 8);
            auto *codes = reinterpret_cast<uint8_t *>(o + 4);
            for (int l = 0; l < 32; ++l) codes[l] = static_cast<uint8_t>((b.qs[32 * (kb / 4) + l] >> (2 * (kb % 4))) & 3);
        }
    }
}

// Q4_1/Q5_1 in the K layout: value = d * code + m, so scale 1 and offset -m.
template <class Block, bool kHigh>
void pack_affine(const Block *src, size_t nb, uint32_t *dst) {
    for (size_t ib = 0; ib < nb; ++ib) {
        const Block &b = src[ib];
        uint32_t h = 0;
        if constexpr (kHigh) std::memcpy(&h, b.qh, 4);
        int8_t codes[32];
        for (int l = 0; l < 16; ++l) {
            codes[l] = static_cast<int8_t>((b.qs[l] & 15) | ((h >> l) & 1) << 4);
            codes[l + 16] = static_cast<int8_t>((b.qs[l] >> 4) | ((h >> (l + 16)) & 1) << 4);
        }
        put_k_block(dst + ib * kKWords, fp16_to_fp32(b.d), 1, 1, -fp16_to_fp32(b.m), codes);
    }
}

// The Q8 layout from any format of 32-value blocks: decode(block index, scale, codes).
template <class Decode>
void pack_q8(size_t nb, uint32_t *dst, Decode decode) {
    auto *scales = reinterpret_cast<float *>(dst);
    for (size_t b = 0; b < nb; ++b) {
        int8_t codes[32];
        decode(b, scales[b], codes);
        std::memcpy(dst + nb + b * 8, codes, 32);
    }
}

// 32 table entries from 16 bytes of nibbles in Q4_0's placement.
void table_codes(const uint8_t *qs, const int8_t *table, int8_t *codes) {
    for (int l = 0; l < 16; ++l) {
        codes[l] = table[qs[l] & 15];
        codes[l + 16] = table[qs[l] >> 4];
    }
}

} // namespace

size_t packed_words(DType t, uint32_t n_in, uint32_t n_out) {
    const size_t rows = n_out, nb = n_in / 32;
    switch (weight_layout(t)) {
    case Layout::F32: return rows * n_in;
    case Layout::F16:
    case Layout::BF16: return rows * ((n_in + 1) / 2);
    case Layout::Q8: return rows * nb * (1 + 8);
    case Layout::Q4: return rows * nb * (1 + 4);
    case Layout::K: return rows * nb * kKWords;
    case Layout::K2: return rows * nb * kK2Words;
    }
    return 0;
}

void pack_weight(DType t, const void *src, uint32_t n_in, uint32_t n_out, std::vector<uint32_t> &out) {
    const size_t base = out.size();
    out.resize(base + packed_words(t, n_in, n_out), 0);
    uint32_t *dst = out.data() + base;
    const auto *bytes = static_cast<const uint8_t *>(src);
    const size_t nb = size_t{n_out} * (n_in / 32), n_super = size_t{n_out} * (n_in / QK_K);
    switch (t) {
    case DType::F32: std::memcpy(dst, src, size_t{n_out} * n_in * 4); return;
    case DType::F16:
    case DType::BF16: {
        const size_t rw = (n_in + 1) / 2;
        for (size_t r = 0; r < n_out; ++r) std::memcpy(dst + r * rw, bytes + r * n_in * 2, size_t{n_in} * 2);
        return;
    }
    case DType::Q4_0: {
        auto *scales = reinterpret_cast<float *>(dst);
        const auto *b = static_cast<const BlockQ4_0 *>(src);
        for (size_t i = 0; i < nb; ++i) {
            scales[i] = fp16_to_fp32(b[i].d);
            std::memcpy(dst + nb + i * 4, b[i].qs, 16);
        }
        return;
    }
    case DType::Q8_0: {
        const auto *b = static_cast<const BlockQ8_0 *>(src);
        pack_q8(nb, dst, [&](size_t i, float &d, int8_t *c) { d = fp16_to_fp32(b[i].d), std::memcpy(c, b[i].qs, 32); });
        return;
    }
    case DType::Q5_0: {
        const auto *b = static_cast<const BlockQ5_0 *>(src);
        pack_q8(nb, dst, [&](size_t i, float &d, int8_t *c) {
            uint32_t h;
            std::memcpy(&h, b[i].qh, 4);
            d = fp16_to_fp32(b[i].d);
            for (int l = 0; l < 16; ++l) {
                c[l] = static_cast<int8_t>(((b[i].qs[l] & 15) | ((h >> l) & 1) << 4) - 16);
                c[l + 16] = static_cast<int8_t>(((b[i].qs[l] >> 4) | ((h >> (l + 16)) & 1) << 4) - 16);
            }
        });
        return;
    }
    case DType::IQ4_NL: {
        const auto *b = static_cast<const BlockIQ4_NL *>(src);
        pack_q8(nb, dst, [&](size_t i, float &d, int8_t *c) { d = fp16_to_fp32(b[i].d), table_codes(b[i].qs, kIq4nlValues, c); });
        return;
    }
    case DType::MXFP4: {
        const auto *b = static_cast<const BlockMXFP4 *>(src);
        pack_q8(nb, dst, [&](size_t i, float &d, int8_t *c) { d = e8m0_half_to_fp32(b[i].e), table_codes(b[i].qs, kMxfp4Values, c); });
        return;
    }
    case DType::IQ4_XS: {
        const auto *b = static_cast<const BlockIQ4_XS *>(src);
        pack_q8(nb, dst, [&](size_t i, float &d, int8_t *c) {
            const BlockIQ4_XS &s = b[i / 8];
            const int j = static_cast<int>(i % 8);
            const int ls = (((s.scales_l[j / 2] >> (4 * (j % 2))) & 15) | ((s.scales_h >> (2 * j)) & 3) << 4) - 32;
            d = fp16_to_fp32(s.d) * static_cast<float>(ls);  // exact: 11 + 6 significant bits
            table_codes(s.qs + 16 * j, kIq4nlValues, c);
        });
        return;
    }
    case DType::Q4_1: pack_affine<BlockQ4_1, false>(static_cast<const BlockQ4_1 *>(src), nb, dst); return;
    case DType::Q5_1: pack_affine<BlockQ5_1, true>(static_cast<const BlockQ5_1 *>(src), nb, dst); return;
    case DType::Q2_K: pack_q2_k(static_cast<const BlockQ2_K *>(src), n_super, dst); return;
    case DType::Q3_K: pack_q3_k(static_cast<const BlockQ3_K *>(src), n_super, dst); return;
    case DType::Q4_K: pack_k45<BlockQ4_K, false>(static_cast<const BlockQ4_K *>(src), n_super, dst); return;
    case DType::Q5_K: pack_k45<BlockQ5_K, true>(static_cast<const BlockQ5_K *>(src), n_super, dst); return;
    case DType::Q6_K: pack_q6_k(static_cast<const BlockQ6_K *>(src), n_super, dst); return;
    default: fail(EMBER_ERR_UNSUPPORTED, "vulkan: weight type %s is not supported yet", dtype_name(t));
    }
}

} // namespace ember::vk
