// moe.cpp — the mixture-of-experts block (graph.h's MOE) on the CPU: routing, then the experts' products
// batched by expert, so that a prefill of n tokens reads each chosen expert's three matrices once (and
// quantizes each gathered input once for its gate and up products) instead of once per token.
#include "backend/moe_route.hpp"
#include "core/error.hpp"
#include "cpu/kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace ember::cpu {

namespace {

// Expert e's matrix of a 3-D expert tensor: the e-th slice of n_out rows.
WeightView expert(const WeightView &w, int64_t e) {
    WeightView v = w;
    v.data = static_cast<const uint8_t *>(w.data) + static_cast<size_t>(e) * static_cast<size_t>(w.n_out) * w.row_bytes;
    return v;
}

// graph.h's EMBER_GRAPH_ACT_SWIGLU_OAI: the gate clamped from above, the linear half clamped both ways and
// shifted by one.
void swiglu_oai(const float *gate, const float *up, float *out, int64_t n, float alpha, float limit) {
    for (int64_t i = 0; i < n; ++i) {
        const float g = std::min(gate[i], limit), u = std::clamp(up[i], -limit, limit);
        out[i] = g / (1.0f + std::exp(-alpha * g)) * (u + 1.0f);
    }
}

} // namespace

void moe_route(const MoeParams &p, const float *logits, int64_t n_tokens, int32_t *sel, float *weight) {
    // One rule for every backend (backend/moe_route.hpp): the GPU modules route with the same code.
    moe_select(logits, static_cast<size_t>(n_tokens), static_cast<uint32_t>(p.n_expert), static_cast<uint32_t>(p.n_used),
               p.gating, sel, weight, p.sel_bias);
}

void moe(ThreadPool &pool, Scratch &scratch, const MoeParams &p, const float *x, const float *logits, int64_t n_tokens,
         float *y, std::vector<float> &work) {
    const int k = p.n_used;
    const int64_t n_in = p.gate.n_in, n_ff = p.gate.n_out, n_out = p.down.n_out;
    if (k < 1 || k > p.n_expert || p.up.n_in != n_in || p.up.n_out != n_ff || p.down.n_in != n_ff)
        fail(EMBER_ERR_INVALID_ARGUMENT, "cpu moe: %d of %d experts, shapes %lld/%lld/%lld", k, p.n_expert,
             (long long)n_in, (long long)n_ff, (long long)n_out);
    const size_t slots = static_cast<size_t>(n_tokens) * k;
    std::vector<int32_t> sel(slots);
    std::vector<float> weight(slots);
    moe_route(p, logits, n_tokens, sel.data(), weight.data());
    const bool on_input = moe_gate_on_input(p.gating);   // the gates scale the inputs, the outputs sum as they are

    // Work: the gathered inputs [n_tokens][n_in], gate and up [n_tokens][n_ff], the down products
    // [n_tokens][n_out] and each (token, choice)'s expert output [slots][n_out].
    const size_t nt = static_cast<size_t>(n_tokens);
    work.resize(nt * (n_in + 2 * n_ff + n_out) + slots * n_out);
    float *xin = work.data(), *g = xin + nt * n_in, *u = g + nt * n_ff, *d = u + nt * n_ff, *outs = d + nt * n_out;
    std::vector<int32_t> rows;  // the slots routed to one expert, in token order
    for (int e = 0; e < p.n_expert; ++e) {
        rows.clear();
        for (size_t s = 0; s < slots; ++s)
            if (sel[s] == e) rows.push_back(static_cast<int32_t>(s));
        if (rows.empty()) continue;
        const int64_t m = static_cast<int64_t>(rows.size());
        for (int64_t r = 0; r < m; ++r) {
            std::memcpy(xin + r * n_in, x + (rows[r] / k) * n_in, static_cast<size_t>(n_in) * sizeof(float));
            if (on_input)
                for (int64_t i = 0; i < n_in; ++i) xin[r * n_in + i] *= weight[static_cast<size_t>(rows[r])];
        }
        const WeightView ge = expert(p.gate, e), ue = expert(p.up, e), de = expert(p.down, e);
        const WeightView *ws[2] = {&ge, &ue};
        float *ys[2] = {g, u};
        const float *bs[2] = {p.gate_b ? p.gate_b + e * n_ff : nullptr, p.up_b ? p.up_b + e * n_ff : nullptr};
        matmul_multi(pool, scratch, ws, 2, xin, m, ys, bs, p.precise);
        switch (p.act) {
        case EMBER_GRAPH_ACT_SILU: swiglu(g, u, g, m * n_ff); break;
        case EMBER_GRAPH_ACT_GELU: geglu(g, u, g, m * n_ff); break;
        case EMBER_GRAPH_ACT_SWIGLU_OAI: swiglu_oai(g, u, g, m * n_ff, p.alpha, p.limit); break;
        default: fail(EMBER_ERR_UNSUPPORTED, "cpu moe: activation %u", p.act);
        }
        matmul(pool, scratch, de, g, m, d, p.down_b ? p.down_b + e * n_out : nullptr, p.precise);
        for (int64_t r = 0; r < m; ++r)
            std::memcpy(outs + static_cast<size_t>(rows[r]) * n_out, d + r * n_out, static_cast<size_t>(n_out) * sizeof(float));
    }
    // Each token's sum in the order of its choices, whatever order the experts ran in.
    for (int64_t t = 0; t < n_tokens; ++t) {
        float *yt = y + t * n_out;
        std::fill(yt, yt + n_out, 0.0f);
        for (int j = 0; j < k; ++j) {
            const float w = on_input ? 1.0f : weight[t * k + j], *o = outs + (t * k + j) * n_out;
            for (int64_t i = 0; i < n_out; ++i) yt[i] += w * o[i];
        }
    }
}

} // namespace ember::cpu
