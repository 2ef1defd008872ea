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

#include "backend/moe_route.hpp"

#include <cstdint>
#include <vector>

namespace ember::cu {

using ember::MoeRoute;

// backend/moe_route.hpp's rule (the CPU's, ties included) after checking 1 <= k <= n_expert.
MoeRoute moe_route(const float *logits, uint32_t n_tokens, uint32_t n_expert, uint32_t k, uint32_t gating,
                   const float *sel_bias = nullptr);

} // namespace ember::cu
