#version 450
// moe_combine.comp — the last step of graph.h's MOE: y[t] = sum_j g[t][j] * out[slot(t, j)], the experts'
// outputs (rows of n_out, grouped by expert at outs_off) weighted by the gates, summed in the order of
// each token's choices (largest logit first, as the CPU). io_i[pos_off + t * k + j]: the row of choice j of
// token t among the experts' outputs; io_f[w_off + t * k + j]: its gate. One invocation per output value.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P { uint outs_off, y_off, n_tokens, n_out, k, pos_off, w_off; } p;

void main() {
    uint id = flat_id();
    if (id >= p.n_tokens * p.n_out) return;
    uint t = id / p.n_out, i = id % p.n_out;
    precise float y = 0.0;
    for (uint j = 0u; j < p.k; ++j) {
        uint s = t * p.k + j;
        y += io_f[p.w_off + s] * af[p.outs_off + uint(io_i[p.pos_off + s]) * p.n_out + i];
    }
    af[p.y_off + id] = y;
}
