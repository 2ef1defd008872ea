// window_layers.hpp — which layers of a model have a sliding window, and how many blocks a pool of
// their own (kv/window_table.hpp) gets: one policy for sessions and engines, read from the same program
// nodes the CPU backend reads when it lays out its cache (cpu_context_sizes).
#pragma once

#include "backend/module_api.h"

#include <cstdint>

namespace ember::kv {

struct WindowLayers {
    uint32_t window = 0;     // the longest sliding window of any layer, 0 if none has one
    uint32_t n_layers = 0;   // layers whose attention has a window (their rows go to the window pool)
};
WindowLayers window_layers(const ember_mod_model_desc &d);

// Blocks of a window pool for n_seq sequences keeping `keep` positions of history (WindowTable), each of
// which may run a pass of up to pass_per_seq tokens, all of them together up to pass_shared more:
// n_seq + 1 times WindowTable::blocks_per_sequence(window, keep, pass_per_seq), plus pass_shared's
// blocks. The one sequence more is room for a fork (sessions) or a pinned prefix and cached prefix
// blocks (engines). A session's sequences each run passes of n_batch (pass_per_seq n_batch, pass_shared
// 0); an engine's share one pass of n_batch tokens (pass_per_seq one block: each sequence's share of a
// pass may end in a partial block; pass_shared n_batch). 0 when that is not below n_main_blocks: with
// the window not well inside the context a second pool saves nothing, and every layer's rows stay in
// the main blocks.
uint32_t window_pool_blocks(uint32_t window, uint32_t keep, uint32_t pass_per_seq, uint32_t pass_shared, uint32_t n_seq,
                            uint64_t n_main_blocks);

} // namespace ember::kv
