// moe.cpp — graph.h's MOE on a CUDA device (see moe.hpp).
#include "moe.hpp"

#include "backend/graph.h"
#include "core/error.hpp"
#include "cu_check.hpp"
#include "family_kernels.hpp"

#include <cstring>

namespace ember::cu {

void moe_upload_route(const MoeRoute &r, const MoeWork &w, cudaStream_t s, void *staging) {
    // staging: 4 * slots words of host memory that stays untouched until the copies are done (the next
    // MOE node synchronises the stream before it writes there again).
    const size_t slots = r.pos.size(), bytes = slots * 4;
    auto *h = static_cast<uint8_t *>(staging);
    std::memcpy(h, r.token.data(), bytes);
    std::memcpy(h + bytes, r.pos.data(), bytes);
    std::memcpy(h + 2 * bytes, r.gate.data(), bytes);
    EMBER_CU(cudaMemcpyAsync(w.token, h, bytes, cudaMemcpyHostToDevice, s));
    EMBER_CU(cudaMemcpyAsync(w.pos, h + bytes, bytes, cudaMemcpyHostToDevice, s));
    EMBER_CU(cudaMemcpyAsync(w.gate, h + 2 * bytes, bytes, cudaMemcpyHostToDevice, s));
    if (!r.row_gate.empty()) {
        if (!w.row_gate) fail(EMBER_ERR_INTERNAL, "cuda moe: no room for the input gates");
        std::memcpy(h + 3 * bytes, r.row_gate.data(), bytes);
        EMBER_CU(cudaMemcpyAsync(w.row_gate, h + 3 * bytes, bytes, cudaMemcpyHostToDevice, s));
    }
}

void moe_enqueue(Matmul &mm, const MoeExperts &e, const MoeRoute &r, const MoeWork &w, const float *x, float *y,
                 int64_t n_tokens, int k, cudaStream_t s) {
    const int64_t n_in = e.gate[0].n_in, n_ff = e.gate[0].n_out, n_out = e.down[0].n_out;
    for (size_t ex = 0; ex < r.count.size(); ++ex) {
        const int64_t c = r.count[ex], first = r.first[ex];
        if (c == 0) continue;  // an expert no token chose is not read
        gather_rows(reinterpret_cast<const uint8_t *>(x), w.token + first, c, static_cast<size_t>(n_in) * sizeof(float),
                    reinterpret_cast<uint8_t *>(w.xin), s);
        if (!r.row_gate.empty()) moe_scale_rows(w.xin, w.row_gate + first, c, n_in, s);
        // One Input for gate and up: the quantized (or f16) copy of the gathered rows serves both.
        Matmul::Input in{w.xin, c, n_in, w.q, w.x16};
        mm.run(e.gate[ex], in, w.g, e.gate_b ? e.gate_b + ex * n_ff : nullptr, false, s);
        mm.run(e.up[ex], in, w.u, e.up_b ? e.up_b + ex * n_ff : nullptr, false, s);
        switch (e.act) {
        case EMBER_GRAPH_ACT_SILU: swiglu(w.g, w.u, w.g, c * n_ff, s); break;
        case EMBER_GRAPH_ACT_GELU: elementwise(Ew::Geglu, w.g, w.u, w.g, c * n_ff, 0, 0, s); break;
        case EMBER_GRAPH_ACT_SWIGLU_OAI: elementwise(Ew::SwigluOai, w.g, w.u, w.g, c * n_ff, e.alpha, e.limit, s); break;
        default: fail(EMBER_ERR_UNSUPPORTED, "cuda moe: activation %u", e.act);
        }
        Matmul::Input hid{w.g, c, n_ff, w.q, w.x16};
        mm.run(e.down[ex], hid, w.outs + first * n_out, e.down_b ? e.down_b + ex * n_out : nullptr, false, s);
    }
    moe_combine(w.outs, w.pos, w.gate, n_tokens, n_out, k, y, s);
}

} // namespace ember::cu
