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
    IQ4_NL = 20,
    IQ4_XS = 23,
    BF16 = 30,
    MXFP4 = 39,
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

constexpr int QK4_1 = 32;
struct BlockQ4_1 {
    uint16_t d;              // scale
    uint16_t m;              // offset (the block's minimum)
    uint8_t qs[QK4_1 / 2];   // nibbles placed as in Q4_0; value = d * nibble + m
};
static_assert(sizeof(BlockQ4_1) == 20);

// Q5_0/Q5_1: Q4_0/Q4_1's nibbles plus a fifth bit per element: bit j of qh (read as a little-endian
// 32-bit word) is bit 4 of element j's code.
constexpr int QK5_0 = 32;
struct BlockQ5_0 {
    uint16_t d;              // scale
    uint8_t qh[4];           // bit 4 of each code
    uint8_t qs[QK5_0 / 2];   // bits 0..3, placed as in Q4_0; value = d * (code - 16)
};
static_assert(sizeof(BlockQ5_0) == 22);

constexpr int QK5_1 = 32;
struct BlockQ5_1 {
    uint16_t d;              // scale
    uint16_t m;              // offset
    uint8_t qh[4];           // bit 4 of each code
    uint8_t qs[QK5_1 / 2];   // bits 0..3; value = d * code + m
};
static_assert(sizeof(BlockQ5_1) == 24);

// ---- K-quants: super-blocks of 256 elements --------------------------------------------------------
constexpr int QK_K = 256;

// Q4_K: 8 sub-blocks of 32, each with a 6-bit scale sc and a 6-bit min m, packed into 12 bytes:
// for j < 4, sc_j = scales[j] & 63 and m_j = scales[j + 4] & 63; for j >= 4, sc_j is the low nibble of
// scales[j + 4] with the top two bits of scales[j - 4] above it, and m_j the high nibble of
// scales[j + 4] with the top two bits of scales[j] above it. value = d * sc_j * code - dmin * m_j.
// Codes: 32-byte group g of qs holds sub-block 2g in its low nibbles and sub-block 2g + 1 in its high
// nibbles (element l of each in byte l).
struct BlockQ4_K {
    uint16_t d;              // scale of the sub-block scales
    uint16_t dmin;           // scale of the sub-block mins
    uint8_t scales[12];
    uint8_t qs[QK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);

// Q5_K: Q4_K plus a fifth bit: bit j of qh[l] is bit 4 of element l of sub-block j.
struct BlockQ5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176);

// Q6_K: 16 sub-blocks of 16 with a signed 8-bit scale each; value = d * scales[i / 16] * (code - 32)
// for element i, code 6 bits. Each half h (elements 128h ..) uses ql[64h ..], qh[32h ..]; its element
// 32k + l (k < 4, l < 32) has bits 0..3 in ql[64h + 32 (k & 1) + l] (low nibble for k < 2, high for
// k >= 2) and bits 4..5 in bits 2k, 2k + 1 of qh[32h + l].
struct BlockQ6_K {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// Q2_K: 16 sub-blocks of 16, each with a 4-bit scale (low nibble of scales[j]) and a 4-bit min (high
// nibble); value = d * sc_j * code - dmin * m_j, code 2 bits. Element 128 h + 32 k + l (h < 2, k < 4,
// l < 32) has its code in bits 2k, 2k + 1 of qs[32 h + l]; its sub-block is i / 16.
struct BlockQ2_K {
    uint8_t scales[QK_K / 16];
    uint8_t qs[QK_K / 4];
    uint16_t d;
    uint16_t dmin;
};
static_assert(sizeof(BlockQ2_K) == 84);

// Q3_K: 16 sub-blocks of 16 with signed 6-bit scales (stored + 32); value = d * (s_j - 32) * code,
// code = (2 low bits) - (4 if the element's hmask bit is clear), so -4..3. Element 128 h + 32 k + l has
// its low bits as Q2_K's (bits 2k, 2k + 1 of qs[32 h + l]) and its high bit at bit 4h + k of hmask[l].
// The 12 scale bytes: s_j's low nibble is the low (j < 8) or high (j >= 8) nibble of scales[j % 8];
// its top two bits are bits 2 (j / 4), + 1 of scales[8 + j % 4].
struct BlockQ3_K {
    uint8_t hmask[QK_K / 8];
    uint8_t qs[QK_K / 4];
    uint8_t scales[12];
    uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);

// ---- lookup-table formats: a 4-bit index into a fixed table of integers ------------------------------
// Nibbles placed as in Q4_0 (element j < 16 the low nibble of qs[j], j + 16 the high one).

// IQ4_NL's and IQ4_XS's table: a non-uniform grid, denser near zero where weights cluster.
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// IQ4_NL: value = d * kIq4nlValues[nibble].
constexpr int QK4_NL = 32;
struct BlockIQ4_NL {
    uint16_t d;
    uint8_t qs[QK4_NL / 2];
};
static_assert(sizeof(BlockIQ4_NL) == 18);

// IQ4_XS: super-blocks of 256 as 8 sub-blocks of 32 (nibbles of each as IQ4_NL's, in qs[16 j ..]) with
// 6-bit scales ls_j (stored + 32): low 4 bits in nibble j % 2 of scales_l[j / 2], top 2 bits at bit 2j
// of scales_h. value = d * (ls_j - 32) * kIq4nlValues[nibble].
struct BlockIQ4_XS {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[QK_K / 64];
    uint8_t qs[QK_K / 2];
};
static_assert(sizeof(BlockIQ4_XS) == 136);

// MXFP4 (OCP microscaling FP4): the elements are E2M1 floats (sign, 2 exponent bits, 1 mantissa bit)
// kept here doubled, as integers; the scale is an E8M0 byte e standing for 2^(e - 127), used halved to
// undo the doubling: value = 2^(e - 128) * kMxfp4Values[nibble].
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
constexpr int QK_MXFP4 = 32;
struct BlockMXFP4 {
    uint8_t e;
    uint8_t qs[QK_MXFP4 / 2];
};
static_assert(sizeof(BlockMXFP4) == 17);

// 2^(e - 128) as a float (exact: e = 0 and 1 give the subnormals 2^-128 and 2^-127). static, not just
// inline: AVX2 files may include this header (see cpu/simd_avx2.hpp).
static inline float e8m0_half_to_fp32(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
    float f;
    __builtin_memcpy(&f, &bits, 4);
    return f;
}

} // namespace ember
