// program_split.hpp — a model's program (graph.h) cut into parts that run one after another on different
// backends: placement across devices (contiguous decoder layers on a GPU, the rest on the CPU, or one
// layer's experts on the CPU between two GPU parts).
//
// A cut at node c hands the next part every buffer the program reads from c on before writing it there
// (at a layer boundary of the usual decoder, the residual stream alone; before a MOE node, its input and
// router logits; after it, its output and the residual stream). The part before the cut packs those
// buffers side by side into one row per token (COPY_COLS) and returns them as its "logits" (GATHER_LOGITS
// of every token row), so a backend runs a part exactly as it runs a whole program; the part after it
// starts from those rows (module_api.h's has_input) and unpacks them. Every part keeps the whole
// program's layer numbers, so each holds the K/V rows (and recurrent state) of its own layers only, in the
// same per-layer layout as the whole: a part's saved rows, concatenated in program order, are the whole
// program's.
#pragma once

#include "backend/module_api.h"

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace ember {

struct ProgramPart {
    uint32_t first_node = 0, end_node = 0;   // [first, end) of the whole program's nodes
    int32_t first_layer = 0, last_layer = 0; // the layers of its first and last node
    uint32_t in_width = 0;                   // floats per token it starts from (0: it starts from tokens)
    uint32_t out_width = 0;                  // floats per token it hands on (0: it returns the logits)
    uint32_t state_begin = 0;                // where its recurrent state lies in a sequence's whole state
    uint64_t weight_bytes = 0;               // bytes of the tensors it reads
    bool has_experts = false;                // it runs a MOE node
    ember_mod_model_desc c{};                // points into the vectors below
    std::vector<ember_graph_node> nodes;
    std::vector<ember_graph_buf> bufs;
    std::vector<ember_mod_tensor> tensors;
};

// Cuts d's program before each node index of `cuts` (ascending, each in 1..n_nodes-1). Throws
// EMBER_ERR_UNSUPPORTED when a cut would hand on a buffer of logits rows, or a part's recurrent state is
// not one contiguous range of the whole.
std::vector<std::unique_ptr<ProgramPart>> split_program(const ember_mod_model_desc &d, std::span<const uint32_t> cuts);

// The node where decoder layer `layer` begins (n_layer: where the output begins). The program's nodes
// must be in layer order (the builder's), else EMBER_ERR_UNSUPPORTED.
uint32_t layer_begin(const ember_mod_model_desc &d, uint32_t layer);
// The MOE node of decoder layer `layer`, or UINT32_MAX when it has none.
uint32_t layer_moe_node(const ember_mod_model_desc &d, uint32_t layer);

// A node of the description by index (nodes are node_size apart).
const ember_graph_node &desc_node(const ember_mod_model_desc &d, uint32_t i);

} // namespace ember
