#version 450
// gather.comp — y[r] = x[io_i[rows_off + r]], rows of `width` floats: the token rows whose logits a pass
// returns, where the program's GATHER_LOGITS is not folded into the norm after it. One invocation per value.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P { uint x_off, y_off, width, rows, rows_off; } p;

void main() {
    uint id = flat_id();
    if (id >= p.rows * p.width) return;
    uint r = id / p.width, i = id % p.width;
    af[p.y_off + id] = af[p.x_off + uint(io_i[p.rows_off + r]) * p.width + i];
}
