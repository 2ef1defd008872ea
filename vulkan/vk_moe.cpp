// vk_moe.cpp — graph.h's MOE on a Vulkan device (see vk_moe.hpp).
#include "vk_moe.hpp"

#include "backend/graph.h"
#include "core/error.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <tuple>

namespace ember::vk {

MoeRoute moe_route(const float *logits, uint32_t n_tokens, uint32_t n_expert, uint32_t k, uint32_t gating,
                   const float *sel_bias) {
    if (k == 0 || k > n_expert) fail(EMBER_ERR_INVALID_ARGUMENT, "vulkan moe: %u of %u experts", k, n_expert);
    return moe_route_rows(logits, n_tokens, n_expert, k, gating, sel_bias);
}

void moe_put_route(const MoeRoute &route, const MoeIo &at, int32_t *io) {
    std::memcpy(io + at.token, route.token.data(), route.token.size() * 4);
    std::memcpy(io + at.pos, route.pos.data(), route.pos.size() * 4);
    std::memcpy(io + at.gate, route.gate.data(), route.gate.size() * 4);
    if (!route.row_gate.empty()) {
        if (at.row_gate == kNone) fail(EMBER_ERR_INTERNAL, "vulkan moe: no room for the input gates");
        std::memcpy(io + at.row_gate, route.row_gate.data(), route.row_gate.size() * 4);
    }
}

void moe_record(Recorder &r, const MoeExperts &e, const MoeRoute &route, const MoeIo &io, const MoeWork &w,
                uint32_t x_off, uint32_t y_off, uint32_t n_tokens, uint32_t k) {
    const uint32_t n_in = e.gate.n_in, n_ff = e.gate.n_out, n_out = e.down.n_out;
    auto at = [](WeightRef m, uint32_t stride, uint32_t ex) {
        m.off += ex * stride;
        return m;
    };
    for (uint32_t ex = 0; ex < route.count.size(); ++ex) {
        const uint32_t c = route.count[ex], first = route.first[ex];
        if (c == 0) continue;  // an expert no token chose is not read
        r.gather(x_off, w.xin, n_in, c, io.token + first, route.row_gate.empty() ? kNone : io.row_gate + first);
        const WeightRef g = at(e.gate, e.gate_stride, ex), u = at(e.up, e.up_stride, ex), dn = at(e.down, e.down_stride, ex);
        // The gate and up products share one 8-bit copy of the gathered rows when both are quantized.
        bool have_q = false;
        for (auto [m, y, b] : {std::tuple{g, w.g, e.gate_b}, std::tuple{u, w.u, e.up_b}}) {
            if (m.quantized() && !have_q) r.quantize(w.xin, n_in, c, w.q), have_q = true;
            r.matmul(m, w.xin, w.q, c, y, b == kNone ? kNone : b + ex * n_ff, false);
        }
        switch (e.act) {
        case EMBER_GRAPH_ACT_SILU: r.swiglu(w.g, w.u, w.g, c * n_ff); break;
        case EMBER_GRAPH_ACT_GELU: r.elementwise(Recorder::Ew::Geglu, w.g, w.u, w.g, c * n_ff); break;
        case EMBER_GRAPH_ACT_SWIGLU_OAI: r.elementwise(Recorder::Ew::SwigluOai, w.g, w.u, w.g, c * n_ff, e.alpha, e.limit); break;
        default: fail(EMBER_ERR_UNSUPPORTED, "vulkan moe: activation %u", e.act);
        }
        if (dn.quantized()) r.quantize(w.g, n_ff, c, w.q);
        r.matmul(dn, w.g, w.q, c, w.outs + first * n_out, e.down_b == kNone ? kNone : e.down_b + ex * n_out, false);
    }
    r.moe_combine(w.outs, y_off, n_tokens, n_out, k, io.pos, io.gate);
}

} // namespace ember::vk
