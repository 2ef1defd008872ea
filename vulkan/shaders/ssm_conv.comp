#version 450
// ssm_conv.comp — graph.h's SSM_CONV: a causal depthwise convolution of K taps over each sequence's
// inputs, plus an optional bias (b_off 0xffffffff: none), then SiLU (silu 1) or nothing (0). One invocation per (sequence run, channel), walking the run's tokens in order with the
// channel's window of the K - 1 earlier inputs in registers: the carried window from the state slot (zeros
// for a new sequence), written back after the run's last token (and after each token that keeps its state,
// into that token's slot). A token's sum is the CPU's (cpu/recurrent.cpp):
// the window's products oldest first, then the token's own, each rounded (precise: no fused multiply-add),
// so the result does not depend on how the tokens are split into passes.
#include "common.glsl"
#include "state_runs.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform P {
    uint x_off, y_off, c, k, w_off, runs_off, n_runs, slot_floats, state_off, b_off, silu;
} p;

const uint MAX_W = 63u;  // K <= 64 (vk_program.cpp checks)

void main() {
    uint id = flat_id();
    if (id >= p.n_runs * p.c) return;
    uint c = id % p.c, w = p.k - 1u, wk = p.w_off + c * p.k;
    StateRun r = state_run(p.runs_off, id / p.c);
    float win[MAX_W];
    uint src = r.src < 0 ? 0u : uint(r.src) * p.slot_floats + p.state_off;
    for (uint j = 0u; j < w; ++j) win[j] = r.src < 0 ? 0.0 : sf[src + j * p.c + c];
    for (uint t = r.t0; t < r.t1; ++t) {
        float x = af[p.x_off + t * p.c + c];
        precise float s = 0.0;
        for (uint j = 0u; j < w; ++j) s += wf[wk + j] * win[j];
        s += wf[wk + w] * x;
        if (p.b_off != 0xffffffffu) s += wf[p.b_off + c];
        precise float y = p.silu != 0u ? s / (1.0 + exp(-s)) : s;
        af[p.y_off + t * p.c + c] = y;
        for (uint j = 0u; j + 1u < w; ++j) win[j] = win[j + 1u];
        if (w > 0u) win[w - 1u] = x;
        int ks = kept_slot(p.runs_off, r, t);   // the window after this token kept (a verifying pass)
        if (ks >= 0)
            for (uint j = 0u; j < w; ++j) sf[uint(ks) * p.slot_floats + p.state_off + j * p.c + c] = win[j];
    }
    uint dst = r.dst * p.slot_floats + p.state_off;
    for (uint j = 0u; j < w; ++j) sf[dst + j * p.c + c] = win[j];
}
