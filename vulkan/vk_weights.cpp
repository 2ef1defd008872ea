// vk_weights.cpp — repacking GGUF tensors for the shaders (see vk_weights.hpp).
#include "vk_weights.hpp"

#include "core/error.hpp"
#include "core/fp16.hpp"

#include <cstring>

namespace ember::vk {

bool weight_type_supported(DType t) {
    return t == DType::F32 || t == DType::F16 || t == DType::Q8_0 || t == DType::Q4_0 || t == DType::Q4_K ||
           t == DType::Q5_K || t == DType::Q6_K;
}

namespace {

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
            put_k_block(dst + (s * 8 + j) * 11, d, sc, sc, dmin * static_cast<float>(m), codes);
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
            put_k_block(dst + (s * 8 + kb) * 11, d, b.scales[8 * h + 2 * k], b.scales[8 * h + 2 * k + 1], 0.0f, codes);
        }
    }
}

} // namespace

size_t packed_words(DType t, uint32_t n_in, uint32_t n_out) {
    const size_t rows = n_out, nb = n_in / 32;
    switch (t) {
    case DType::F32: return rows * n_in;
    case DType::F16: return rows * ((n_in + 1) / 2);
    case DType::Q8_0: return rows * nb * (1 + 8);
    case DType::Q4_0: return rows * nb * (1 + 4);
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: return rows * nb * 11;
    default: fail(EMBER_ERR_UNSUPPORTED, "vulkan: weight type %s is not supported yet", dtype_name(t));
    }
}

void pack_weight(DType t, const void *src, uint32_t n_in, uint32_t n_out, std::vector<uint32_t> &out) {
    const size_t base = out.size();
    out.resize(base + packed_words(t, n_in, n_out), 0);
    uint32_t *dst = out.data() + base;
    const auto *bytes = static_cast<const uint8_t *>(src);
    switch (t) {
    case DType::F32: std::memcpy(dst, src, size_t{n_out} * n_in * 4); return;
    case DType::F16: {
        const size_t rw = (n_in + 1) / 2;
        for (size_t r = 0; r < n_out; ++r) std::memcpy(dst + r * rw, bytes + r * n_in * 2, size_t{n_in} * 2);
        return;
    }
    case DType::Q8_0:
    case DType::Q4_0: {
        const bool q8 = t == DType::Q8_0;
        const size_t nb = size_t{n_out} * (n_in / 32), block = q8 ? sizeof(BlockQ8_0) : sizeof(BlockQ4_0);
        const size_t wpb = q8 ? 8 : 4;
        float *scales = reinterpret_cast<float *>(dst);
        for (size_t b = 0; b < nb; ++b) {
            const uint8_t *blk = bytes + b * block;
            uint16_t d;
            std::memcpy(&d, blk, 2);
            scales[b] = fp16_to_fp32(d);
            std::memcpy(dst + nb + b * wpb, blk + 2, wpb * 4);
        }
        return;
    }
    case DType::Q4_K: pack_k45<BlockQ4_K, false>(static_cast<const BlockQ4_K *>(src), size_t{n_out} * (n_in / QK_K), dst); return;
    case DType::Q5_K: pack_k45<BlockQ5_K, true>(static_cast<const BlockQ5_K *>(src), size_t{n_out} * (n_in / QK_K), dst); return;
    case DType::Q6_K: pack_q6_k(static_cast<const BlockQ6_K *>(src), size_t{n_out} * (n_in / QK_K), dst); return;
    default: fail(EMBER_ERR_UNSUPPORTED, "vulkan: weight type %s is not supported yet", dtype_name(t));
    }
}

} // namespace ember::vk
