// registry.cpp — which backends exist in this build and which one AUTO picks.
//
// Every backend is a module_api.h table behind the one adapter of module_loader.cpp. The CPU's table is
// built in (src/cpu/cpu_module.cpp); the GPU backends' are in modules (libember-vulkan.so, ...) loaded at
// first use from beside libember; a module that is missing, or whose API (the Vulkan loader) or device is
// missing, is remembered with the reason, so that AUTO falls back to the CPU saying why in the log and
// an explicit request fails with that reason.
#include "backend/backend.hpp"
#include "backend/module_loader.hpp"

#include "core/error.hpp"
#include "core/log.hpp"

#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace ember {

namespace {

struct Registry {
    // The CPU backend (not owned here) first, then the modules.
    std::vector<std::unique_ptr<Backend, void (*)(Backend *)>> backends;
    std::map<ember_backend_kind, Backend *> modules;  // loaded modules, usable or not
    std::map<ember_backend_kind, std::string> missing;  // kind -> why it is not usable
};

// The modules this build knows of, by name and kind.
struct ModuleName {
    const char *name;
    ember_backend_kind kind;
};
constexpr ModuleName kModules[] = {{"vulkan", EMBER_BACKEND_VULKAN}, {"cuda", EMBER_BACKEND_CUDA}};

Backend &cpu_backend() {
    static const LoadedModule builtin{ember_cpu_backend_module(), "built in"};
    static const std::unique_ptr<Backend> cpu = module_backend_create(builtin);
    return *cpu;
}

// The CPU backend and the modules, loaded at the first query that may need a module (an explicit CPU
// choice never loads one: no driver is touched for it).
Registry &registry() {
    static Registry r;
    static std::once_flag once;
    std::call_once(once, [] {
        r.backends.emplace_back(&cpu_backend(), [](Backend *) {});
        for (const ModuleName &m : kModules) {
            std::string why;
            if (const LoadedModule *mod = backend_module_load(m.name, &why)) {
                r.backends.emplace_back(module_backend_create(*mod).release(), [](Backend *b) { delete b; });
                Backend &b = *r.backends.back();
                r.modules[m.kind] = &b;
                if (b.score() <= 0) r.missing[m.kind] = module_unavailable_reason(b);
            } else {
                r.missing[m.kind] = why;
            }
        }
    });
    return r;
}

// A backend kind's name for messages ("cuda", not "backend 2").
const char *kind_name(ember_backend_kind kind) {
    switch (kind) {
    case EMBER_BACKEND_AUTO: return "auto";
    case EMBER_BACKEND_CPU: return "cpu";
    case EMBER_BACKEND_CUDA: return "cuda";
    case EMBER_BACKEND_VULKAN: return "vulkan";
    }
    return "unknown";
}

} // namespace

Backend *backend_find(ember_backend_kind kind) {
    if (kind == EMBER_BACKEND_CPU) return &cpu_backend();
    Registry &r = registry();
    Backend *best = nullptr;
    for (auto &b : r.backends) {
        if (b->score() <= 0 || b->api_version() != kBackendApiVersion) continue;
        if (kind != EMBER_BACKEND_AUTO && b->kind() != kind) continue;
        // Ties go to the earlier backend: the CPU backend before a CPU-type Vulkan device (lavapipe).
        if (!best || b->score() > best->score()) best = b.get();
    }
    if (kind == EMBER_BACKEND_AUTO) {
        // Once per process, what auto chose and why not the others (`ember -v` shows it): a backend that
        // is missing, or one that runs here but ranks lower (a CPU-type Vulkan device such as lavapipe
        // ties with the CPU backend and loses to it).
        static std::once_flag logged;
        std::call_once(logged, [&] {
            for (auto &[k, why] : r.missing)
                log_msg(nullptr, EMBER_LOG_INFO, "backend %s unavailable (%s); auto uses %s", kind_name(k), why.c_str(),
                        best ? best->name() : "none");
            for (auto &b : r.backends)
                if (best && b.get() != best && b->score() > 0 && b->api_version() == kBackendApiVersion)
                    log_msg(nullptr, EMBER_LOG_INFO,
                            "backend %s runs here (score %d) but auto uses %s (score %d; a tie goes to the CPU "
                            "backend, so a CPU-type device such as lavapipe is used only when asked for)",
                            b->name(), b->score(), best->name(), best->score());
        });
    }
    return best;
}

Backend &backend_require(ember_backend_kind kind) {
    if (Backend *b = backend_find(kind)) return *b;
    Registry &r = registry();
    if (auto it = r.missing.find(kind); it != r.missing.end())
        fail(EMBER_ERR_UNSUPPORTED, "backend %s is not available: %s", kind_name(kind), it->second.c_str());
    fail(EMBER_ERR_UNSUPPORTED, "backend %s is not available in this build or on this machine", kind_name(kind));
}

} // namespace ember

namespace ember {

Backend &backend_module(ember_backend_kind kind) {
    Registry &r = registry();
    if (auto it = r.modules.find(kind); it != r.modules.end()) return *it->second;
    if (auto it = r.missing.find(kind); it != r.missing.end())
        fail(EMBER_ERR_UNSUPPORTED, "backend %s is not available: %s", kind_name(kind), it->second.c_str());
    fail(EMBER_ERR_INVALID_ARGUMENT, "backend %s is not a module backend", kind_name(kind));
}

} // namespace ember
