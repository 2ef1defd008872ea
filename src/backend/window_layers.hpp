// window_layers.hpp — which layers of a model have a sliding window: read from the same program nodes
// the CPU backend reads when it lays out its cache (cpu_context_sizes), for the sessions and engines that
// size a window pool for them (kv::WindowTable::pool_blocks).
#pragma once

#include "backend/module_api.h"

#include <cstdint>

namespace ember {

struct WindowLayers {
    uint32_t window = 0;     // the longest sliding window of any layer, 0 if none has one
    uint32_t n_layers = 0;   // layers whose attention has a window (their rows go to the window pool)
};
WindowLayers window_layers(const ember_mod_model_desc &d);

} // namespace ember
