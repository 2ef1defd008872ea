#version 450
// gated_delta.comp — graph.h's GATED_DELTA (Gated DeltaNet's recurrent form). One workgroup per (value head,
// sequence run), walking the run's tokens in order; invocation j keeps row j of the head's state (M[i][j]
// for the S key dims i, stored j outer, i inner as in the state slot) in registers for the whole run: the
// state is read from its slot (zeros for a new sequence, another slot's for a copy) before the first token
// and written back after the last (and after each token that keeps its state, into that token's slot). Per token the raw q and k of the head's key head go through shared
// memory; each invocation forms their norms itself (the same sums in every invocation), so one barrier
// pair per token suffices.
//
// The float operations of a token are the CPU's (cpu/recurrent.cpp), in its order: sums in 8 lanes
// (element i to lane i % 8) reduced as ((0+1)+(2+3))+((4+5)+(6+7)), every product and sum rounded on its
// own (precise: no fused multiply-add). Nothing depends on how tokens are split into passes or runs into
// workgroups; the results differ from the CPU's only by the device's exp, log, sqrt and division.
#include "common.glsl"
#include "recurrent.glsl"
#include "state_runs.glsl"
const uint MAX_S = 128u;  // head_dim <= 128 (vk_program.cpp checks): the rows fit the registers
layout(local_size_x = 128) in;
layout(push_constant) uniform P {
    uint qkv_off, a_off, b_off, y_off, n_head, n_head_k, s, grouped, dt_off, decay_off;
    float eps, scale;
    uint runs_off, slot_floats, state_off;
} p;

shared float q_s[MAX_S], k_s[MAX_S];

// sum_i x[i]^2 over the shared raw q (of_k false) or k row: the CPU's dot of the row with itself.
float self_dot(bool of_k) {
    precise float acc[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    [[unroll]] for (uint i = 0u; i < MAX_S; ++i)
        if (i < p.s) {
            float x = of_k ? k_s[i] : q_s[i];
            acc[i & 7u] += x * x;
        }
    return lanes_sum(acc);
}

void main() {
    uint h = gl_WorkGroupID.x, j = gl_LocalInvocationID.x, S = p.s;
    StateRun r = state_run(p.runs_off, gl_WorkGroupID.y);
    uint hk = p.grouped != 0u ? h / (p.n_head / p.n_head_k) : h % p.n_head_k;
    bool mine = j < S;
    uint head = p.state_off + h * S * S + j * S;
    precise float m[MAX_S];
    uint src = r.src < 0 ? 0u : uint(r.src) * p.slot_floats + head;
    [[unroll]] for (uint i = 0u; i < MAX_S; ++i) m[i] = (mine && i < S && r.src >= 0) ? sf[src + i] : 0.0;
    uint row = (2u * p.n_head_k + p.n_head) * S;
    float dt = wf[p.dt_off + h], decay = wf[p.decay_off + h];
    for (uint t = r.t0; t < r.t1; ++t) {
        uint x = p.qkv_off + t * row;
        barrier();  // the previous token's reads of q_s, k_s are done
        if (mine) {
            q_s[j] = af[x + hk * S + j];
            k_s[j] = af[x + (p.n_head_k + hk) * S + j];
        }
        barrier();
        if (!mine) continue;
        precise float inv_q = p.scale / max(sqrt(self_dot(false)), p.eps);
        precise float inv_k = 1.0 / max(sqrt(self_dot(true)), p.eps);
        precise float z = af[p.a_off + t * p.n_head + h] + dt;
        precise float sp = softplus(z);
        precise float g = exp(sp * decay);
        precise float beta = 1.0 / (1.0 + exp(-af[p.b_off + t * p.n_head + h]));
        precise float acc[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
        [[unroll]] for (uint i = 0u; i < MAX_S; ++i)
            if (i < S) {
                m[i] *= g;
                acc[i & 7u] += m[i] * (k_s[i] * inv_k);
            }
        precise float mk = lanes_sum(acc);
        precise float d = beta * (af[x + (2u * p.n_head_k + h) * S + j] - mk);
        acc = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
        [[unroll]] for (uint i = 0u; i < MAX_S; ++i)
            if (i < S) {
                m[i] += (k_s[i] * inv_k) * d;
                acc[i & 7u] += m[i] * (q_s[i] * inv_q);
            }
        precise float o = lanes_sum(acc);
        af[p.y_off + t * p.n_head * S + h * S + j] = o;
        int ks = kept_slot(p.runs_off, r, t);   // the state after this token kept (a verifying pass)
        if (ks >= 0) {
            uint kd = uint(ks) * p.slot_floats + head;
            [[unroll]] for (uint i = 0u; i < MAX_S; ++i)
                if (i < S) sf[kd + i] = m[i];
        }
    }
    if (!mine) return;
    uint dst = r.dst * p.slot_floats + head;
    [[unroll]] for (uint i = 0u; i < MAX_S; ++i)
        if (i < S) sf[dst + i] = m[i];
}
