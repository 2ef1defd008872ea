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

} // namespace ember
