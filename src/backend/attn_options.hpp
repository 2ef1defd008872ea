// attn_options.hpp — ATTENTION_EXT's last two options (graph.h): chunked local attention and attention
// temperature, the factor a query at position `pos` is scaled by, 1 + scale * ln(floor((pos + offset) /
// floor_len) + 1) (1 when the option is off). Written once for the CPU and CUDA (which compiles it for
// the device too); Vulkan's attention.comp computes the same expression.
#pragma once

#include "backend/module_api.h"

#include <cmath>
#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define EMBER_TEMP_HD __host__ __device__ __forceinline__
#else
#define EMBER_TEMP_HD inline
#endif

namespace ember {

EMBER_TEMP_HD float attn_temperature(float scale, float offset, uint32_t floor_len, int32_t pos) {
    if (scale == 0.0f || floor_len == 0) return 1.0f;
    const float steps = floorf((static_cast<float>(pos) + offset) / static_cast<float>(floor_len));
    return 1.0f + scale * logf(steps + 1.0f);
}

// The options of a run_op call, zero where the caller's struct predates them.
struct AttnOptions {
    uint32_t local_chunk = 0, temp_floor = 0;
    float temp_scale = 0, temp_offset = 0;
};
inline AttnOptions attn_options(const ember_mod_op &op) {
    AttnOptions o;
    if (op.kind != EMBER_GRAPH_ATTENTION_EXT ||
        op.struct_size < offsetof(ember_mod_op, attn_temp_floor) + sizeof op.attn_temp_floor)
        return o;
    o.local_chunk = op.attn_local_chunk, o.temp_floor = op.attn_temp_floor;
    o.temp_scale = op.attn_temp_scale, o.temp_offset = op.attn_temp_offset;
    return o;
}

} // namespace ember
