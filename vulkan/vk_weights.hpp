// vk_weights.hpp — weight matrices in device memory: the layout the shaders read.
//
// A tensor is repacked at upload so that every shader load is an aligned 32-bit word, into one of a few
// layouts (Layout), each read by one matmul shader; a GGUF type whose values are all "integer code
// times scale (minus offset)" shares a layout rather than having a shader of its own:
// - F32 as is; F16 and BF16 rows padded to whole words.
// - Q8: all the block scales as f32 first (row-major, n_out x n_in/32), then 8 words of signed 8-bit
//   codes per block: Q8_0; Q5_0 (code - 16); IQ4_NL and MXFP4 (the table entry; MXFP4's scale is the
//   power of two 2^(e - 128)); IQ4_XS (the table entry, the scale d * (ls - 32), exact in f32).
// - Q4: Q4_0's scales as f32, then its nibbles, 4 words per block in the file's byte order.
// - K: 11 words per block of 32 — d, the two 16-value halves' signed 8-bit scales, the block's offset
//   (f32), and the codes as signed bytes: value = d * sc_half * code - offset. Q4_K, Q5_K (offset
//   dmin * m), Q6_K (code - 32), Q3_K (its signed scales, centred codes, no offset), and Q4_1/Q5_1
//   (scale 1, offset -m). One shader serves all and needs no bit unpacking; it costs 1.375 bytes per
//   weight on the device (2.4 times Q4_K's size), a price of this first version.
// - K2: Q2_K, whose two 16-value halves have offsets of their own: 12 words per block of 32 — d, the
//   two scales, the two offsets dmin * m, the codes.
// Every scale and offset is converted from f16 (or E8M0) exactly, so the products are those of the
// file's values.
#pragma once

#include "core/dtype.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ember::vk {

// The numbers are the shaders' TYPE values (matmul.comp, get_rows.comp, common.glsl's T_*).
enum class Layout : uint32_t { F32 = 0, F16 = 1, Q4 = 2, Q8 = 8, K2 = 10, K = 12, BF16 = 30 };

struct WeightRef {
    DType type = DType::F32;
    uint32_t off = 0;      // word offset in the weights buffer
    uint32_t n_in = 0, n_out = 0;
    // Multiplied against the 8-bit activations (every layout but the float ones).
    bool quantized() const { return type != DType::F32 && type != DType::F16 && type != DType::BF16; }
};

// Whether the shaders handle this weight type, its layout (throws EMBER_ERR_UNSUPPORTED naming the
// type for others), and the words a tensor takes.
bool weight_type_supported(DType t);
Layout weight_layout(DType t);
size_t packed_words(DType t, uint32_t n_in, uint32_t n_out);
// Appends the packed tensor (GGUF bytes at src) to out. Throws EMBER_ERR_UNSUPPORTED for other types.
void pack_weight(DType t, const void *src, uint32_t n_in, uint32_t n_out, std::vector<uint32_t> &out);

} // namespace ember::vk
