// callback_scope.hpp — which handles have a callback of theirs running on this thread.
//
// A callback runs inside a call that is still using its handle (ember_generate's on_token inside the
// session's generation, an engine request's on_token inside a step). ember.h lists, per callback, the
// calls it may make on that handle; any other call there would change or free what the running call is
// using (a speculator freed under its own generate loop was a use-after-free). The call that runs
// callbacks opens a CallbackScope for each handle it uses, and every entry point that must not run
// inside one asks running_on() first and fails with EMBER_ERR_INVALID_STATE instead (abi::refuse_reentry).
//
// The record is thread-local: callbacks run on the thread of the call that made them, and another
// thread's use of a handle is governed by the threading rules of ember.h, not by this.
#pragma once

namespace ember {

class CallbackScope {
public:
    // Marks `handle` as used by the call named `call` (a string literal) until the scope ends.
    CallbackScope(const void *handle, const char *call) noexcept : handle_(handle), call_(call), outer_(top()) {
        top() = this;
    }
    ~CallbackScope() { top() = outer_; }
    CallbackScope(const CallbackScope &) = delete;
    CallbackScope &operator=(const CallbackScope &) = delete;

    // The name of the call on this thread whose callback may now be running with `handle` in use, or
    // nullptr when there is none. Scopes nest (a callback may run a call on another handle).
    static const char *running_on(const void *handle) noexcept {
        for (const CallbackScope *s = top(); s; s = s->outer_)
            if (s->handle_ == handle) return s->call_;
        return nullptr;
    }

private:
    static CallbackScope *&top() noexcept {
        static thread_local CallbackScope *t = nullptr;
        return t;
    }
    const void *handle_;
    const char *call_;
    CallbackScope *outer_;
};

} // namespace ember
