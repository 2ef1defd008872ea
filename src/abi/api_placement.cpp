// api_placement.cpp — placement across devices through the C ABI (ember.h, EMBER_1.9).
#include "abi/api_placement.hpp"

#include "abi/handles.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>

using namespace ember;
using ember::abi::guard;

namespace ember::abi {

PlacementRequest placement_request(int32_t gpu_layers, int32_t experts_on_cpu, uint64_t gpu_budget_bytes) {
    if (gpu_layers < EMBER_GPU_LAYERS_AUTO)
        fail(EMBER_ERR_INVALID_ARGUMENT, "gpu_layers %d: a layer count, EMBER_GPU_LAYERS_ALL or EMBER_GPU_LAYERS_AUTO",
             gpu_layers);
    if (experts_on_cpu < EMBER_GPU_LAYERS_ALL)
        fail(EMBER_ERR_INVALID_ARGUMENT, "experts_on_cpu %d: a layer count or EMBER_GPU_LAYERS_ALL", experts_on_cpu);
    static_assert(EMBER_GPU_LAYERS_ALL == kPlaceAll && EMBER_GPU_LAYERS_AUTO == kPlaceAuto);
    PlacementRequest r;
    r.gpu_layers = gpu_layers, r.experts_on_cpu = experts_on_cpu, r.gpu_budget = gpu_budget_bytes;
    return r;
}

void write_placement(const PlacementPlan &plan, uint32_t n_layer, ember_backend_kind kind, ember_placement *out) {
    if (out->struct_size < sizeof *out)
        fail(EMBER_ERR_INVALID_ARGUMENT, "ember_placement.struct_size is %u, smaller than the struct (%zu); call "
             "ember_placement_init() first", out->struct_size, sizeof *out);
    ember_placement p;
    ember_placement_init(&p);
    p.n_layer = n_layer;
    if (plan.backend) {
        p.gpu_layers = plan.gpu_layers, p.experts_on_cpu = std::min(plan.experts_on_cpu, plan.gpu_layers);
        p.gpu_bytes = plan.gpu_weights + plan.gpu_context, p.cpu_bytes = plan.cpu_weights + plan.cpu_context;
        p.gpu_budget_bytes = plan.budget, p.automatic = plan.automatic;
        std::snprintf(p.description, sizeof p.description, "%s", plan.describe().c_str());
    } else {
        p.gpu_layers = kind == EMBER_BACKEND_CPU ? 0 : n_layer;
        std::snprintf(p.description, sizeof p.description, "every layer on %s",
                      kind == EMBER_BACKEND_CPU ? "cpu" : kind == EMBER_BACKEND_CUDA ? "cuda" : "vulkan");
    }
    *out = p;
}

} // namespace ember::abi

extern "C" {

void ember_placement_init(ember_placement *placement) {
    if (!placement) return;
    std::memset(placement, 0, sizeof *placement);
    placement->struct_size = sizeof *placement;
}

ember_status ember_session_placement(const ember_session *session, ember_placement *out) {
    return guard("ember_session_placement", [&] {
        EMBER_REQUIRE_ARG(session);
        EMBER_REQUIRE_ARG(out);
        const Session &s = *session->session;
        abi::write_placement(s.placement(), s.model().desc().hp.n_layer, s.backend_kind(), out);
        return EMBER_OK;
    });
}

ember_status ember_engine_placement(ember_engine *engine, ember_placement *out) {
    return guard("ember_engine_placement", [&] {
        EMBER_REQUIRE_ARG(engine);
        EMBER_REQUIRE_ARG(out);
        const Engine &e = *engine->engine;
        abi::write_placement(e.placement(), e.model().desc().hp.n_layer, e.backend_kind(), out);
        return EMBER_OK;
    });
}

} // extern "C"
