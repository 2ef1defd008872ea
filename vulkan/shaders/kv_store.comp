#version 450
// kv_store.comp — writes each token's K and V rows into its cache row (io_i[rows_off + t], computed on
// the host from the block tables). F16: one invocation per pair of values (one word). Q8_0: one
// invocation per block of 32, quantized as cpu/quant.cpp's quantize_row_q8_0 (d = max|x| / 127 stored
// as f16, q = round-to-even(x / d), clamped to ±127); a block's 34 bytes share words with its
// neighbours, so bytes are merged into the words atomically. Q4_0: likewise one invocation per block, as
// quantize_row_q4_0 (max the element of largest magnitude, the first of equals; d = max / -8 as f16; code
// clamp(round-to-even(x / d + 8), 0, 15), element j < 16 in the low nibble of byte j, j + 16 in its
// high one), its 18 bytes merged the same way.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P { uint k_off, v_off, n_tokens, n_kv, rows_off, layer_byte, row_bytes, type; } p;

void put_byte(bool v, uint off, uint val) {
    uint sh = 8u * (off & 3u);
    if (v) {
        atomicAnd(vc[off >> 2], ~(0xffu << sh));
        atomicOr(vc[off >> 2], val << sh);
    } else {
        atomicAnd(kc[off >> 2], ~(0xffu << sh));
        atomicOr(kc[off >> 2], val << sh);
    }
}

void store_q8(bool v, uint src, uint dst) {
    float amax = 0.0;
    for (uint j = 0u; j < 32u; ++j) amax = max(amax, abs(af[src + j]));
    precise float dd = amax / 127.0;
    uint dh = f32_to_f16(dd);
    float d = unpackHalf2x16(dh).x;
    precise float id = d != 0.0 ? 1.0 / d : 0.0;
    put_byte(v, dst, dh & 0xffu);
    put_byte(v, dst + 1u, dh >> 8);
    for (uint j = 0u; j < 32u; ++j) {
        precise float x = af[src + j] * id;
        int q = clamp(int(roundEven(x)), -127, 127);
        put_byte(v, dst + 2u + j, uint(q) & 0xffu);
    }
}

void store_q4(bool v, uint src, uint dst) {
    float amax = 0.0, mx = 0.0;
    for (uint j = 0u; j < 32u; ++j) {
        float x = af[src + j];
        if (abs(x) > amax) {
            amax = abs(x);
            mx = x;
        }
    }
    precise float dd = mx / -8.0;
    uint dh = f32_to_f16(dd);
    float d = unpackHalf2x16(dh).x;
    precise float id = d != 0.0 ? 1.0 / d : 0.0;
    put_byte(v, dst, dh & 0xffu);
    put_byte(v, dst + 1u, dh >> 8);
    for (uint j = 0u; j < 16u; ++j) {
        precise float x0 = af[src + j] * id + 8.0;
        precise float x1 = af[src + j + 16u] * id + 8.0;
        uint q0 = uint(clamp(int(roundEven(x0)), 0, 15)), q1 = uint(clamp(int(roundEven(x1)), 0, 15));
        put_byte(v, dst + 2u + j, q0 | (q1 << 4));
    }
}

void main() {
    uint id = flat_id();
    uint per_tok = p.type == T_F16 ? p.n_kv / 2u : p.n_kv / 32u;
    if (id >= p.n_tokens * per_tok) return;
    uint t = id / per_tok, e = id % per_tok;
    uint row = p.layer_byte + uint(io_i[p.rows_off + t]) * p.row_bytes;
    uint src = t * p.n_kv;
    if (p.type == T_F16) {
        uint w = (row >> 2) + e;
        kc[w] = f32_to_f16(af[p.k_off + src + 2u * e]) | (f32_to_f16(af[p.k_off + src + 2u * e + 1u]) << 16);
        vc[w] = f32_to_f16(af[p.v_off + src + 2u * e]) | (f32_to_f16(af[p.v_off + src + 2u * e + 1u]) << 16);
    } else if (p.type == T_Q4_0) {
        store_q4(false, p.k_off + src + 32u * e, row + 18u * e);
        store_q4(true, p.v_off + src + 32u * e, row + 18u * e);
    } else {
        store_q8(false, p.k_off + src + 32u * e, row + 34u * e);
        store_q8(true, p.v_off + src + 32u * e, row + 34u * e);
    }
}
