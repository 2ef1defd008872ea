#include "kv/window_layers.hpp"

#include "backend/graph.h"
#include "kv/block_pool.hpp"
#include "kv/window_table.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

namespace ember::kv {

WindowLayers window_layers(const ember_mod_model_desc &d) {
    WindowLayers w;
    if (d.node_size < sizeof(ember_graph_node)) return w;
    std::vector<bool> windowed(d.n_layer, false);
    for (uint32_t i = 0; i < d.n_nodes; ++i) {
        ember_graph_node n;
        std::memcpy(&n, reinterpret_cast<const uint8_t *>(d.nodes) + size_t{i} * d.node_size, sizeof n);
        if (n.op != EMBER_GRAPH_ATTENTION_EXT || n.window == 0) continue;
        w.window = std::max(w.window, n.window);
        // As the CPU backend counts them: a layer index outside the model keeps its rows in the main pool.
        if (n.layer >= 0 && static_cast<uint32_t>(n.layer) < d.n_layer && !windowed[static_cast<size_t>(n.layer)]) {
            windowed[static_cast<size_t>(n.layer)] = true;
            ++w.n_layers;
        }
    }
    return w;
}

uint32_t window_pool_blocks(uint32_t window, uint32_t keep, uint32_t pass_per_seq, uint32_t pass_shared, uint32_t n_seq,
                            uint64_t n_main_blocks) {
    if (window == 0) return 0;
    const uint64_t blocks = (uint64_t{n_seq} + 1) * WindowTable::blocks_per_sequence(window, keep, pass_per_seq, kBlockSize) +
                            (uint64_t{pass_shared} + kBlockSize - 1) / kBlockSize;
    return blocks < n_main_blocks ? static_cast<uint32_t>(blocks) : 0;
}

} // namespace ember::kv
