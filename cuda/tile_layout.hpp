// tile_layout.hpp — Q8_0, Q4_0, Q4_K and Q6_K weights on the device, laid out for the tensor cores' int8
// product (mma.sync m16n8k32: a warp multiplies a 16 x 32 tile of weight codes by 32 x 8 activation codes
// into exact int32 sums). Plain C++ shared by the packer (weights.cpp), the element decoder
// (quant_math.hpp's weight_at), the kernels (matmul_mma.cu) and tests/test_cuda_host.cpp, which checks on
// the CPU that the fragments a lane reads are the file's codes in the places the PTX ISA gives them.
//
// The matrix is cut into groups of 16 rows (the last group padded with zero codes and zero scales) and,
// along a row, into blocks of 32 codes. A tile is one group's one block. In a tile, lane L of the warp
// (g = L / 4, c = L % 4) owns the fragment words the instruction wants from it, contiguous, so a warp
// reads a whole tile with one coalesced load per lane:
//   A fragment (PTX): a0 = row g, codes 4c..4c+3; a1 = row g+8, codes 4c..4c+3; a2 = row g, codes
//   16+4c..16+4c+3; a3 = row g+8, codes 16+4c..16+4c+3.
//   Q8_0 and Q6_K: 512 bytes, lane L's 16 at 16 L: a0 a1 a2 a3 as stored codes (Q6_K's centred, code - 32;
//   it multiplies each half of the block apart, m16n8k16 on a0 a1 and on a2 a3, for its scale per 16).
//   Q4_0 and Q4_K: 256 bytes, lane L's 8 at 8 L: row g's bytes 4c..4c+3, then row g+8's, where byte j of a
//   row holds code j in its low nibble and code j + 16 in its high one (Q4_0's own order; Q4_K's codes are
//   put in it), so these two words give all four of a0..a3.
// Q8_0 and Q4_0: tiles group after group, block after block within a group; the tiles' 16 f16 scales
// kept apart, rows g and g + 8 side by side (one 4-byte load for the lanes of g):
// scales[(group * blocks + block) * 16 + tile_scale_slot(row % 16)].
// Q4_K: a group's super-block (8 blocks) is one 2304-byte unit, as many bytes as its 16 rows take in the
// file: the 16 rows' first 16 bytes as in the file (d, dmin, the 12 bytes of packed 6-bit scales and
// mins), then the 8 blocks' tiles. Units group after group, super-block after super-block.
// Q6_K likewise, 4384-byte units (1.3x its file size, for codes the tensor cores take as they are): the
// 16 rows' f16 d, their 16 int8 scales each (row after row), then the 8 blocks' tiles.
#pragma once

#include <cstdint>

#if !defined(EMBER_HD)
#if defined(__CUDACC__)
#define EMBER_HD __host__ __device__ __forceinline__
#else
#define EMBER_HD inline
#endif
#endif

