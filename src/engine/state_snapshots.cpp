// state_snapshots.cpp — see state_snapshots.hpp.
#include "engine/state_snapshots.hpp"

namespace ember {

StateSnapshots::StateSnapshots(int32_t first, uint32_t n) : first_(first), entries_(n) {}

int32_t StateSnapshots::find(uint64_t hash, uint32_t m) {
    for (std::size_t i = 0; i < entries_.size(); ++i) {
        Entry &e = entries_[i];
        if (e.m == m && e.hash == hash) {
            e.last_use = ++clock_;
            return first_ + static_cast<int32_t>(i);
        }
    }
    return -1;
}

int32_t StateSnapshots::store(uint64_t hash, uint32_t m, bool pin) {
    std::size_t best = entries_.size();
    for (std::size_t i = 0; i < entries_.size(); ++i) {
        const Entry &e = entries_[i];
        if (e.m == m && e.hash == hash) {   // already there: refresh (and pin) it
            best = i;
            break;
        }
        if (e.pinned) continue;
        if (best == entries_.size() || e.m == 0 || (entries_[best].m != 0 && e.last_use < entries_[best].last_use)) best = i;
    }
    if (best == entries_.size()) return -1;
    Entry &e = entries_[best];
    e.pinned = e.pinned || pin;
    e.hash = hash, e.m = m, e.last_use = ++clock_;
    return first_ + static_cast<int32_t>(best);
}

uint32_t StateSnapshots::n_used() const {
    uint32_t n = 0;
    for (const Entry &e : entries_) n += e.m != 0 ? 1 : 0;
    return n;
}

} // namespace ember
