// rows16.hpp — quantized weights (Q4_K, Q6_K, Q4_0, Q8_0) with 16 rows interleaved: the layout the
// AVX-512 tiles read as one contiguous stream (rows16_avx512.cpp), made once at load in the core's
// private copy of the weights (cpu_module.cpp's host_layout_rewrite), in place: the same bytes, in
// another order.
//
// Why: the file's layout made the decode tiles read 4 rows side by side (4 streams, which the hardware
// prefetcher follows worst: `ember-bandwidth 2 512 rows` 32.7 GB/s against 38.2 for one stream), unpack
// each row's scales, and transpose 4 rows' partial sums per sub-block (the shuffle port was the Q4_K
// tile's bound). Interleaved, 16 rows are one stream; a 512-bit VPDPBUSD takes 4 codes of each of the
// 16 rows against 4 activations broadcast, so each lane sums one row and nothing is transposed; the
// scales unpack for 16 rows at once; and each float step serves 16 rows. Q4_0 and Q8_0 the same way
// (measured on a Xeon with AVX-512 VNNI and no AMX, where their file-layout decode tiles read 62 % and
// 72 % of the machine's read bandwidth, 77-84 % and 87-97 % interleaved: docs/benchmarks.md, "Design
// choices these numbers justify").
//
// Layout of a tensor of n_out rows of row_bytes: rows [16 g, 16 g + 16) for g < n_out / 16 are group g,
// which takes the bytes those 16 rows took, [16 g row_bytes, 16 (g + 1) row_bytes); the last n_out % 16
// rows stay as in the file. Within a group, super-block s (inputs 256 s ..) of the 16 rows is a record
// of 16 blocks' bytes at s * record: each field of the block in turn, in units of its size (2 bytes
// for fp16 scales, 1 for 8-bit scales, 4 for codes), unit u of row i at field + 16 * unit * u + unit * i:
//   Q4_K (2304 bytes): [0, 32) d, [32, 64) dmin, [64, 256) the 12 scale bytes, [256, 2304) qs
//   Q6_K (3360 bytes): [0, 32) d, [32, 288) the 16 scales, [288, 2336) ql, [2336, 3360) qh
// Q4_0 and Q8_0 have a record per block of 32 inputs:
//   Q4_0 (288 bytes): [0, 32) d, [32, 288) qs       Q8_0 (544 bytes): [0, 32) d, [32, 544) qs
// so code unit u of the 16 rows (bytes 4u .. 4u + 3 of each row's qs) is one 64-byte vector.
// The AVX-512 and AMX levels interleave all four (rows16_native; the AMX level's tile GEMMs pack their
// panels from the records too), the scalar and AVX2 levels none.
// Every kernel level reads it: the AVX-512 and AMX levels' products of up to 15 tokens with the tiles,
// their longer ones with their panels packed straight from the records (rows16_x86.hpp reads a record's
// fields for both), everything else (the scalar and AVX2 levels, a range that splits a group) from rows
// copied back to the file's layout (rows16_rows).
#pragma once

#include "core/dtype.hpp"
#include "cpu/vec_dot.hpp"

#include <cstddef>
#include <cstdint>

