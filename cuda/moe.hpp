// moe.hpp — graph.h's MOE on a CUDA device, given the route (moe_route.hpp): each chosen expert's rows
// gathered and multiplied by its gate, up and down matrices in one product each (Matmul::run: a prefill
// reads each chosen expert once), the activation, and the gated sum (moe.cu's moe_combine).
#pragma once

#include "model.hpp"
#include "moe_route.hpp"

namespace ember::cu {

// Each expert stack as matrices (one DevWeight per expert, packed one at a time by weights.hpp) and the
// optional F32 biases [n_expert][width].
struct MoeExperts {
    const DevWeight *gate = nullptr, *up = nullptr, *down = nullptr;  // [n_expert] each
    const float *gate_b = nullptr, *up_b = nullptr, *down_b = nullptr;
    uint32_t act = 0;  // graph.h's ember_graph_act
    float alpha = 0, limit = 0;
};
// Device work buffers: gathered inputs (rows of n_in), gate and up products (rows of n_ff), the experts'
// outputs (slots rows of n_out), the route's lists (token, pos: int32 [slots]; gate: f32 [slots]), and
// the matmul inputs' 8-bit and f16 copies.
struct MoeWork {
    float *xin = nullptr, *g = nullptr, *u = nullptr, *outs = nullptr;
    int32_t *token = nullptr, *pos = nullptr;
    float *gate = nullptr;
    float *row_gate = nullptr;   // experts gated on their input: each gathered row's factor, in `pos` order
    ActQ8 q{};
    uint16_t *x16 = nullptr;
};
// The route's lists from host (pinned or not) to the device work buffers, on s.
void moe_upload_route(const MoeRoute &r, const MoeWork &w, cudaStream_t s, void *staging);
// Enqueues y (n_tokens rows of n_out) = the MOE block of x (rows of n_in) on s.
void moe_enqueue(Matmul &mm, const MoeExperts &e, const MoeRoute &r, const MoeWork &w, const float *x, float *y,
                 int64_t n_tokens, int k, cudaStream_t s);

} // namespace ember::cu
