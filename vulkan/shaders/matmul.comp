#version 450
// matmul.comp — y[t][o] (+)= W[o]·x[t] + bias[o] for one weight type (TYPE, a compile-time define:
// one SPIR-V module per type). One invocation per output row and tile of up to 8 tokens, each sum
// taken in order: no shared memory and no barriers, which suits lavapipe (invocations are SIMD lanes, a
// workgroup barrier costs a coroutine switch) and keeps the sum order fixed. Weights are in the
// module's repacked layout (vk_weights.hpp; TYPE is its Layout): F32 rows of floats; F16 and BF16 (30)
// rows of 16-bit pairs (padded to whole words); Q8 and Q4 all the row-block scales as floats first
// (n_out * nb), then the codes, 8 (Q8: signed bytes) or 4 (Q4: Q4_0's nibbles) words per block; K (12)
// 11 words per block of 32: d (f32), two signed 8-bit sub-block scales (one per 16 values), the block's
// offset (f32), then 8 words of signed 8-bit codes; K2 (10, Q2_K) as K with an offset per 16 values
// (12 words). Quantized weights multiply the 8-bit
// activations of quantize_acts.comp with exact integer block sums, the scales applied per block in
// float, as on the CPU.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P {
    uint w_off, n_in, n_out, x_off;  // x_off: f32 rows (float types) or q words (quantized)
    uint xd_off, y_off, bias_off, accumulate;  // bias_off 0xffffffff: none
    uint y_stride, o_base;  // o_base: dispatches of more than 65535 groups go in chunks
    uint xs_off;            // the activation blocks' code sums (K-quants)
    uint n_tokens;
} p;

// Each invocation computes one output row for a tile of up to TT tokens: the weights are read once per
// tile rather than once per token (the matrix-matrix case of prefill; decode is a tile of one).
#define TT 8u

// A word of two 16-bit weights (F16 or BF16, low half first).
vec2 unpack_pair(uint w) {
#if TYPE == 30
    return vec2(uintBitsToFloat(w << 16), uintBitsToFloat(w & 0xffff0000u));
#else
    return unpackHalf2x16(w);
#endif
}

