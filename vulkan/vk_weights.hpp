// vk_weights.hpp — weight matrices in device memory: the layout the shaders read.
//
// A tensor is repacked at upload so that every shader load is an aligned 32-bit word: F32 as is; F16
// rows padded to whole words; Q8_0 and Q4_0 (GGUF blocks of 34 and 18 bytes, not word-aligned) split
// into all the block scales as f32 first (row-major, n_out x n_in/32), then the codes, 8 or 4 words per
// block in the file's byte order. The K-quants (Q4_K, Q5_K, Q6_K: super-blocks of 256 with packed 6-bit
// or 8-bit sub-block scales) become 11 words per block of 32 — d, the two 16-value halves' integer
// scales, the block's offset dmin * m (exact: an f16 times 6 bits), and the codes as signed bytes — so
// one shader serves all three and needs no bit unpacking; it costs 2.4 times Q4_K's size on the device
// (1.375 bytes per weight), a price of this first version. The scales are converted from f16 exactly, so the products are those
// of the file's values.
#pragma once

#include "core/dtype.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ember::vk {

struct WeightRef {
    DType type = DType::F32;
    uint32_t off = 0;      // word offset in the weights buffer
    uint32_t n_in = 0, n_out = 0;
    bool quantized() const { return type != DType::F32 && type != DType::F16; }
    bool k_quant() const { return type == DType::Q4_K || type == DType::Q5_K || type == DType::Q6_K; }
};

// Whether the shaders handle this weight type (for an n_in the type needs), and words it takes.
bool weight_type_supported(DType t);
size_t packed_words(DType t, uint32_t n_in, uint32_t n_out);
// Appends the packed tensor (GGUF bytes at src) to out. Throws EMBER_ERR_UNSUPPORTED for other types.
void pack_weight(DType t, const void *src, uint32_t n_in, uint32_t n_out, std::vector<uint32_t> &out);

} // namespace ember::vk
