#version 450
// get_rows.comp — the embedding lookup: y[t] = row io_i[ids_off + t] of W, dequantized (layouts as in
// matmul.comp; `type` is the layout). One invocation per value.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P { uint w_off, type, n_in, n_out, ids_off, y_off, n_tokens; } p;

void main() {
    uint id = flat_id();
    if (id >= p.n_tokens * p.n_in) return;
    uint t = id / p.n_in, i = id % p.n_in;
    uint r = uint(io_i[p.ids_off + t]);
    float v;
    if (p.type == T_F32) {
        v = wf[p.w_off + r * p.n_in + i];
    } else if (p.type == T_F16) {
        vec2 w = unpackHalf2x16(wu[p.w_off + r * ((p.n_in + 1u) / 2u) + i / 2u]);
        v = (i & 1u) != 0u ? w.y : w.x;
    } else if (p.type == T_BF16) {
        uint w = wu[p.w_off + r * ((p.n_in + 1u) / 2u) + i / 2u];
        v = uintBitsToFloat((i & 1u) != 0u ? w & 0xffff0000u : w << 16);
    } else if (p.type == T_K || p.type == T_K2) {
        // K2: as K with the offset of each half (two words) before the codes.
        uint k2 = p.type == T_K2 ? 1u : 0u;
        uint nb = p.n_in / 32u, wb = p.w_off + (r * nb + i / 32u) * (11u + k2), j = i % 32u;
        float d = uintBitsToFloat(wu[wb]), mn = uintBitsToFloat(wu[wb + 2u + k2 * (j / 16u)]);
        float ds = d * float(sbyte(wu[wb + 1u], j / 16u));
        v = ds * float(sbyte(wu[wb + 3u + k2 + j / 4u], j % 4u)) - mn;
    } else {
        uint nb = p.n_in / 32u, ib = i / 32u, j = i % 32u;
        float d = wf[p.w_off + r * nb + ib];
        uint q0 = p.w_off + p.n_out * nb;
        if (p.type == T_Q8_0) {
            v = d * float(sbyte(wu[q0 + (r * nb + ib) * 8u + j / 4u], j % 4u));
        } else {
            uint l = j % 16u;
            uint b = (wu[q0 + (r * nb + ib) * 4u + l / 4u] >> (8u * (l % 4u))) & 0xffu;
            v = d * float(int(j < 16u ? b & 15u : b >> 4) - 8);
        }
    }
    af[p.y_off + id] = v;
}
