// moe_route.cpp — MOE's routing on the host (see moe_route.hpp).
#include "moe_route.hpp"

#include "backend/graph.h"
#include "core/error.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ember::cu {

MoeRoute moe_route(const float *logits, uint32_t n_tokens, uint32_t n_expert, uint32_t k, uint32_t gating) {
    if (k == 0 || k > n_expert) fail(EMBER_ERR_INVALID_ARGUMENT, "cuda moe: %u of %u experts", k, n_expert);
    const size_t slots = size_t{n_tokens} * k;
    std::vector<int32_t> sel(slots), idx(n_expert);
    MoeRoute r;
    r.gate.resize(slots);
    for (uint32_t t = 0; t < n_tokens; ++t) {
        const float *l = logits + size_t{t} * n_expert;
        std::iota(idx.begin(), idx.end(), 0);
        std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                          [l](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
        const float mx = l[idx[0]];
        double sum = 0;
        if (gating == EMBER_GRAPH_MOE_GATE_SOFTMAX)
            for (uint32_t e = 0; e < n_expert; ++e) sum += std::exp(static_cast<double>(l[e]) - mx);
        else
            for (uint32_t j = 0; j < k; ++j) sum += std::exp(static_cast<double>(l[idx[j]]) - mx);
        for (uint32_t j = 0; j < k; ++j) {
            sel[size_t{t} * k + j] = idx[j];
            r.gate[size_t{t} * k + j] = static_cast<float>(std::exp(static_cast<double>(l[idx[j]]) - mx) / sum);
        }
    }
    // A stable counting sort of the slots by expert: each expert's rows in token order.
    r.count.assign(n_expert, 0);
    r.first.assign(n_expert, 0);
    for (int32_t e : sel) ++r.count[static_cast<size_t>(e)];
    for (uint32_t e = 1; e < n_expert; ++e) r.first[e] = r.first[e - 1] + r.count[e - 1];
    std::vector<uint32_t> next = r.first;
    r.token.resize(slots);
    r.pos.resize(slots);
    for (size_t s = 0; s < slots; ++s) {
        const uint32_t row = next[static_cast<size_t>(sel[s])]++;
        r.token[row] = static_cast<int32_t>(s / k);
        r.pos[s] = static_cast<int32_t>(row);
    }
    return r;
}

} // namespace ember::cu
