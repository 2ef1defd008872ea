// weights.hpp — weights on the device.
//
// F32, F16 and BF16 rows are uploaded as they are in the file. Q8_0, Q4_0 and Q4_K are repacked on the
// way into the tensor cores' tiles (tile_layout.hpp: 16 rows by one block, each lane's fragment words
// together; Q8_0's and Q4_0's f16 scales after all the tiles, Q4_K's heads beside its tiles). The other
// block formats (Q4_1, Q5_0, Q5_1, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_NL, IQ4_XS, MXFP4) keep the file's blocks.
// The values are unchanged.
#pragma once

#include "backend/module_api.h"
#include "types.hpp"

#include <cstdint>
#include <vector>

namespace ember::cu {

// Bytes a tensor takes on the device (codes and scales each padded to 256 bytes).
size_t weight_device_bytes(const ember_mod_tensor &t);
// Throws EMBER_ERR_UNSUPPORTED, naming the type, for one the kernels do not run (weight_at in
// quant_math.hpp lists those they do) or rows that are not whole blocks.
void check_weight_type(const ember_mod_tensor &t, const char *what);
// The device layout of the tensor's bytes, into host memory (out gets weight_device_bytes(t) bytes);
// `base` is where it will live on the device, giving the returned DevWeight's pointers.
DevWeight weight_pack(const ember_mod_tensor &t, uint8_t *out, void *base);

} // namespace ember::cu
