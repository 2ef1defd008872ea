#version 450
// ssm_scan.comp — graph.h's SSM_SCAN (Mamba-2's selective scan, recurrent form). One workgroup per (head,
// sequence run), walking the run's tokens in order; invocation i keeps row i of the head's state (H[i][k]
// for the d_state k, stored i outer, k inner as in the state slot) in registers for the whole run: read
// from its slot (zeros for a new sequence, another slot's for a copy) before the first token, written back
// after the last (and after each token that keeps its state, into that token's slot). Per token, B and C of the head's group go through shared memory.
//
// The float operations of a token are the CPU's (cpu/recurrent.cpp), in its order: H[i][k] dA + B[k] (x_i s)
// each rounded (precise: no fused multiply-add), the sum over k in 8 lanes reduced in the CPU's order, then
// D x_i added. Nothing depends on how the tokens are split into passes; the results differ from the CPU's
// only by the device's exp and log.
#include "common.glsl"
#include "recurrent.glsl"
#include "state_runs.glsl"
const uint MAX_P = 128u, MAX_N = 128u;  // head_dim and d_state <= 128 (vk_program.cpp checks)
layout(local_size_x = 128) in;
layout(push_constant) uniform P {
    uint xbc_off, dt_off, y_off, n_head, head_dim, n_group, d_state, a_off, d_off, dtb_off;
    uint runs_off, slot_floats, state_off;
} p;

shared float b_s[MAX_N], c_s[MAX_N];

void main() {
    uint h = gl_WorkGroupID.x, i = gl_LocalInvocationID.x, N = p.d_state, P = p.head_dim;
    StateRun r = state_run(p.runs_off, gl_WorkGroupID.y);
    uint g = h / (p.n_head / p.n_group);
    bool mine = i < P;
    uint head = p.state_off + (h * P + i) * N;
    precise float m[MAX_N];
    uint src = r.src < 0 ? 0u : uint(r.src) * p.slot_floats + head;
    [[unroll]] for (uint k = 0u; k < MAX_N; ++k) m[k] = (mine && k < N && r.src >= 0) ? sf[src + k] : 0.0;
    uint inner = p.n_head * P, row = inner + 2u * p.n_group * N;
    float A = wf[p.a_off + h], D = wf[p.d_off + h], dt_bias = wf[p.dtb_off + h];
    for (uint t = r.t0; t < r.t1; ++t) {
        uint x_at = p.xbc_off + t * row;
        barrier();  // the previous token's reads of b_s, c_s are done
        for (uint k = i; k < N; k += gl_WorkGroupSize.x) {
            b_s[k] = af[x_at + inner + g * N + k];
            c_s[k] = af[x_at + inner + (p.n_group + g) * N + k];
        }
        barrier();
        if (!mine) continue;
        precise float z = af[p.dt_off + t * p.n_head + h] + dt_bias;
        precise float s = softplus(z);
        precise float dA = exp(s * A);
        float x = af[x_at + h * P + i];
        precise float xs = x * s;
        precise float acc[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
        [[unroll]] for (uint k = 0u; k < MAX_N; ++k)
            if (k < N) {
                m[k] = m[k] * dA + b_s[k] * xs;
                acc[k & 7u] += m[k] * c_s[k];
            }
        precise float y = lanes_sum(acc) + D * x;
        af[p.y_off + t * inner + h * P + i] = y;
        int ks = kept_slot(p.runs_off, r, t);   // the state after this token kept (a verifying pass)
        if (ks >= 0) {
            uint kd = uint(ks) * p.slot_floats + head;
            [[unroll]] for (uint k = 0u; k < MAX_N; ++k)
                if (k < N) sf[kd + k] = m[k];
        }
    }
    if (!mine) return;
    uint dst = r.dst * p.slot_floats + head;
    [[unroll]] for (uint k = 0u; k < MAX_N; ++k)
        if (k < N) sf[dst + k] = m[k];
}
