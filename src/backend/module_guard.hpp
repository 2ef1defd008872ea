// module_guard.hpp — for backend modules (src/cpu/, vulkan/, cuda/): runs one module_api.h entry's body
// and turns whatever it throws into the status and message the C boundary carries (no exception crosses
// it).
#pragma once

#include "core/error.hpp"

#include <ember/ember.h>

#include <cstddef>
#include <cstdio>
#include <exception>
#include <new>

namespace ember {

// `who` (the module's name: "cpu", "vulkan", "cuda") prefixes the messages of failures that are not an
// ember::Error.
template <class F>
int module_guard(const char *who, char *msg, size_t cap, F &&f) {
    if (msg && cap) msg[0] = 0;
    try {
        f();
        return EMBER_OK;
    } catch (const Error &e) {
        if (msg && cap) std::snprintf(msg, cap, "%s", e.what());
        return e.status();
    } catch (const std::bad_alloc &) {
        if (msg && cap) std::snprintf(msg, cap, "%s: out of memory (a host allocation failed)", who);
        return EMBER_ERR_OUT_OF_MEMORY;
    } catch (const std::exception &e) {
        if (msg && cap) std::snprintf(msg, cap, "%s: %s", who, e.what());
        return EMBER_ERR_INTERNAL;
    } catch (...) {
        if (msg && cap) std::snprintf(msg, cap, "%s: unknown failure", who);
        return EMBER_ERR_INTERNAL;
    }
}

} // namespace ember
