// exclusive_use.hpp — refuses a session or sampler used by two threads at once.
//
// ember.h lets one thread at a time use a session or a sampler. A second thread calling in while the
// first is inside a call raced on everything the handle holds (ThreadSanitizer showed it); instead, each
// entry point that uses the handle claims it for the calling thread with one atomic compare-exchange,
// and a claim that finds another thread there fails with EMBER_ERR_INVALID_STATE, changing nothing.
// The thread that holds it may call in again (a callback's calls on its own handle: CallbackScope
// decides which of those are allowed). This detects overlapping calls; it cannot see a free racing a
// call (that is use after free, as with free()).
#pragma once

#include "core/error.hpp"

#include <atomic>
#include <cstdint>

namespace ember::abi {

// The thread inside a call on the handle (0: none). Mutable so const entry points may claim it.
struct HandleOwner {
    mutable std::atomic<uintptr_t> thread{0};
};

class ExclusiveUse {
public:
    ExclusiveUse(const HandleOwner &owner, const char *fn_name, const char *what) {
        const uintptr_t me = self();
        uintptr_t held = 0;
        if (owner.thread.compare_exchange_strong(held, me, std::memory_order_acquire, std::memory_order_relaxed)) {
            owner_ = &owner;
        } else if (held != me) {
            fail(EMBER_ERR_INVALID_STATE, "%s: the %s is in use by a call on another thread (a %s must be used by one "
                 "thread at a time)", fn_name, what, what);
        }
    }
    ~ExclusiveUse() {
        if (owner_) owner_->thread.store(0, std::memory_order_release);
    }
    ExclusiveUse(const ExclusiveUse &) = delete;
    ExclusiveUse &operator=(const ExclusiveUse &) = delete;

private:
    static uintptr_t self() noexcept {
        static thread_local char tag;
        return reinterpret_cast<uintptr_t>(&tag);
    }
    const HandleOwner *owner_ = nullptr;   // set when this claim took the handle (an outer call's is left)
};

} // namespace ember::abi
