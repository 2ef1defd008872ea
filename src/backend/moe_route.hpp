// moe_route.hpp — graph.h's MOE routing rule, written once for every backend: which experts each token
// uses, with what gates, and (for backends that multiply each expert's rows in one product) those rows
// grouped by expert. Header-only plain C++: the CPU runs it inside its MOE op; the Vulkan and CUDA
// modules run it on the host from router logits read back once per MOE node and pass (their products take
// row counts on the host; device-side routing is their READMEs' follow-up). One copy keeps every backend's
// choice of experts, ties included, identical to the CPU's.
#pragma once

#include "backend/graph.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

namespace ember {

// For each of n_tokens rows of router logits [n_expert]: the k largest (the lower index first among
// equals, as graph.h says), largest first, into sel[t*k + j]; their gates into gate[t*k + j], by softmax
// over the chosen (EMBER_GRAPH_MOE_GATE_SOFTMAX_TOPK) or over all experts (EMBER_GRAPH_MOE_GATE_SOFTMAX),
// summed in double. EMBER_GRAPH_MOE_GATE_SIGMOID chooses by sigmoid(logit) + sel_bias (nullptr: none) and
// weighs by the chosen sigmoids renormalised (moe_select_sigmoid); EMBER_GRAPH_MOE_GATE_SIGMOID_INPUT chooses
// by the logits and gates by their sigmoids as they are (the gates then scale the experts' inputs: see
// moe_gate_on_input). The caller checks 1 <= k <= n_expert.
inline void moe_select_sigmoid(const float *logits, size_t n_tokens, uint32_t n_expert, uint32_t k,
                               const float *sel_bias, int32_t *sel, float *gate) {
    std::vector<int32_t> idx(n_expert);
    std::vector<float> p(n_expert), score(n_expert);
    for (size_t t = 0; t < n_tokens; ++t) {
        const float *l = logits + t * n_expert;
        for (uint32_t e = 0; e < n_expert; ++e) {
            p[e] = 1.0f / (1.0f + std::exp(-l[e]));
            score[e] = sel_bias ? p[e] + sel_bias[e] : p[e];
        }
        std::iota(idx.begin(), idx.end(), 0);
        const float *sc = score.data();
        std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                          [sc](int32_t a, int32_t b) { return sc[a] > sc[b] || (sc[a] == sc[b] && a < b); });
        double sum = 0;
        for (uint32_t j = 0; j < k; ++j) sum += p[static_cast<size_t>(idx[j])];
        sum = std::max(sum, 1.0 / 16384.0);
        for (uint32_t j = 0; j < k; ++j) {
            sel[t * k + j] = idx[j];
            gate[t * k + j] = static_cast<float>(p[static_cast<size_t>(idx[j])] / sum);
        }
    }
}

// Whether the gating's weights scale each chosen expert's input rather than its output.
inline bool moe_gate_on_input(uint32_t gating) { return gating == EMBER_GRAPH_MOE_GATE_SIGMOID_INPUT; }

inline void moe_select(const float *logits, size_t n_tokens, uint32_t n_expert, uint32_t k, uint32_t gating,
                       int32_t *sel, float *gate, const float *sel_bias = nullptr) {
    if (gating == EMBER_GRAPH_MOE_GATE_SIGMOID) return moe_select_sigmoid(logits, n_tokens, n_expert, k, sel_bias, sel, gate);
    std::vector<int32_t> idx(n_expert);
    for (size_t t = 0; t < n_tokens; ++t) {
        const float *l = logits + t * n_expert;
        std::iota(idx.begin(), idx.end(), 0);
        std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                          [l](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
        if (moe_gate_on_input(gating)) {
            for (uint32_t j = 0; j < k; ++j) {
                sel[t * k + j] = idx[j];
                gate[t * k + j] = 1.0f / (1.0f + std::exp(-l[idx[j]]));
            }
            continue;
        }
        const float mx = l[idx[0]];
        double sum = 0;
        if (gating == EMBER_GRAPH_MOE_GATE_SOFTMAX)
            for (uint32_t e = 0; e < n_expert; ++e) sum += std::exp(static_cast<double>(l[e]) - mx);
        else
            for (uint32_t j = 0; j < k; ++j) sum += std::exp(static_cast<double>(l[idx[j]]) - mx);
        for (uint32_t j = 0; j < k; ++j) {
            sel[t * k + j] = idx[j];
            gate[t * k + j] = static_cast<float>(std::exp(static_cast<double>(l[idx[j]]) - mx) / sum);
        }
    }
}

// The routing as work rows grouped by expert (a stable counting sort of the n_tokens * k choices: each
// expert's rows in token order), for one product per chosen expert.
struct MoeRoute {
    std::vector<int32_t> token;          // [slots] the token row of each work row
    std::vector<uint32_t> first, count;  // [n_expert] each expert's work rows
    std::vector<int32_t> pos;            // [n_tokens * k] choice j of token t -> its work row
    std::vector<float> gate;             // [n_tokens * k] its gate weight (1 where the gate scales the input)
    // Gates on the input (moe_gate_on_input): [slots] the factor of each work row's input; else empty.
    std::vector<float> row_gate;
};

inline MoeRoute moe_route_rows(const float *logits, uint32_t n_tokens, uint32_t n_expert, uint32_t k,
                               uint32_t gating, const float *sel_bias = nullptr) {
    const size_t slots = size_t{n_tokens} * k;
    std::vector<int32_t> sel(slots);
    MoeRoute r;
    r.gate.resize(slots);
    moe_select(logits, n_tokens, n_expert, k, gating, sel.data(), r.gate.data(), sel_bias);
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
    if (moe_gate_on_input(gating)) {
        r.row_gate.resize(slots);
        for (size_t s = 0; s < slots; ++s) r.row_gate[static_cast<size_t>(r.pos[s])] = r.gate[s], r.gate[s] = 1.0f;
    }
    return r;
}

} // namespace ember
