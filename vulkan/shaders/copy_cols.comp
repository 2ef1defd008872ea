#version 450
// copy_cols.comp — graph.h's COPY_COLS: y[r][y_col + g*n + i] = x[r][g*stride + off + i] for g < groups,
// i < n, rows of y y_width wide (its other columns untouched). One invocation per value copied.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P { uint x_off, y_off, total, x_width, groups, stride, off, n, y_width, y_col; } p;

void main() {
    uint i = flat_id();
    if (i >= p.total) return;
    uint per_row = p.groups * p.n, r = i / per_row, rem = i % per_row;
    af[p.y_off + r * p.y_width + p.y_col + rem] = af[p.x_off + r * p.x_width + (rem / p.n) * p.stride + p.off + rem % p.n];
}
