#version 450
// quantize_acts.comp — activation rows to 8 bits per block of 32 for the integer matmuls, exactly as the
// CPU does (cpu/quant.cpp quantize_acts): d = max|x| / 127, q = round-to-even(x * 127 / max|x|).
// One invocation per block; q goes out as 8 words of 4 signed bytes per block, d as one float, and the
// sum of the block's codes as one float (the K-quants' offset term needs it).
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P { uint x_off, n_in, n_blocks, q_off, d_off, s_off; } p;

void main() {
    uint b = flat_id();
    if (b >= p.n_blocks) return;
    uint nb = p.n_in / 32u;
    uint t = b / nb, ib = b % nb;
    uint x0 = p.x_off + t * p.n_in + ib * 32u;
    float amax = 0.0;
    for (uint j = 0u; j < 32u; ++j) amax = max(amax, abs(af[x0 + j]));
    precise float id = amax > 0.0 ? 127.0 / amax : 0.0;
    precise float d = amax / 127.0;
    au[p.d_off + b] = floatBitsToUint(d);
    int sum = 0;
    for (uint k = 0u; k < 8u; ++k) {
        uint w = 0u;
        for (uint l = 0u; l < 4u; ++l) {
            precise float v = af[x0 + 4u * k + l] * id;
            int q = int(roundEven(v));
            sum += q;
            w |= (uint(q) & 0xffu) << (8u * l);
        }
        au[p.q_off + b * 8u + k] = w;
    }
    af[p.s_off + b] = float(sum);
}
