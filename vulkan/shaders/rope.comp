#version 450
// rope.comp — rotary embedding in place. The cosines and sines come from the host, computed in double
// like the CPU's (cpu/rope.cpp): io_f[cs_off + t * n_rot + i] = cos, [... + n_rot/2 + i] = sin.
// One invocation per (token, head, pair).
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P { uint x_off, n_tokens, n_heads, head_dim, n_rot, neox, cs_off; } p;

void main() {
    uint half_rot = p.n_rot / 2u;
    uint id = flat_id();
    if (id >= p.n_tokens * p.n_heads * half_rot) return;
    uint i = id % half_rot, h = (id / half_rot) % p.n_heads, t = id / (half_rot * p.n_heads);
    uint base = p.x_off + (t * p.n_heads + h) * p.head_dim;
    uint a = p.neox != 0u ? base + i : base + 2u * i;
    uint b = p.neox != 0u ? a + half_rot : a + 1u;
    float c = io_f[p.cs_off + t * p.n_rot + i], s = io_f[p.cs_off + t * p.n_rot + half_rot + i];
    float x0 = af[a], x1 = af[b];
    precise float y0 = x0 * c - x1 * s;
    precise float y1 = x0 * s + x1 * c;
    af[a] = y0;
    af[b] = y1;
}
