#version 450
// attention.comp — causal attention over the paged cache, flash style (as cpu/attention.cpp): one
// workgroup per (query token, head); keys in tiles of 64 positions, one score per invocation, an online
// softmax (running max m, running sum l, output rescaled by e^(m_old - m_new)); each invocation keeps
// up to 8 output dimensions (head_dim <= 512). Token t sees positions 0..io_i[pos_off + t] (its own
// position, or under graph.h's SEQUENCE mask the last position of its sequence in the pass); position j
// is in cache row table[j / block_size] * block_size + j % block_size, where its table starts at
// io_i[io_i[tab_off + t]].
//
// Split-K (decode): with chunk > 0, workgroup (h, t, s) covers keys [s * chunk, (s + 1) * chunk) only and
// writes its unnormalised partial result — running max m, sum l, then head_dim accumulators — to
// af[part_off + ((t * n_head + h) * n_split + s) * (head_dim + 2)]; attention_merge.comp combines the
// splits. A decode token has one query per head: without splitting its keys, a long context would be
// walked by n_head workgroups alone.
//
// graph.h's ATTENTION_EXT options (0 / 0xffffffff: off): a sliding window (token t sees only its last
// `window` positions; the splits then cover the window, not the whole context), a score softcap
// (s = softcap * tanh(s / softcap) before the softmax) and sinks (wf[sink_off + h], one logit per query
// head that joins the normaliser with no value; applied here without a split, by attention_merge.comp
// with one); chunked local attention (token t sees the positions of its own local_chunk-sized chunk)
// and attention temperature (its scores' scale times 1 + temp_scale ln(floor((pos + temp_offset) /
// temp_floor) + 1)).
#include "common.glsl"
#include "kv.glsl"
#define REDUCE_N 64u
#include "reduce.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P {
    uint q_off, o_off, n_head, n_head_kv, head_dim, pos_off, tab_off, block_size;
    uint layer_byte, row_bytes, type;
    float scale;
    uint chunk, n_split, part_off;  // chunk 0: no split
    uint window;                    // 0: none
    float softcap;                  // 0: none
    uint sink_off;                  // 0xffffffff: none
    uint local_chunk;               // 0: none
    float temp_scale, temp_offset;  // temp_scale 0: none
    uint temp_floor;
} p;

shared float q_s[512];
shared float p_s[64];
shared uint row_s[64];

void main() {
    uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
    uint hd = p.head_dim, q_row = p.n_head * hd;
    uint kvh = h / (p.n_head / p.n_head_kv);
    uint e0 = kvh * hd;
    for (uint i = tid; i < hd; i += 64u) q_s[i] = af[p.q_off + t * q_row + h * hd + i];
    barrier();
    uint n_keys = uint(io_i[p.pos_off + t]) + 1u;
    uint table = uint(io_i[p.tab_off + t]);
    uint k_begin = p.window != 0u && n_keys > p.window ? n_keys - p.window : 0u;
    if (p.local_chunk != 0u) k_begin = (n_keys - 1u) / p.local_chunk * p.local_chunk;
    // Attention temperature: this query's scale (attn_options.hpp's expression).
    float scale = p.scale;
    if (p.temp_scale != 0.0 && p.temp_floor != 0u)
        scale *= 1.0 + p.temp_scale * log(floor((float(n_keys - 1u) + p.temp_offset) / float(p.temp_floor)) + 1.0);
    if (p.chunk != 0u) {
        k_begin += gl_WorkGroupID.z * p.chunk;
        n_keys = min(n_keys, k_begin + p.chunk);
    }
    float acc[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    float m = -1.0 / 0.0, l = 0.0;
    for (uint j0 = k_begin; j0 < n_keys; j0 += 64u) {
        uint j = j0 + tid;
        float s = -1.0 / 0.0;
        if (j < n_keys) {
            uint row = uint(io_i[table + j / p.block_size]) * p.block_size + j % p.block_size;
            uint rb = p.layer_byte + row * p.row_bytes;
            row_s[tid] = rb;
            float dot = 0.0;
            for (uint i = 0u; i < hd; ++i) dot += q_s[i] * kv_at(false, p.type, rb, e0 + i);
            s = dot * scale;
            if (p.softcap > 0.0) s = p.softcap * tanh(clamp(s / p.softcap, -10.0, 10.0));
        }
        float m_new = max(m, wg_max(s));
        float corr = exp(m - m_new);
        float pj = j < n_keys ? exp(s - m_new) : 0.0;
        p_s[tid] = pj;
        l = l * corr + wg_sum(pj);  // wg_sum's barriers also publish p_s and row_s
        uint nk = min(64u, n_keys - j0);
        [[unroll]] for (uint k = 0u; k < 8u; ++k) {
            uint i = tid + 64u * k;
            if (i < hd) {
                float a = acc[k] * corr;
                for (uint jj = 0u; jj < nk; ++jj) a += p_s[jj] * kv_at(true, p.type, row_s[jj], e0 + i);
                acc[k] = a;
            }
        }
        m = m_new;
        barrier();
    }
    if (p.chunk != 0u) {
        uint base = p.part_off + ((t * p.n_head + h) * p.n_split + gl_WorkGroupID.z) * (hd + 2u);
        if (tid == 0u) {
            af[base] = m;  // -inf for a split past the query's keys; l = 0 then
            af[base + 1u] = l;
        }
        [[unroll]] for (uint k = 0u; k < 8u; ++k) {
            uint i = tid + 64u * k;
            if (i < hd) af[base + 2u + i] = acc[k];
        }
        return;
    }
    float corr = 1.0;
    if (p.sink_off != 0xffffffffu) {
        float sink = wf[p.sink_off + h], mf = max(m, sink);
        corr = exp(m - mf);
        l = l * corr + exp(sink - mf);
    }
    float inv = l > 0.0 ? corr / l : 0.0;
    [[unroll]] for (uint k = 0u; k < 8u; ++k) {
        uint i = tid + 64u * k;
        if (i < hd) af[p.o_off + t * q_row + h * hd + i] = acc[k] * inv;
    }
}
