// state_snapshots.hpp — an engine's saved recurrent states at prefix points, for prefix reuse on models
// with recurrent layers (Qwen3.5).
//
// A cached KV prefix is of no use to such a model without the recurrent state at its end: the state
// after m tokens depends on all of them and is not kept per position. So the engine copies a request's
// state, as its prompt's evaluation passes the prompt's last whole block boundary m, into a snapshot
// slot keyed by that block's chain hash (which covers every token before it); a later request that
// adopts the cached blocks up to m starts from a copy of the snapshot. Slots are a fixed number of the
// context's state slots, counted in the engine's memory; the least recently used is overwritten when a
// new snapshot needs room, except those of pinned prefixes, which stay.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ember {

class StateSnapshots {
public:
    // The context's state slots [first, first + n) hold the snapshots.
    StateSnapshots(int32_t first, uint32_t n);
    // The slot holding the state after m tokens whose last block has chain hash `hash`, or -1.
    int32_t find(uint64_t hash, uint32_t m);
    // The slot the caller is to copy the state after m tokens into (the same key's if it is there), or -1
    // when every slot holds a pinned prefix's. A pinned snapshot is never overwritten.
    int32_t store(uint64_t hash, uint32_t m, bool pin);
    uint32_t n_used() const;
    uint32_t n_slots() const { return static_cast<uint32_t>(entries_.size()); }

private:
    struct Entry {
        uint64_t hash = 0;
        uint32_t m = 0;           // 0: empty
        bool pinned = false;
        uint64_t last_use = 0;
    };
    int32_t first_;
    uint64_t clock_ = 0;
    std::vector<Entry> entries_;
};

} // namespace ember
