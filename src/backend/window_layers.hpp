// window_layers.hpp — which layers of a model have a sliding window, from its program's attention nodes:
// what every backend lays out its cache by (the CPU, Vulkan and CUDA modules: window_blocks.hpp) and
// what sessions and engines size a window pool by (kv::WindowTable::pool_blocks), so that they always
// agree. Header-only: the GPU modules are built apart from the core and use it too.
#pragma once

#include "backend/graph.h"
#include "backend/module_api.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace ember {

struct WindowLayers {
    uint32_t window = 0;     // the longest sliding window of any layer, 0 if none has one
    uint32_t n_layers = 0;   // layers whose attention has a window (their rows go to the window pool)
    std::vector<bool> windowed;   // [n_layer] which ones
};

// Counts one attention node into w. A layer index outside the model keeps its rows in the main pool.
inline void count_window_layer(WindowLayers &w, const ember_graph_node &n, uint32_t n_layer) {
    if (n.op != EMBER_GRAPH_ATTENTION_EXT || n.window == 0) return;
    w.window = std::max(w.window, n.window);
    const int32_t il = ember_graph_kv_layer(&n);   // the cache it reads (a shared one: its source's)
    if (il >= 0 && static_cast<uint32_t>(il) < n_layer && !w.windowed[static_cast<size_t>(il)]) {
        w.windowed[static_cast<size_t>(il)] = true;
        ++w.n_layers;
    }
}

// From a program's nodes as a backend has read them (program_read.hpp).
inline WindowLayers window_layers(const std::vector<ember_graph_node> &nodes, uint32_t n_layer) {
    WindowLayers w;
    w.windowed.assign(n_layer, false);
    for (const ember_graph_node &n : nodes) count_window_layer(w, n, n_layer);
    return w;
}

// From a model description's nodes (node_size-strided, as the core hands them to a module).
inline WindowLayers window_layers(const ember_mod_model_desc &d) {
    WindowLayers w;
    w.windowed.assign(d.n_layer, false);
    if (d.node_size < sizeof(ember_graph_node)) return w;
    for (uint32_t i = 0; i < d.n_nodes; ++i) {
        ember_graph_node n;
        std::memcpy(&n, reinterpret_cast<const uint8_t *>(d.nodes) + size_t{i} * d.node_size, sizeof n);
        count_window_layer(w, n, d.n_layer);
    }
    return w;
}

} // namespace ember
