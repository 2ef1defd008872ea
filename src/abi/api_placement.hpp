// api_placement.hpp — placement across devices through the C ABI: the params' fields to a request, a plan
// to ember_placement (api_placement.cpp).
#pragma once

#include "backend/placement.hpp"

#include <ember/ember.h>

namespace ember::abi {

// ember_*_params' gpu_layers, experts_on_cpu and gpu_budget_bytes, checked (EMBER_ERR_INVALID_ARGUMENT).
PlacementRequest placement_request(int32_t gpu_layers, int32_t experts_on_cpu, uint64_t gpu_budget_bytes);
// A plan into *out (struct_size checked); a plan without a backend (one device) as n_layer layers on
// `kind`'s device, or none on the CPU.
void write_placement(const PlacementPlan &plan, uint32_t n_layer, ember_backend_kind kind, ember_placement *out);

} // namespace ember::abi
