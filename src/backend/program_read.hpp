// program_read.hpp — what every backend does first with a model's program (graph.h): takes the nodes out
// of the description and checks what does not depend on the backend — the nodes' layout, the buffers, the
// output. Each backend then checks the ops and options it runs.
#pragma once

#include "backend/module_api.h"
#include "core/error.hpp"

#include <cstring>
#include <vector>

namespace ember {

// `who` ("cpu", "cuda", "vulkan") prefixes the messages. Nodes only grow at their end: this build reads
// the first sizeof(ember_graph_node) bytes of each, node_size apart.
inline std::vector<ember_graph_node> read_program(const ember_mod_model_desc &d, const char *who) {
    if (d.node_size < sizeof(ember_graph_node))
        fail(EMBER_ERR_UNSUPPORTED, "%s: the model's program is of an older layout (node size %u)", who, d.node_size);
    for (uint32_t i = 0; i < d.n_bufs; ++i)
        if (d.bufs[i].width == 0 || (d.bufs[i].rows != EMBER_GRAPH_ROWS_TOKENS && d.bufs[i].rows != EMBER_GRAPH_ROWS_LOGITS))
            fail(EMBER_ERR_INVALID_MODEL, "%s: an activation buffer of width %u, rows %u", who, d.bufs[i].width,
                 d.bufs[i].rows);
    if (d.logits_buf < 0 || static_cast<uint32_t>(d.logits_buf) >= d.n_bufs || d.bufs[d.logits_buf].width != d.n_vocab ||
        d.bufs[d.logits_buf].rows != EMBER_GRAPH_ROWS_LOGITS)
        fail(EMBER_ERR_INVALID_MODEL, "%s: the program's output is not a logits buffer of the vocabulary's width", who);
    std::vector<ember_graph_node> nodes(d.n_nodes);
    for (uint32_t i = 0; i < d.n_nodes; ++i)
        std::memcpy(&nodes[i], reinterpret_cast<const uint8_t *>(d.nodes) + size_t{i} * d.node_size, sizeof(ember_graph_node));
    return nodes;
}

} // namespace ember
