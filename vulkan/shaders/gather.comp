#version 450
// gather.comp — y[r] = x[io_i[rows_off + r]], rows of `width` floats: the token rows whose logits a pass
// returns, where the program's GATHER_LOGITS is not folded into the norm after it; a MOE's expert inputs,
// each row times its gate io_f[scale_off + r] where the gates scale the inputs (scale_off ~0u: none). One
// invocation per value.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P { uint x_off, y_off, width, rows, rows_off, scale_off; } p;

void main() {
    uint id = flat_id();
    if (id >= p.rows * p.width) return;
    uint r = id / p.width, i = id % p.width;
    float v = af[p.x_off + uint(io_i[p.rows_off + r]) * p.width + i];
    af[p.y_off + id] = p.scale_off == 0xffffffffu ? v : v * io_f[p.scale_off + r];
}
