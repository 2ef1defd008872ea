// vk_program.hpp — a model's program (backend/graph.h) checked and planned for this backend: the steps a
// pass records (a node, or a recognised run of nodes recorded as one dispatch), the rope tables, and what
// a context allocates for it.
//
// A pure function of the description, so that context_bytes (which sees only the description) sizes
// exactly what a context allocates, and an op or option this backend cannot run is refused by model_load
// with EMBER_ERR_UNSUPPORTED naming it, never a wrong answer.
//
// The fusions (planned by backend/fusion_plan.hpp, from kVulkanFusions in vk_program.cpp) give the
// unfused program's floats bit for bit:
// - MATMUL then ADD(dst = y, src = that matmul's dst), the matmul's dst read by nothing after: the
//   matmul accumulates into y (matmul.comp's y + (W·x + b) is the ADD's one rounding of the same value).
// - A quantized MATMUL whose src has not been written since the last quantized matmul of that src reuses
//   its 8-bit copy (Q/K/V, gate/up): quantization is a function of the rows.
// - GATHER_LOGITS then RMS_NORM of its dst, the gathered rows read by nothing else: the norm reads the
//   token rows through the logits rows' indices (rmsnorm.comp's rows_off).
// Buffers that no step touches then (the products folded into adds, the gathered rows) get no memory.
#pragma once

#include "backend/module_api.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ember::vk {

struct Step {
    uint32_t node = 0;        // the node it records (a folded run: the node whose op it records)
    int32_t layer = -1;       // the run's first node's layer (command buffers are cut where it changes)
    int32_t src = -1, dst = -1;  // the buffers it reads and writes (a folded run: the run's outer ones)
    bool quantize = false;    // MATMUL: quantize src first (else the 8-bit copy made for it before serves)
    bool accumulate = false;  // MATMUL: dst += the product (an ADD folded in)
    bool gathered = false;    // RMS_NORM: source rows picked by the logits rows (a GATHER_LOGITS folded in)
    uint32_t rope = 0;        // ROPE, ROPE_YARN: its table in Program::ropes
};

// ROPE_YARN's options (graph.h); the defaults are plain ROPE's.
struct RopeScaling {
    float ext_factor = 0, attn_factor = 1, beta_fast = 0, beta_slow = 0;
    uint32_t n_ctx_orig = 0;
    bool operator==(const RopeScaling &) const = default;
};

// The cosines and sines a ROPE needs depend on its positions and these; nodes that share them (q and k)
// share one table per pass. freq[i] = freq_scale * theta^(-2i/n_rot) / factor_i in double, as the CPU's;
// with YaRN's ramp (ROPE_YARN) a mix of that and the unscaled frequency, and every value times mscale.
struct RopeSet {
    uint32_t n_rot = 0;
    float theta = 0, freq_scale = 0;
    int32_t factors = -1;
    RopeScaling scaling;
    std::vector<double> freq;
    double mscale = 1;
};

// freq[i] for i < n_rot / 2 (factors: n_rot / 2 values, or nullptr), graph.h's ROPE_YARN formula (with
// the default scaling, ROPE's).
std::vector<double> rope_freq(uint32_t n_rot, float theta, float freq_scale, const float *factors,
                              const RopeScaling &y = {});
// The factor of the rotated values: attn_factor, times YaRN's 1 + 0.1 ln(1 / freq_scale) with its ramp on.
double rope_mscale(float freq_scale, const RopeScaling &y);
// The table rope.comp reads for n tokens at positions pos: cs[t * n_rot + i] = cos(pos_t freq_i) mscale and
// cs[t * n_rot + n_rot / 2 + i] = sin(...) mscale, the angle and the product formed in double.
void rope_table(const std::vector<double> &freq, const int32_t *pos, uint32_t n, float *cs, double mscale = 1);

struct Program {
    std::vector<ember_graph_node> nodes;  // copied at this build's stride
    std::vector<ember_graph_buf> bufs;
    std::vector<bool> buf_used;           // touched by some step (else given no memory)
    std::vector<Step> steps;
    std::vector<RopeSet> ropes;
    int32_t logits_buf = -1;
    // module_api.h's hidden_buf (-1: none), and the width of the INPUT_ROWS nodes' rows (0: none).
    int32_t hidden_buf = -1;
    uint32_t input_width = 0;
    uint32_t n_vocab = 0, n_layer = 0, kv_width = 0;
    // [n_layer] the layers that keep K/V rows (backend.hpp's kv_layers: a hybrid model's recurrent layers
    // keep none), and the floats of one sequence's recurrent state (0: none).
    std::vector<bool> has_kv;
    uint32_t state_floats = 0;
    uint32_t n_token_ids = 0;             // token ids must be below this (the smallest GET_ROWS table)
    uint32_t quant_width[2] = {0, 0};     // widest quantized matmul input, per ember_graph_rows
    // MOE nodes: the most experts and chosen experts of one (the router logits read back and the routing
    // lists live in the io buffer), and the widest n_in, n_ff and n_out (the experts' work buffers).
    uint32_t moe_experts = 0, moe_used = 0, moe_in = 0, moe_ff = 0, moe_out = 0;
    // Rows of a buffer in a pass (or its capacity, given n_batch and n_logits).
    uint32_t rows(int32_t buf, uint32_t n_tokens, uint32_t n_logits) const {
        return bufs[static_cast<size_t>(buf)].rows == EMBER_GRAPH_ROWS_LOGITS ? n_logits : n_tokens;
    }
    uint32_t width(int32_t buf) const { return bufs[static_cast<size_t>(buf)].width; }
};

// Checks the description and plans it. Throws EMBER_ERR_UNSUPPORTED (an op, option or type this backend
// does not run, named) or EMBER_ERR_INVALID_MODEL (a program that contradicts itself).
Program plan_program(const ember_mod_model_desc &d);

} // namespace ember::vk
