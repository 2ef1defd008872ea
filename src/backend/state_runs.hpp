// state_runs.hpp — a batch's tokens grouped by the recurrent-state slot they read and write (graph.h's
// stateful ops, module_api.h's state_slots / state_src): one run per sequence, as the CPU, Vulkan and CUDA
// backends all run them, with the batch checked the same way for all three. Header-only: the GPU modules
// are built apart from the core and use it too.
#pragma once

#include "backend/module_api.h"
#include "core/error.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ember {

// One sequence's tokens in a batch: rows [t0, t1), the slot that holds its state after the pass, and the
// slot its first token's state comes from (-1: the zero state of a new sequence; `slot`: going on in place;
// another slot: a fork).
struct SlotRun {
    uint32_t t0 = 0, t1 = 0;
    int32_t slot = 0, from = -1;
};

// The runs of batch b over a context of n_slots state slots. Refused (EMBER_ERR_INTERNAL, the message
// prefixed by `who`, "cpu forward"): a batch without state arrays, a slot out of range, a sequence's tokens
// apart or out of position order, and a run reading a slot that another run of the pass writes (its state
// would depend on the order in which the backend runs the sequences, which run at once on a GPU).
inline std::vector<SlotRun> slot_runs(const ember_mod_batch &b, uint32_t n_slots, const char *who) {
    if (b.struct_size < offsetof(ember_mod_batch, state_src) + sizeof b.state_src || !b.state_slots || !b.state_src)
        fail(EMBER_ERR_INTERNAL, "%s: a model with recurrent layers needs the batch's state slots", who);
    auto check_slot = [&](int32_t s) {
        if (s < 0 || static_cast<uint32_t>(s) >= n_slots) fail(EMBER_ERR_INTERNAL, "%s: state slot %d of %u", who, s, n_slots);
    };
    std::vector<SlotRun> runs;
    for (uint32_t t = 0; t < b.n_tokens; ++t) {
        const int32_t slot = b.state_slots[t];
        check_slot(slot);
        if (!runs.empty() && runs.back().slot == slot) {
            if (b.pos[t] != b.pos[t - 1] + 1)
                fail(EMBER_ERR_INTERNAL, "%s: a sequence's tokens out of order (positions %d, %d)", who, b.pos[t - 1], b.pos[t]);
            runs.back().t1 = t + 1;
            continue;
        }
        for (const SlotRun &r : runs)
            if (r.slot == slot) fail(EMBER_ERR_INTERNAL, "%s: the tokens of state slot %d are not consecutive", who, slot);
        if (b.state_src[t] != -1) check_slot(b.state_src[t]);
        runs.push_back({t, t + 1, slot, b.state_src[t]});
    }
    for (const SlotRun &r : runs)
        for (const SlotRun &w : runs)
            if (r.from >= 0 && r.from != r.slot && r.from == w.slot)
                fail(EMBER_ERR_INTERNAL, "%s: a sequence reads a state slot the same pass writes", who);
    return runs;
}

// The batch's kept-state slots (module_api.h's state_keep: [n_tokens], -1 for none), or nullptr when it
// keeps none (no array, an older batch, or every entry -1). Refused (EMBER_ERR_INTERNAL): a slot out of
// range, one that a run of the pass writes or reads, or one that two tokens name — each would make a
// state depend on the order in which the backend runs the sequences.
inline const int32_t *kept_slots(const ember_mod_batch &b, uint32_t n_slots, const std::vector<SlotRun> &runs,
                                 const char *who) {
    if (b.struct_size < offsetof(ember_mod_batch, state_keep) + sizeof b.state_keep || !b.state_keep) return nullptr;
    bool any = false;
    for (uint32_t t = 0; t < b.n_tokens; ++t) {
        const int32_t k = b.state_keep[t];
        if (k == -1) continue;
        any = true;
        if (k < 0 || static_cast<uint32_t>(k) >= n_slots) fail(EMBER_ERR_INTERNAL, "%s: kept state slot %d of %u", who, k, n_slots);
        for (const SlotRun &r : runs)
            if (k == r.slot || k == r.from)
                fail(EMBER_ERR_INTERNAL, "%s: kept state slot %d is one the pass reads or writes", who, k);
        for (uint32_t u = 0; u < t; ++u)
            if (b.state_keep[u] == k) fail(EMBER_ERR_INTERNAL, "%s: two tokens keep their state in slot %d", who, k);
    }
    return any ? b.state_keep : nullptr;
}

// The floats of state one recurrent op of the single-op interface carries (module_api.h's ember_mod_op:
// SSM_CONV's window, GATED_DELTA's and SSM_SCAN's heads): a row of its states_after.
inline size_t op_state_floats(const ember_mod_op &op) {
    switch (op.kind) {
    case EMBER_GRAPH_SSM_CONV: return size_t{op.conv_kernel ? op.conv_kernel - 1 : 0} * op.n_in;
    case EMBER_GRAPH_GATED_DELTA: return size_t{op.n_head} * op.head_dim * op.head_dim;
    case EMBER_GRAPH_SSM_SCAN: return size_t{op.n_head} * op.head_dim * op.conv_kernel;
    default: return 0;
    }
}

// Whether a single op asks for its per-token states (an ember_mod_op with states_after set).
inline float *op_states_after(const ember_mod_op &op) {
    return op.struct_size >= offsetof(ember_mod_op, states_after) + sizeof op.states_after ? op.states_after : nullptr;
}

} // namespace ember
