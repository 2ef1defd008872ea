// cu_util.cuh — small device helpers shared by the kernels.
#pragma once

#include "quant_math.hpp"

#include <cuda_fp16.h>

#include <cstdint>

namespace ember::cu {

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ float half_bits_to_float(uint16_t h) { return f16_bits_to_f32(h); }
__device__ __forceinline__ float bf16_bits_to_float(uint16_t h) { return bf16_bits_to_f32(h); }

inline unsigned blocks_for(int64_t n, int per) { return static_cast<unsigned>((n + per - 1) / per); }

} // namespace ember::cu
