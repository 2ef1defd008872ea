// program_read.hpp — what every backend does first with a model's program (graph.h): takes the nodes out
// of the description and checks what does not depend on the backend — the nodes' layout, the buffers, the
// output. Each backend then checks the ops and options it runs.
#pragma once

#include "backend/module_api.h"
#include "core/error.hpp"

#include <algorithm>
#include <cstring>
#include <span>
#include <vector>

namespace ember {

// The ops of graph.h's first version: what every backend ran when programs began. A backend that runs
// more passes its own list to read_program; one that does not is held to these, so an op graph.h gained
// later (and names, so a backend's own "unknown op" check passes it) is refused, never skipped.
inline constexpr uint32_t kGraphOpsFirst[] = {EMBER_GRAPH_GET_ROWS, EMBER_GRAPH_RMS_NORM,  EMBER_GRAPH_MATMUL,
                                              EMBER_GRAPH_ROPE,     EMBER_GRAPH_KV_STORE,  EMBER_GRAPH_ATTENTION,
                                              EMBER_GRAPH_ADD,      EMBER_GRAPH_SWIGLU,    EMBER_GRAPH_GATHER_LOGITS};

// The description's hidden_buf (module_api.h), -1 when it has none or predates the field.
inline int32_t desc_hidden_buf(const ember_mod_model_desc &d) {
    return d.struct_size >= offsetof(ember_mod_model_desc, hidden_buf) + sizeof d.hidden_buf ? d.hidden_buf : -1;
}

// Where a pass writes the hidden rows, or nullptr: the batch asks (module_api.h) and the program has them.
inline float *batch_hidden(const ember_mod_batch &b) {
    return b.struct_size >= offsetof(ember_mod_batch, hidden) + sizeof b.hidden ? b.hidden : nullptr;
}

// `who` ("cpu", "cuda", "vulkan") prefixes the messages; `ops`: the ops this backend runs (any other is
// refused with EMBER_ERR_UNSUPPORTED naming it); `sequence_mask`: whether it runs ATTENTION_EXT's
// EMBER_GRAPH_MASK_SEQUENCE (bidirectional attention; a program asking for it elsewhere is refused). Nodes only
// grow at their end: this build reads the first sizeof(ember_graph_node) bytes of each, node_size apart.
inline std::vector<ember_graph_node> read_program(const ember_mod_model_desc &d, const char *who,
                                                  std::span<const uint32_t> ops = kGraphOpsFirst,
                                                  bool sequence_mask = false) {
    if (d.node_size < sizeof(ember_graph_node))
        fail(EMBER_ERR_UNSUPPORTED, "%s: the model's program is of an older layout (node size %u)", who, d.node_size);
    for (uint32_t i = 0; i < d.n_bufs; ++i)
        if (d.bufs[i].width == 0 || (d.bufs[i].rows != EMBER_GRAPH_ROWS_TOKENS && d.bufs[i].rows != EMBER_GRAPH_ROWS_LOGITS))
            fail(EMBER_ERR_INVALID_MODEL, "%s: an activation buffer of width %u, rows %u", who, d.bufs[i].width,
                 d.bufs[i].rows);
    if (d.logits_buf < 0 || static_cast<uint32_t>(d.logits_buf) >= d.n_bufs || d.bufs[d.logits_buf].width != d.n_vocab ||
        d.bufs[d.logits_buf].rows != EMBER_GRAPH_ROWS_LOGITS)
        fail(EMBER_ERR_INVALID_MODEL, "%s: the program's output is not a logits buffer of the vocabulary's width", who);
    const int32_t h = desc_hidden_buf(d);
    if (h >= 0 && (static_cast<uint32_t>(h) >= d.n_bufs || d.bufs[h].rows != EMBER_GRAPH_ROWS_TOKENS))
        fail(EMBER_ERR_INVALID_MODEL, "%s: the program's hidden rows are not a per-token buffer", who);
    std::vector<ember_graph_node> nodes(d.n_nodes);
    for (uint32_t i = 0; i < d.n_nodes; ++i) {
        std::memcpy(&nodes[i], reinterpret_cast<const uint8_t *>(d.nodes) + size_t{i} * d.node_size, sizeof(ember_graph_node));
        const uint32_t op = nodes[i].op;
        if (std::find(ops.begin(), ops.end(), op) == ops.end()) {
            const char *name = ember_graph_op_name(op);
            if (name) fail(EMBER_ERR_UNSUPPORTED, "%s: op %s (node %u) is not supported by this backend", who, name, i);
            fail(EMBER_ERR_UNSUPPORTED, "%s: op %u (node %u) is not supported by this build", who, op, i);
        }
        if (op == EMBER_GRAPH_ATTENTION_EXT && nodes[i].attn_mask != EMBER_GRAPH_MASK_CAUSAL &&
            (!sequence_mask || nodes[i].attn_mask != EMBER_GRAPH_MASK_SEQUENCE))
            fail(EMBER_ERR_UNSUPPORTED, "%s: attention_ext's mask %u (node %u: bidirectional attention) is not "
                 "supported by this backend", who, nodes[i].attn_mask, i);
    }
    return nodes;
}

} // namespace ember
