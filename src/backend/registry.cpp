// registry.cpp — which backends exist in this build and which one AUTO picks.
#include "backend/backend.hpp"

#include <mutex>
#include <vector>

namespace ember {

namespace {
std::vector<std::unique_ptr<Backend>> &registry() {
    static std::vector<std::unique_ptr<Backend>> backends;
    static std::once_flag once;
    std::call_once(once, [] {
        // GPU modules (cuda/, vulkan/) will be discovered and loaded here at run time.
        backends.push_back(cpu_backend_create());
    });
    return backends;
}
} // namespace

Backend *backend_find(ember_backend_kind kind) {
    Backend *best = nullptr;
    for (auto &b : registry()) {
        if (b->score() <= 0 || b->api_version() != kBackendApiVersion) continue;
        if (kind != EMBER_BACKEND_AUTO && b->kind() != kind) continue;
        if (!best || b->score() > best->score()) best = b.get();
    }
    return best;
}

} // namespace ember
