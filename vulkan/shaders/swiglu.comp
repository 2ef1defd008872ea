#version 450
// swiglu.comp — out = silu(gate) * up, elementwise.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P { uint g_off, u_off, o_off, n; } p;

void main() {
    uint i = flat_id();
    if (i >= p.n) return;
    float g = af[p.g_off + i];
    precise float y = g / (1.0 + exp(-g)) * af[p.u_off + i];
    af[p.o_off + i] = y;
}
