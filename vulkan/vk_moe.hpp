// vk_moe.hpp — graph.h's MOE on a Vulkan device: the routing (on the host, from the router logits read
// back once per MOE node and pass) and the recording of the experts' products, batched by expert.
//
// Why the host routes: the expert products are matmul.comp's, which run a row count and offsets given as
// push constants; routing on the device would need indirect dispatches whose rows the shader reads from a
// buffer (a follow-up). Reading back n_tokens x n_expert logits costs one submit and wait per MOE layer of
// a pass, not per token; in exchange every chosen expert is read once per pass, whatever the weight type,
// with the exact products of a MATMUL.
#pragma once

#include "vk_exec.hpp"
#include "backend/moe_route.hpp"

#include <cstdint>
#include <vector>

namespace ember::vk {

// Which experts each token uses, as work rows grouped by expert: backend/moe_route.hpp's rule, the CPU's.
using ember::MoeRoute;
// moe_route_rows after checking 1 <= k <= n_expert.
MoeRoute moe_route(const float *logits, uint32_t n_tokens, uint32_t n_expert, uint32_t k, uint32_t gating,
                   const float *sel_bias = nullptr);

// The experts as uploaded: each 3-D tensor is n_expert matrices packed one after another, stride words
// apart (vk_weights.hpp's layout, one matrix at a time).
struct MoeExperts {
    WeightRef gate, up, down;       // expert 0's matrices
    uint32_t gate_stride = 0, up_stride = 0, down_stride = 0;
    uint32_t gate_b = kNone, up_b = kNone, down_b = kNone;  // word offsets of [n_expert][width] biases
    uint32_t act = 0;               // graph.h's ember_graph_act
    float alpha = 0, limit = 0;
};
// Work buffers (float offsets in the activations): gathered inputs (rows of n_in), gate and up products
// (rows of n_ff), the experts' outputs (n_tokens * k rows of n_out), and the 8-bit scratch.
struct MoeWork {
    uint32_t xin = 0, g = 0, u = 0, outs = 0;
    Recorder::QActs q{};
};
// Where the route's lists sit in the io buffer (word offsets): route.token, route.pos, route.gate, and
// route.row_gate where the gates scale the inputs (kNone: they do not).
struct MoeIo {
    uint32_t token = 0, pos = 0, gate = 0, row_gate = kNone;
};
// Writes the route's lists at io (the io buffer's words) as MoeIo says.
void moe_put_route(const MoeRoute &route, const MoeIo &at, int32_t *io);
// Records y (n_tokens rows of n_out) = the MOE block of x (rows of n_in), given the route.
void moe_record(Recorder &r, const MoeExperts &e, const MoeRoute &route, const MoeIo &io, const MoeWork &w,
                uint32_t x_off, uint32_t y_off, uint32_t n_tokens, uint32_t k);

} // namespace ember::vk
