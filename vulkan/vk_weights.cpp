// vk_weights.cpp — repacking GGUF tensors for the shaders (see vk_weights.hpp).
#include "vk_weights.hpp"

#include "core/error.hpp"
#include "core/fp16.hpp"

#include <cstring>

namespace ember::vk {

bool weight_type_supported(DType t) {
    return t == DType::F32 || t == DType::F16 || t == DType::Q8_0 || t == DType::Q4_0;
}

size_t packed_words(DType t, uint32_t n_in, uint32_t n_out) {
    const size_t rows = n_out, nb = n_in / 32;
    switch (t) {
    case DType::F32: return rows * n_in;
    case DType::F16: return rows * ((n_in + 1) / 2);
    case DType::Q8_0: return rows * nb * (1 + 8);
    case DType::Q4_0: return rows * nb * (1 + 4);
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
    default: fail(EMBER_ERR_UNSUPPORTED, "vulkan: weight type %s is not supported yet", dtype_name(t));
    }
}

} // namespace ember::vk