void main() {
    uint o = p.o_base + gl_GlobalInvocationID.x, t0 = gl_GlobalInvocationID.y * TT;
    if (o >= p.n_out) return;
    uint nt = min(TT, p.n_tokens - t0);
    float acc[TT];
    [[unroll]] for (uint j = 0u; j < TT; ++j) acc[j] = 0.0;
#if TYPE == 0
    uint w0 = p.w_off + o * p.n_in;
    for (uint i = 0u; i < p.n_in; ++i) {
        float w = wf[w0 + i];
        for (uint j = 0u; j < nt; ++j) acc[j] += w * af[p.x_off + (t0 + j) * p.n_in + i];
    }
#elif TYPE == 1 || TYPE == 30
    uint rw = (p.n_in + 1u) / 2u;
    uint w0 = p.w_off + o * rw;
    for (uint k = 0u; k < p.n_in / 2u; ++k) {
        vec2 w = unpack_pair(wu[w0 + k]);
        for (uint j = 0u; j < nt; ++j) {
            uint x0 = p.x_off + (t0 + j) * p.n_in + 2u * k;
            acc[j] += w.x * af[x0];
            acc[j] += w.y * af[x0 + 1u];
        }
    }
    if ((p.n_in & 1u) != 0u)
        for (uint j = 0u; j < nt; ++j)
            acc[j] += unpack_pair(wu[w0 + rw - 1u]).x * af[p.x_off + (t0 + j) * p.n_in + p.n_in - 1u];
#elif TYPE == 10
    // K with an offset per half: the activations' half sums are taken here (quantize_acts.comp keeps
    // only whole-block sums).
    uint nb = p.n_in / 32u;
    for (uint ib = 0u; ib < nb; ++ib) {
        uint wb = p.w_off + (o * nb + ib) * 12u;
        uint wq[8];
        [[unroll]] for (uint k = 0u; k < 8u; ++k) wq[k] = wu[wb + 4u + k];
        uint sc = wu[wb + 1u];
        float d = uintBitsToFloat(wu[wb]), mn0 = uintBitsToFloat(wu[wb + 2u]), mn1 = uintBitsToFloat(wu[wb + 3u]);
        for (uint j = 0u; j < nt; ++j) {
            uint xq = p.x_off + ((t0 + j) * nb + ib) * 8u;
            int s0 = 0, s1 = 0, x0 = 0, x1 = 0;
            [[unroll]] for (uint k = 0u; k < 4u; ++k) {
                uint x = au[xq + k];
                [[unroll]] for (uint l = 0u; l < 4u; ++l) { s0 += sbyte(wq[k], l) * sbyte(x, l); x0 += sbyte(x, l); }
            }
            [[unroll]] for (uint k = 4u; k < 8u; ++k) {
                uint x = au[xq + k];
                [[unroll]] for (uint l = 0u; l < 4u; ++l) { s1 += sbyte(wq[k], l) * sbyte(x, l); x1 += sbyte(x, l); }
            }
            int isum = s0 * sbyte(sc, 0u) + s1 * sbyte(sc, 1u);
            float dx = af[p.xd_off + (t0 + j) * nb + ib];
            acc[j] += float(isum) * (d * dx);
            acc[j] -= dx * (mn0 * float(x0) + mn1 * float(x1));
        }
    }
#elif TYPE == 12
    // As the CPU's K-quant kernels: the two halves' integer sums weighted by their scales in integers,
    // times d * d_x, minus the offset times d_x * sum(x codes).
    uint nb = p.n_in / 32u;
    for (uint ib = 0u; ib < nb; ++ib) {
        uint wb = p.w_off + (o * nb + ib) * 11u;
        uint wq[8];
        [[unroll]] for (uint k = 0u; k < 8u; ++k) wq[k] = wu[wb + 3u + k];
        uint sc = wu[wb + 1u];
        float d = uintBitsToFloat(wu[wb]), mn = uintBitsToFloat(wu[wb + 2u]);
        for (uint j = 0u; j < nt; ++j) {
            uint xq = p.x_off + ((t0 + j) * nb + ib) * 8u;
            int s0 = 0, s1 = 0;
            [[unroll]] for (uint k = 0u; k < 4u; ++k) {
                uint x = au[xq + k];
                [[unroll]] for (uint l = 0u; l < 4u; ++l) s0 += sbyte(wq[k], l) * sbyte(x, l);
            }
            [[unroll]] for (uint k = 4u; k < 8u; ++k) {
                uint x = au[xq + k];
                [[unroll]] for (uint l = 0u; l < 4u; ++l) s1 += sbyte(wq[k], l) * sbyte(x, l);
            }
            int isum = s0 * sbyte(sc, 0u) + s1 * sbyte(sc, 1u);
            float dx = af[p.xd_off + (t0 + j) * nb + ib];
            acc[j] += float(isum) * (d * dx);
            acc[j] -= mn * (dx * af[p.xs_off + (t0 + j) * nb + ib]);
        }
    }
#else
    uint nb = p.n_in / 32u;
#if TYPE == 8
    const uint WPB = 8u;
#else
    const uint WPB = 4u;
#endif
    uint q0 = p.w_off + p.n_out * nb + o * nb * WPB;
    for (uint ib = 0u; ib < nb; ++ib) {
        uint wq[WPB];
        [[unroll]] for (uint k = 0u; k < WPB; ++k) wq[k] = wu[q0 + ib * WPB + k];
        float dw = wf[p.w_off + o * nb + ib];
        for (uint j = 0u; j < nt; ++j) {
            uint xq = p.x_off + ((t0 + j) * nb + ib) * 8u;
            int s = 0;
#if TYPE == 8
            [[unroll]] for (uint k = 0u; k < 8u; ++k) {
                uint x = au[xq + k];
                [[unroll]] for (uint l = 0u; l < 4u; ++l) s += sbyte(wq[k], l) * sbyte(x, l);
            }
#else
            [[unroll]] for (uint k = 0u; k < 4u; ++k) {
                uint xl = au[xq + k], xh = au[xq + 4u + k];
                [[unroll]] for (uint l = 0u; l < 4u; ++l) {
                    uint b = (wq[k] >> (8u * l)) & 0xffu;
                    s += (int(b & 15u) - 8) * sbyte(xl, l) + (int(b >> 4) - 8) * sbyte(xh, l);
                }
            }
#endif
            acc[j] += float(s) * (dw * af[p.xd_off + (t0 + j) * nb + ib]);
        }
    }
#endif
    float bias = p.bias_off != 0xffffffffu ? wf[p.bias_off + o] : 0.0;
    for (uint j = 0u; j < nt; ++j) {
        float v = acc[j];
        if (p.bias_off != 0xffffffffu) v += bias;
        uint yi = p.y_off + (t0 + j) * p.y_stride + o;
        af[yi] = p.accumulate != 0u ? af[yi] + v : v;
    }
}