namespace ember::cpu {

constexpr int64_t kRows16 = 16;             // rows per group
constexpr size_t kQ4KRecord = 16 * 144;     // bytes of one super-block of a group
constexpr size_t kQ6KRecord = 16 * 210;
constexpr size_t kQ40Record = 16 * 18;      // bytes of one block of 32 inputs of a group
constexpr size_t kQ80Record = 16 * 34;
// Where each field of the 16 rows starts in a record (the layout above; rows16.cpp checks them against
// its field tables): the kernels that read records directly (panel_pack_x86.hpp) use these.
constexpr size_t kQ4KRecD = 0, kQ4KRecDmin = 32, kQ4KRecScales = 64, kQ4KRecQs = 256;
constexpr size_t kQ6KRecD = 0, kQ6KRecScales = 32, kQ6KRecQl = 288, kQ6KRecQh = 2336;
constexpr size_t kB32RecD = 0, kB32RecQs = 32;  // Q4_0's and Q8_0's records

// The types with an interleaved layout, as indices of KernelTable::matmul_rows16 (-1: none).
enum Rows16Kind : int { kR16Q4_K, kR16Q6_K, kR16Q4_0, kR16Q8_0, kRows16Kinds };
int rows16_kind(DType type);
static_assert(kRows16Kinds == sizeof(detail::KernelTable::matmul_rows16) / sizeof(detail::MatmulRowsFn));

// Whether the interleaved layout exists for `type` (Q4_K, Q6_K, Q4_0, Q8_0).
bool rows16_type(DType type);
// Interleaves the full 16-row groups of a tensor of `type` (n_out rows of row_bytes at data) in place.
void rows16_pack(DType type, uint8_t *data, int64_t n_out, size_t row_bytes);
// Rows [g0, g0 + 16 n_groups) (g0 a multiple of 16, every row in a full group) of the interleaved
// tensor at w, back in the file's layout at dst (16 n_groups * row_bytes bytes).
void rows16_unpack(DType type, const uint8_t *w, size_t row_bytes, int64_t g0, int64_t n_groups, uint8_t *dst);

// Whether the kernel level in use reads `type` interleaved with tiles of its own, and so wants it so at
// load (where it does not, interleaving would only cost: every product would copy rows back first).
bool rows16_native(DType type);

// Tests: while on, every copy back to the file's layout fails as if its memory were not there (the
// product then fails with EMBER_ERR_OUT_OF_MEMORY).
void rows16_fail_copies_for_testing(bool on);

namespace detail {

// Rows [r0, r1) of an interleaved product (job.n_rows16 > 0): rows in whole groups with `panel` (may be
// null) from 16 tokens on (rows16.cpp's kPanelMinTokens), else with `native` (may be null) up to 64
// tokens (kNativeMaxTokens), every other
// row through `plain` (a kernel of the file's layout) on rows copied back (groups) or in place (the last
// n_out % 16 rows). Same bits as `plain` on the file's layout, since `native` and `panel` have its bits.
void rows16_rows(DType type, MatmulRowsFn plain, MatmulRowsFn native, MatmulRowsFn panel, const MatmulJob &job,
                 int64_t r0, int64_t r1);

// The AVX-512 tiles over whole groups: r0 and r1 multiples of 16, any number of tokens (4 per pass).
void matmul_rows_q4_k_rows16_avx512(const MatmulJob &job, int64_t r0, int64_t r1);
void matmul_rows_q6_k_rows16_avx512(const MatmulJob &job, int64_t r0, int64_t r1);
void matmul_rows_q4_0_rows16_avx512(const MatmulJob &job, int64_t r0, int64_t r1);
void matmul_rows_q8_0_rows16_avx512(const MatmulJob &job, int64_t r0, int64_t r1);
// The AMX panels over whole groups, packed from the records (matmul_panel_amx.cpp): r0 and r1 multiples
// of 16, at least 16 tokens.
void matmul_rows_q4_k_rows16_amx(const MatmulJob &job, int64_t r0, int64_t r1);
void matmul_rows_q6_k_rows16_amx(const MatmulJob &job, int64_t r0, int64_t r1);
void matmul_rows_q4_0_rows16_amx(const MatmulJob &job, int64_t r0, int64_t r1);
void matmul_rows_q8_0_rows16_amx(const MatmulJob &job, int64_t r0, int64_t r1);
// The AVX-512 panels over whole groups, packed from the records (matmul_panel_avx512.cpp): r0 and r1
// multiples of 16, more than 4 tokens (kTokTile).
void matmul_panels_q4_k_rows16_avx512(const MatmulJob &job, int64_t r0, int64_t r1);
void matmul_panels_q6_k_rows16_avx512(const MatmulJob &job, int64_t r0, int64_t r1);
void matmul_panels_q4_0_rows16_avx512(const MatmulJob &job, int64_t r0, int64_t r1);
void matmul_panels_q8_0_rows16_avx512(const MatmulJob &job, int64_t r0, int64_t r1);

} // namespace detail

} // namespace ember::cpu
