#include "backend/window_layers.hpp"

#include "backend/graph.h"

#include <algorithm>
#include <cstring>

namespace ember {

WindowLayers window_layers(const ember_mod_model_desc &d) {
    WindowLayers w;
    if (d.node_size < sizeof(ember_graph_node)) return w;
    std::vector<bool> &windowed = w.windowed;
    windowed.assign(d.n_layer, false);
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

} // namespace ember
