// types.hpp — the plain structs the kernels take (no CUDA header: host-only code and CPU tests use them).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember::cu {

// The largest head the attention kernels take (program.cpp refuses larger ones at load).
constexpr int kMaxHeadDim = 256;

// A weight matrix on the device: n_out rows of n_in values of `type` (GGUF id).
struct DevWeight {
    uint32_t type = 0;
    int64_t n_in = 0, n_out = 0;
    const void *codes = nullptr;   // F32/F16/BF16: the rows; Q8_0/Q4_0: tiles of 16 rows (tile_layout.hpp);
                                   // other block formats: the file's blocks, row after row
    const uint16_t *scales = nullptr; // Q8_0/Q4_0: f16 scale bits, per tile its 16 rows' (tile_layout.hpp)
};

// Activations quantized like the CPU's (Q8_0: per 32 values an f16 scale d = max|x|/127 and
// round-to-even codes), stored as codes [rows][n_in] and, per block of 32, the f32 pair {d, sum of the
// codes} [rows][n_in/32][2] (the sums: Q4_K's minimums, matmul_mma.cu).
struct ActQ8 {
    int8_t *codes = nullptr;
    float *scales = nullptr;
};

} // namespace ember::cu
