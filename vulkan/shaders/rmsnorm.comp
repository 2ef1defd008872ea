#version 450
// rmsnorm.comp — y[r] = x[src(r)] / sqrt(mean(x^2) + eps) * w. Workgroup per row. src(r) = r, or
// io_i[rows_off + r] when rows_off is set (the rows whose logits are wanted).
#include "common.glsl"
#define REDUCE_N 64u
#include "reduce.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P { uint x_off, y_off, w_off, dim, rows_off; float eps; } p;

void main() {
    uint r = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
    uint src = p.rows_off == 0xffffffffu ? r : uint(io_i[p.rows_off + r]);
    uint x0 = p.x_off + src * p.dim, y0 = p.y_off + r * p.dim;
    float ss = 0.0;
    for (uint i = tid; i < p.dim; i += 64u) ss += af[x0 + i] * af[x0 + i];
    ss = wg_sum(ss);
    precise float scale = 1.0 / sqrt(ss / float(p.dim) + p.eps);
    for (uint i = tid; i < p.dim; i += 64u) {
        precise float v = af[x0 + i] * scale;
        af[y0 + i] = v * wf[p.w_off + i];
    }
}
