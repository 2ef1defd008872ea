// common.glsl — the bindings every Ember compute shader shares, and small helpers.
//
// One descriptor set for everything a context touches: the model's weights (one buffer, each tensor at
// a word offset), the activations (one buffer, each array at a float offset), the K and V caches (all
// layers, the CPU's row layout), the host-visible io buffer (a pass's inputs in, logits out) and the
// recurrent states (the context's state slots, each of the model's state_floats; graph.h). Each
// binding is declared with more than one element type where a shader reads it both ways (aliasing
// one buffer binding with several blocks is legal in Vulkan GLSL). Shapes and offsets come as push
// constants, so one descriptor set per context serves every dispatch.
#extension GL_EXT_control_flow_attributes : enable

layout(std430, set = 0, binding = 0) readonly buffer WeightsU { uint wu[]; };
layout(std430, set = 0, binding = 0) readonly buffer WeightsF { float wf[]; };
layout(std430, set = 0, binding = 1) buffer ActsF { float af[]; };
layout(std430, set = 0, binding = 1) buffer ActsU { uint au[]; };
layout(std430, set = 0, binding = 2) buffer KCache { uint kc[]; };
layout(std430, set = 0, binding = 3) buffer VCache { uint vc[]; };
layout(std430, set = 0, binding = 4) buffer IoI { int io_i[]; };
layout(std430, set = 0, binding = 4) buffer IoF { float io_f[]; };
layout(std430, set = 0, binding = 5) buffer States { float sf[]; };

// Weight layouts (vk_weights.hpp's Layout): T_Q8_0 also serves Q5_0, IQ4_NL, IQ4_XS and MXFP4, T_K
// Q4_1, Q5_1 and the K-quants but Q2_K, which has T_K2.
const uint T_F32 = 0u, T_F16 = 1u, T_Q4_0 = 2u, T_Q8_0 = 8u, T_K2 = 10u, T_K = 12u, T_BF16 = 30u;

// Signed byte k (0..3) of a word.
int sbyte(uint w, uint k) { return bitfieldExtract(int(w), int(8u * k), 8); }

// f32 -> f16 bits, round to nearest even, as core/fp16.hpp's fp32_to_fp16 (so a cache row written here
// has the CPU's bytes: saved states move between backends). packHalf2x16's rounding is not specified.
uint f32_to_f16(float f) {
    uint x = floatBitsToUint(f);
    uint sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) return sign | 0x7c00u | (x > 0x7f800000u ? 0x200u : 0u);
    if (x >= 0x477ff000u) return sign | 0x7c00u;
    if (x < 0x38800000u) {
        if (x < 0x33000000u) return sign;
        uint e = x >> 23;
        uint m = (x & 0x7fffffu) | 0x800000u;
        uint shift = 126u - e;
        uint h = m >> shift;
        uint rem = m & ((1u << shift) - 1u);
        uint mid = 1u << (shift - 1u);
        if (rem > mid || (rem == mid && (h & 1u) != 0u)) ++h;
        return sign | h;
    }
    uint h = (x - 0x38000000u) >> 13;
    uint rem = x & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0u)) ++h;
    return sign | h;
}

float f16_lo(uint w) { return unpackHalf2x16(w).x; }

// The index of an invocation of a one-dimensional grid of 64-wide workgroups that Recorder::dispatch_flat
// laid out as rows of at most 65535 groups (the least maxComputeWorkGroupCount[0] a device may have: a
// prefill's elementwise work can need more groups than that).
uint flat_id() { return (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 64u + gl_LocalInvocationID.x; }