namespace ember::cu {

// GGUF type ids of the weights the kernels read.
constexpr uint32_t kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ2_K = 10, kQ3_K = 11,
                   kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kIQ4_NL = 20, kIQ4_XS = 23, kBF16 = 30, kMXFP4 = 39;

constexpr int kTileRows = 16;
constexpr int kQ4kMetaBytes = 16 * kTileRows;        // a Q4_K unit's row heads
constexpr int kQ4kUnitBytes = kQ4kMetaBytes + 8 * 256;  // 2304 = 16 x 144
constexpr int kQ6kMetaBytes = 2 * kTileRows + 16 * kTileRows;  // the d's, then the scales
constexpr int kQ6kUnitBytes = kQ6kMetaBytes + 8 * 512;          // 4384

// The types that run on the tensor cores (matmul_mma.cu).
EMBER_HD constexpr bool tiled_type(uint32_t type) { return type == kQ8_0 || type == kQ4_0 || type == kQ4_K || type == kQ6_K; }
EMBER_HD constexpr bool byte_codes(uint32_t type) { return type == kQ8_0 || type == kQ6_K; }  // else nibbles
EMBER_HD int64_t tile_groups(int64_t n_out) { return (n_out + kTileRows - 1) / kTileRows; }
// Code bytes of one tile.
EMBER_HD int tile_code_bytes(uint32_t type) { return byte_codes(type) ? 512 : 256; }
// A K-quant unit's bytes and head bytes (0: not a K-quant).
EMBER_HD int unit_bytes(uint32_t type) { return type == kQ4_K ? kQ4kUnitBytes : type == kQ6_K ? kQ6kUnitBytes : 0; }
EMBER_HD int unit_head_bytes(uint32_t type) { return type == kQ4_K ? kQ4kMetaBytes : type == kQ6_K ? kQ6kMetaBytes : 0; }
// Where block b's tile of group `group` starts (nb: blocks per row), from the start of the codes; a
// K-quant's unit (its head) starts (b % 8) tiles and the head before it.
EMBER_HD int64_t unit_start(uint32_t type, int64_t group, int64_t nb, int64_t b) { return (group * (nb / 8) + b / 8) * unit_bytes(type); }
EMBER_HD int64_t tile_start(uint32_t type, int64_t group, int64_t nb, int64_t b) {
    if (unit_bytes(type)) return unit_start(type, group, nb, b) + unit_head_bytes(type) + (b % 8) * tile_code_bytes(type);
    return (group * nb + b) * tile_code_bytes(type);
}

EMBER_HD int tile_scale_slot(int rr) { return 2 * (rr % 8) + rr / 8; }

// The byte of a tile that holds code k (< 32) of tile row rr (< 16); for the 4-bit types the byte whose
// low (k < 16) or high nibble it is.
EMBER_HD int tile_code_offset(uint32_t type, int rr, int k) {
    const int lane = (rr % 8) * 4 + (k % 16) / 4, j = k % 4;
    return byte_codes(type) ? lane * 16 + (rr / 8 + 2 * (k / 16)) * 4 + j : lane * 8 + (rr / 8) * 4 + j;
}

// Q4_0: four codes (nibbles, one per byte of `w`) as the signed bytes code - 8. Each byte of
// (w + 0x78) stays below 0x88 (no carry into the next), and flipping its top bit subtracts 128.
EMBER_HD uint32_t q4_centred(uint32_t nibbles) { return (nibbles + 0x78787878u) ^ 0x80808080u; }

// Lane L's A fragment from its stored words (Q8_0, Q6_K: w[0..3]; the 4-bit types: w[0] = row g, w[1] =
// row g+8). Q4_K's codes stay unsigned (0..15): its minimum is subtracted through the activations' sums.
EMBER_HD void tile_a_frag(uint32_t type, const uint32_t *w, uint32_t a[4]) {
    if (byte_codes(type)) {
        a[0] = w[0], a[1] = w[1], a[2] = w[2], a[3] = w[3];
        return;
    }
    a[0] = w[0] & 0x0F0F0F0Fu, a[2] = (w[0] >> 4) & 0x0F0F0F0Fu;
    a[1] = w[1] & 0x0F0F0F0Fu, a[3] = (w[1] >> 4) & 0x0F0F0F0Fu;
    if (type == kQ4_0)
        for (int i = 0; i < 4; ++i) a[i] = q4_centred(a[i]);
}

// The products' fixed order of sums (batch invariance: a token's outputs are the same bits however many
// tokens a pass holds and whichever kernel ran it). A row's blocks are cut into segments of
// seg_blocks(nb) consecutive blocks; per output, each segment sums its blocks in ascending order from
// p = 0 (per block fma(isum, d_w * d_x, p), Q4_K then fma(sum_x, -(m_w * d_x), p), Q6_K one per half;
// isum: the block's exact integer dot product), and the segments are added left to right:
// ((p_0 + p_1) + p_2) + ...
// Eight segments give a decode step eight warps per 16 rows.
constexpr int kMmaSegments = 8;
EMBER_HD int64_t seg_blocks(int64_t nb) { return (nb + kMmaSegments - 1) / kMmaSegments; }

} // namespace ember::cu
