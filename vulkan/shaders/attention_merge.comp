#version 450
// attention_merge.comp — combines attention.comp's split-K partials: with M = max_s m_s,
// out_i = sum_s e^(m_s - M) acc_s,i / sum_s e^(m_s - M) l_s. One invocation per output value. A sink
// (sink_off != 0xffffffff: wf[sink_off + h], graph.h's ATTENTION_EXT) joins M and the normaliser as a
// split of l = 1 and no value.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P { uint part_off, o_off, n_tokens, n_head, head_dim, n_split, sink_off; } p;

void main() {
    uint id = flat_id();
    uint hd = p.head_dim;
    if (id >= p.n_tokens * p.n_head * hd) return;
    uint i = id % hd, th = id / hd;  // th = t * n_head + h
    uint stride = hd + 2u, base = p.part_off + th * p.n_split * stride;
    float M = -1.0 / 0.0, sink = 0.0;
    if (p.sink_off != 0xffffffffu) {
        sink = wf[p.sink_off + th % p.n_head];
        M = sink;
    }
    for (uint s = 0u; s < p.n_split; ++s) M = max(M, af[base + s * stride]);
    float L = p.sink_off != 0xffffffffu ? exp(sink - M) : 0.0, o = 0.0;
    for (uint s = 0u; s < p.n_split; ++s) {
        float ms = af[base + s * stride];
        if (ms == -1.0 / 0.0) continue;  // an empty split
        float w = exp(ms - M);
        L += w * af[base + s * stride + 1u];
        o += w * af[base + s * stride + 2u + i];
    }
    af[p.o_off + id] = L > 0.0 ? o / L : 0.0;
}
