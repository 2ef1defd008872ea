// window_blocks.hpp — what every backend that keeps the sliding-window layers' K/V rows in a pool of
// their own (ContextParams::n_window_blocks, backend.hpp; docs/architecture.md, "Sliding-window layers'
// blocks") decides the same way: how many window blocks a context's params ask for, which layers are
// window layers, and what a copy_block's ids name. Written once for the CPU, Vulkan and CUDA modules.
#pragma once

#include "backend/module_api.h"
#include "backend/window_layers.hpp"
#include "core/error.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ember {

// The params' n_window_blocks, or 0 when the caller's struct ends before it (an older core).
inline uint32_t context_window_blocks(const ember_mod_context_params &p) {
    return p.struct_size >= offsetof(ember_mod_context_params, n_window_blocks) + sizeof p.n_window_blocks ? p.n_window_blocks : 0;
}

// [n_layer] whether each layer's rows are in the window pool: its attention has a sliding window
// (window_layers.hpp, the rule sessions and engines size the pool by) and the context has window blocks
// (all false without).
inline std::vector<bool> window_pool_layers(const ember_mod_model_desc &d, uint32_t n_window_blocks) {
    if (n_window_blocks == 0) return std::vector<bool>(d.n_layer, false);
    return window_layers(d).windowed;
}
inline std::vector<bool> window_pool_layers(const std::vector<ember_graph_node> &nodes, uint32_t n_layer,
                                            uint32_t n_window_blocks) {
    if (n_window_blocks == 0) return std::vector<bool>(n_layer, false);
    return window_layers(nodes, n_layer).windowed;
}

// copy_block(src, dst): ids from n_blocks on name window block id - n_blocks, which only the window
// layers have; ids below, the other layers' blocks. Both ids must be of one pool (EMBER_ERR_INTERNAL,
// naming `who`, otherwise).
struct CopyBlockIds {
    bool window;        // the window pool's blocks (copy the window layers' rows only)
    uint32_t src, dst;  // within that pool
};
inline CopyBlockIds copy_block_ids(int32_t src, int32_t dst, uint32_t n_blocks, uint32_t n_window_blocks, const char *who) {
    const bool window = src >= 0 && static_cast<uint32_t>(src) >= n_blocks;
    const uint32_t lo = window ? n_blocks : 0, hi = window ? n_blocks + n_window_blocks : n_blocks;
    if (src < 0 || dst < 0 || static_cast<uint32_t>(src) >= hi || static_cast<uint32_t>(dst) >= hi || static_cast<uint32_t>(dst) < lo)
        fail(EMBER_ERR_INTERNAL, "%s copy_block: %d -> %d of %u + %u window blocks", who, src, dst, n_blocks, n_window_blocks);
    return {window, static_cast<uint32_t>(src) - lo, static_cast<uint32_t>(dst) - lo};
}

} // namespace ember
