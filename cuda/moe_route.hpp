// moe_route.hpp — graph.h's MOE routing on the host (plain C++, tested on the CPU by
// tests/test_cuda_host.cpp): which experts each token uses and with what gates, as work rows grouped by
// expert so that each chosen expert's rows are multiplied in one product.
//
// The CUDA backend routes on the host from the router logits read back once per MOE node and pass: the
// expert products are Matmul::run's, which take their row counts on the host (cuBLASLt's shapes, the
// gemv grid). One stream synchronisation per MOE layer of a pass, not per token; a decode step of a MOE
// model is therefore not captured as a CUDA graph. Device-side routing with per-expert row counts read
// by the kernels is the follow-up.
#pragma once

#include <cstdint>
#include <vector>

namespace ember::cu {

struct MoeRoute {
    std::vector<int32_t> token;          // [slots] the token row of each work row
    std::vector<uint32_t> first, count;  // [n_expert] each expert's work rows
    std::vector<int32_t> pos;            // [n_tokens * k] choice j of token t -> its work row
    std::vector<float> gate;             // [n_tokens * k] its gate weight
};

// The k largest logits of each token (the lower index first among equals), largest first; gates by
// softmax over the chosen (EMBER_GRAPH_MOE_GATE_SOFTMAX_TOPK) or over all (EMBER_GRAPH_MOE_GATE_SOFTMAX):
// cpu/moe.cpp's moe_route, sums in double.
MoeRoute moe_route(const float *logits, uint32_t n_tokens, uint32_t n_expert, uint32_t k, uint32_t gating);

} // namespace ember::cu
