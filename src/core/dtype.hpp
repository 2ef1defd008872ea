// dtype.hpp — tensor element types, numbered as GGUF numbers them (ggml_type), and their block layouts.
//
// Quantized types store rows as a sequence of fixed-size blocks of `block_size` elements; a row of n
// elements takes n / block_size * block_bytes bytes. Layouts follow the GGUF specification.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember {

enum class DType : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    BF16 = 30,
};

struct DTypeInfo {
    const char *name;      // "Q8_0"; nullptr for ids GGUF does not define
    uint32_t block_size;   // elements per block (1 for plain types)
    uint32_t block_bytes;  // bytes per block
    bool supported;        // usable as a weight by this build's kernels
};

// Info for any raw id; ids GGUF does not define get name == nullptr.
const DTypeInfo &dtype_info(uint32_t raw_id);
inline const DTypeInfo &dtype_info(DType t) { return dtype_info(static_cast<uint32_t>(t)); }

// Name of a raw id, or "unknown(N)" (thread-local buffer) for undefined ids.
const char *dtype_name(uint32_t raw_id);
inline const char *dtype_name(DType t) { return dtype_name(static_cast<uint32_t>(t)); }

// Bytes of one row of n elements; n must be a multiple of the block size (checked by the caller).
inline size_t dtype_row_bytes(DType t, uint64_t n) {
    const DTypeInfo &i = dtype_info(t);
    return static_cast<size_t>(n / i.block_size) * i.block_bytes;
}

// ---- block layouts (GGUF spec) ----------------------------------------------------------------------
// fp16 scales are stored as raw IEEE half bits (uint16_t); see core/fp16.hpp.

constexpr int QK8_0 = 32;
struct BlockQ8_0 {
    uint16_t d;          // scale
    int8_t qs[QK8_0];    // value = d * qs[i]
};
static_assert(sizeof(BlockQ8_0) == 34);

constexpr int QK4_0 = 32;
struct BlockQ4_0 {
    uint16_t d;              // scale
    uint8_t qs[QK4_0 / 2];   // element i (< 16) in the low nibble of qs[i], element i + 16 in the high
                             // nibble; value = d * (nibble - 8)
};
static_assert(sizeof(BlockQ4_0) == 18);

} // namespace ember
