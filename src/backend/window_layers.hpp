// window_layers.hpp — which layers of a model have a sliding window, from its program's attention nodes:
// what the CPU backend lays out its cache by (cpu_context_sizes) and what sessions and engines size a
// window pool by (kv::WindowTable::pool_blocks), so that the two always agree.
#pragma once

#include "backend/module_api.h"

#include <cstdint>
#include <vector>

namespace ember {

struct WindowLayers {
    uint32_t window = 0;     // the longest sliding window of any layer, 0 if none has one
    uint32_t n_layers = 0;   // layers whose attention has a window (their rows go to the window pool)
    std::vector<bool> windowed;   // [n_layer] which ones
};
WindowLayers window_layers(const ember_mod_model_desc &d);

} // namespace ember
