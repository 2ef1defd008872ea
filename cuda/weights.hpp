// weights.hpp — weights on the device.
//
// F32, F16 and BF16 rows are uploaded as they are in the file. Q8_0 and Q4_0 are repacked on the way
// (34- and 18-byte blocks are only 2-byte aligned): all the rows' codes first (32 int8, resp. 16 bytes
// of nibbles per block, so every block's codes start on a 16-byte boundary and the matrix-vector
// kernels read them with one 16-byte load), then all the f16 scales. K-quants (Q4_K, Q5_K, Q6_K) keep
// the file's super-blocks (144, 176, 210 bytes). The values are unchanged.
#pragma once

#include "backend/module_api.h"
#include "types.hpp"

#include <cstdint>
#include <vector>

namespace ember::cu {

// Bytes a tensor takes on the device (codes and scales each padded to 256 bytes).
size_t weight_device_bytes(const ember_mod_tensor &t);
// Throws EMBER_ERR_UNSUPPORTED for a type the kernels do not run (F32, F16, BF16, Q8_0, Q4_0, Q4_K,
// Q5_K, Q6_K do).
void check_weight_type(const ember_mod_tensor &t, const char *what);
// The device layout of the tensor's bytes, into host memory (out gets weight_device_bytes(t) bytes);
// `base` is where it will live on the device, giving the returned DevWeight's pointers.
DevWeight weight_pack(const ember_mod_tensor &t, uint8_t *out, void *base);

} // namespace ember::cu
