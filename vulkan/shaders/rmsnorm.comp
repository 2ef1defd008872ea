#version 450
// rmsnorm.comp — y = x / sqrt(mean(x^2) + eps) * w over groups of n values: a row of gpr * n values holds
// gpr groups (gpr 1: the usual norm; n = head_dim: a per-head norm). One workgroup per group, laid out as
// Recorder::dispatch_flat's rows of groups. The source row of output row r is r, or io_i[rows_off + r] when
// rows_off is set (a gather of the rows whose logits are wanted, folded in). w_off 0xffffffff: no weight.
// With center, graph.h's LAYER_NORM: the group's mean is taken off first, y = (x - mean) / sqrt(var + eps)
// * w + b (b_off 0xffffffff: no bias).
// y may be x: a workgroup reads its whole group (the sum's barriers) before it writes it.
#include "common.glsl"
#define REDUCE_N 64u
#include "reduce.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P { uint x_off, y_off, w_off, n, gpr, n_groups, rows_off; float eps; uint center, b_off; } p;

void main() {
    uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
    if (g >= p.n_groups) return;  // the whole workgroup: no barrier is left waiting
    uint r = g / p.gpr;
    uint src = p.rows_off == 0xffffffffu ? r : uint(io_i[p.rows_off + r]);
    uint x0 = p.x_off + (src * p.gpr + g % p.gpr) * p.n, y0 = p.y_off + g * p.n;
    float mean = 0.0;
    if (p.center != 0u) {
        float sum = 0.0;
        for (uint i = tid; i < p.n; i += 64u) sum += af[x0 + i];
        mean = wg_sum(sum) / float(p.n);
    }
    float ss = 0.0;
    for (uint i = tid; i < p.n; i += 64u) ss += (af[x0 + i] - mean) * (af[x0 + i] - mean);
    ss = wg_sum(ss);
    precise float scale = 1.0 / sqrt(ss / float(p.n) + p.eps);
    for (uint i = tid; i < p.n; i += 64u) {
        precise float v = (af[x0 + i] - mean) * scale;
        if (p.w_off != 0xffffffffu) v *= wf[p.w_off + i];
        if (p.b_off != 0xffffffffu) v += wf[p.b_off + i];
        af[y0 + i] = v;
    }
}
