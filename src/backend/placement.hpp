// placement.hpp — a model run across two devices: contiguous decoder layers on a GPU backend, the rest on
// the CPU, and optionally the MoE experts of some GPU layers on the CPU (program_split.hpp cuts the
// program). A placement is itself a Backend (SplitBackend), so sessions, engines, forks, saved states and
// speculation use it as they use any backend; its contexts run the parts in turn, the activations crossing
// once per cut.
//
// Which layers: where the GPU module starts parts from activations (Backend::input_rows), the GPU takes
// the last layers and the output (as llama.cpp's -ngl counts: the output head, a large product, stays on
// the faster device), else the first layers and the embedding. Experts on the CPU are those of the first
// GPU layers (llama.cpp's --n-cpu-moe counts the same way).
//
// Automatic fit (plan_placement): among the placements whose GPU part fits the budget (weights, K/V rows
// and recurrent state for the requested context and sequences, activations), the one that decodes fastest
// by this rule: every layer on the GPU first; for a MoE model, then the fewest layers' experts on the CPU
// (a token reads only a few experts, so they cost the CPU little while they take most of the memory);
// then the most layers on the GPU.
#pragma once

#include "backend/backend.hpp"
#include "backend/program_split.hpp"

#include <string>

namespace ember {

constexpr int32_t kPlaceAll = -1;   // every layer (gpu_layers), or every layer's experts (experts_on_cpu)
constexpr int32_t kPlaceAuto = -2;  // gpu_layers: the fastest placement that fits the budget

struct PlacementRequest {
    int32_t gpu_layers = kPlaceAll;   // 0..n_layer, kPlaceAll or kPlaceAuto
    int32_t experts_on_cpu = 0;       // 0..n_layer or kPlaceAll
    uint64_t gpu_budget = 0;          // bytes the GPU part may take; 0: the device's free memory less a margin
    // Whether the request asks for anything but the backend's usual whole-model placement.
    bool split() const { return gpu_layers != kPlaceAll || experts_on_cpu != 0 || gpu_budget != 0; }
};

// A placement chosen for a model and context: the layer counts and what each device holds.
struct PlacementPlan {
    uint32_t n_layer = 0, gpu_layers = 0, experts_on_cpu = 0;
    bool gpu_last = true;                // the GPU holds the last layers (and the output), else the first
    uint64_t gpu_weights = 0, gpu_context = 0, cpu_weights = 0, cpu_context = 0;
    uint64_t budget = 0;                 // the GPU budget it was chosen for
    bool automatic = false;
    std::string gpu_name;
    Backend *backend = nullptr;          // what runs it: the GPU backend, the CPU, or a SplitBackend
    // "layers 12-23 and the output on vulkan (640.0 MiB: weights 600.0, context 40.0); layers 0-11 on cpu
    // (...)": for logs, errors and `ember info --fit`.
    std::string describe() const;
};

// Chooses (kPlaceAuto) or checks the placement of desc on `gpu` for a context of params. Throws
// EMBER_ERR_OUT_OF_MEMORY before anything is allocated when the GPU part of an explicit placement exceeds
// the budget, or EMBER_ERR_UNSUPPORTED when the GPU backend cannot run the parts it would get.
PlacementPlan plan_placement(const ember_mod_model_desc &desc, Backend &gpu, const ContextParams &params,
                             const PlacementRequest &req);

// The backend that runs gpu_layers layers of a model on `gpu` (the rest on the CPU) with the experts of
// experts_on_cpu of them on the CPU: `gpu` itself or the CPU backend where nothing is split, else a
// SplitBackend kept for the process's life (one per combination, so Model's per-backend weight cache
// holds each placement's weights once).
Backend &placed_backend(Backend &gpu, uint32_t n_layer, uint32_t gpu_layers, uint32_t experts_on_cpu);

// The parts of a SplitBackend's model: each with the backend that runs it (program order).
struct PlacedPart {
    std::unique_ptr<ProgramPart> part;
    Backend *backend = nullptr;
    bool on_gpu = false;   // the GPU's part (the CPU backend itself may stand in for a GPU in tests)
};
// How desc is cut for that placement (PlacementPlan's rules); throws EMBER_ERR_UNSUPPORTED as plan_placement.
std::vector<PlacedPart> place_program(const ember_mod_model_desc &desc, Backend &gpu, uint32_t gpu_layers,
                                      uint32_t experts_on_cpu);
// A part's context params: the last part returns the logits rows, the others every token's row; only a
// part with recurrent layers keeps state slots.
ContextParams part_params(const ProgramPart &p, const ContextParams &whole, bool last);

} // namespace ember
