// q4k_rows16.hpp — Q4_K weights with 16 rows interleaved: the layout the AVX-512 decode tile reads as
// one contiguous stream (q4k_rows16_avx512.cpp), made once at load in the CPU's private copy of the
// weights (model/weight_placement.cpp), in place: the same bytes, in another order.
//
// Why: Q4_K's file layout made the decode tile read 4 rows side by side (4 streams, which the hardware
// prefetcher follows worst: `ember-bandwidth 2 512 rows` 32.7 GB/s against 38.2 for one stream), unpack
// each row's 6-bit scales, and transpose 4 rows' partial sums per sub-block (the shuffle port was the
// tile's bound). Interleaved, 16 rows are one stream; a 512-bit VPDPBUSD takes 4 codes of each of the
// 16 rows against 4 activations broadcast, so each lane sums one row and no transpose is needed; the
// scales unpack for 16 rows at once; and the float steps (one per sub-block) serve 16 rows.
//
// Layout of a tensor of n_out rows of row_bytes (= 144 * n_in / 256): rows [16 g, 16 g + 16) for
// g < n_out / 16 are group g, which takes the bytes those 16 rows took, [16 g row_bytes, 16 (g + 1)
// row_bytes); the last n_out % 16 rows stay as in the file. Within a group, super-block s (the 256
// inputs from 256 s) of the 16 rows is a record of 16 * 144 = 2304 bytes at s * 2304:
//   [0, 32)      d of rows 0..15 (fp16), [32, 64) dmin of rows 0..15
//   [64, 256)    scale byte b (0..11) of row i at 64 + 16 b + i
//   [256, 2304)  code bytes 4c .. 4c + 3 (c = 0..31) of row i at 256 + 64 c + 4 i
// Every kernel level reads it: the AVX-512 and AMX levels' one to four tokens with the tile, everything
// else (scalar, AVX2, prefill panels) from rows copied back to the file's layout (q4_k_rows16_rows).
#pragma once

#include "cpu/vec_dot.hpp"

#include <cstddef>
#include <cstdint>

namespace ember::cpu {

constexpr int64_t kQ4KRows16 = 16;          // rows per group
constexpr size_t kQ4KRows16Record = 2304;   // bytes of one super-block of a group

// Interleaves the full 16-row groups of a Q4_K tensor (n_out rows of row_bytes at data) in place.
void q4_k_rows16_pack(uint8_t *data, int64_t n_out, size_t row_bytes);
// Rows [g0, g0 + 16 n_groups) (g0 a multiple of 16, every row in a full group) of the interleaved
// tensor at w, back in the file's layout at dst (16 n_groups * row_bytes bytes).
void q4_k_rows16_unpack(const uint8_t *w, size_t row_bytes, int64_t g0, int64_t n_groups, uint8_t *dst);

// Whether the kernel level in use reads the interleaved layout at full speed (where it does not,
// interleaving would only cost: every product would copy rows back first).
bool q4_k_rows16_native();

namespace detail {

// Rows [r0, r1) of an interleaved Q4_K product (job.n_rows16 > 0): rows in full groups with `native`
// (may be null) where it serves the job's token count and the rows' groups are whole, every other row
// through `plain` (a kernel of the file's layout) on rows copied back (groups) or in place (the last
// n_out % 16 rows). Same bits as `plain` on the file's layout, since `native` has its bits.
void q4_k_rows16_rows(MatmulRowsFn plain, MatmulRowsFn native, const MatmulJob &job, int64_t r0, int64_t r1);

// The AVX-512 tile over whole groups: r0 and r1 multiples of 16, at most kTokTile tokens.
void matmul_rows_q4_k_rows16_avx512(const MatmulJob &job, int64_t r0, int64_t r1);

} // namespace detail

} // namespace ember::cpu
