#version 450
// add.comp — y += x, elementwise: the program's ADD where it is not folded into the matmul before it
// (the same one rounding as matmul.comp's accumulate). One invocation per value.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P { uint y_off, x_off, n; } p;

void main() {
    uint i = flat_id();
    if (i >= p.n) return;
    af[p.y_off + i] = af[p.y_off + i] + af[p.x_off + i];
}
