#version 450
// elementwise.comp — the elementwise ops of the model families (graph.h), one invocation per value,
// selected by `op` (one pipeline for all: each is a line of arithmetic):
//   0 SCALE        y = x * a
//   1 SOFTCAP      y = a * tanh(x / a)
//   2 GEGLU        y = gelu(x) * x2, GELU's tanh form (cpu/elementwise.cpp's geglu)
//   3 SWIGLU_OAI   y = x' sigmoid(a x') (u' + 1), x' = min(x, b), u' = clamp(x2, -b, b) (gpt-oss's experts)
//   4 SIGMOID_MUL  y = x * sigmoid(x2[i / x2_div]) (x2_div 1: a gate per value; the row's width: one a row)
//   5 MUL          y = x * x2
//   6 GELU         y = gelu(x), the tanh form (graph.h's GELU)
//   7 ADD_POS_ROWS y = x + wf[x2_off + io_i[pos_off + i / x2_div] * x2_div + i % x2_div]: the F32 table's row of
//                  the token's position (x2_div: the row's width), from the weights
// y may be x or x2 (each invocation reads its value before writing it; with one gate a row, y is not x2).
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P { uint op, x_off, x2_off, y_off, n; float a, b; uint x2_div, pos_off; } p;

// tanh with its argument clamped: tanh(+-10) is +-1 in float, and the built-in's precision is only
// Vulkan's "inherited from sinh and cosh" formula, which may overflow to NaN for a large argument.
float tanh_safe(float x) { return tanh(clamp(x, -10.0, 10.0)); }

void main() {
    uint i = flat_id();
    if (i >= p.n) return;
    float x = af[p.x_off + i];
    precise float y;
    if (p.op == 0u) {
        y = x * p.a;
    } else if (p.op == 1u) {
        y = p.a * tanh_safe(x / p.a);
    } else if (p.op == 2u) {
        y = 0.5 * x * (1.0 + tanh_safe(0.7978845608028654 * (x + 0.044715 * x * x * x))) * af[p.x2_off + i];
    } else if (p.op == 5u) {
        y = x * af[p.x2_off + i];
    } else if (p.op == 6u) {
        y = 0.5 * x * (1.0 + tanh_safe(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    } else if (p.op == 7u) {
        uint t = i / p.x2_div;
        y = x + wf[p.x2_off + uint(io_i[p.pos_off + t]) * p.x2_div + i % p.x2_div];
    } else if (p.op == 4u) {
        precise float s = 1.0 / (1.0 + exp(-af[p.x2_off + i / p.x2_div]));
        y = x * s;
    } else {
        float g = min(x, p.b), u = clamp(af[p.x2_off + i], -p.b, p.b);
        y = g / (1.0 + exp(-p.a * g)) * (u + 1.0);
    }
    af[p.y_off + i] = y;
}
