// moe_route.cpp — MOE's routing on the host (see moe_route.hpp).
#include "moe_route.hpp"

#include "backend/graph.h"
#include "core/error.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ember::cu {

MoeRoute moe_route(const float *logits, uint32_t n_tokens, uint32_t n_expert, uint32_t k, uint32_t gating,
                   const float *sel_bias) {
    if (k == 0 || k > n_expert) fail(EMBER_ERR_INVALID_ARGUMENT, "cuda moe: %u of %u experts", k, n_expert);
    return moe_route_rows(logits, n_tokens, n_expert, k, gating, sel_bias);
}

} // namespace ember::cu
