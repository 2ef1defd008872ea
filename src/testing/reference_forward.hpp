// reference_forward.hpp — an exact (double-precision) forward pass of every supported family, for tests
// and for the logit comparisons of bench/ (library ember_testing, not part of libember).
//
// Families: llama, qwen2, qwen3, qwen3moe, gemma2, gemma3, phi3, granite, olmo2, gpt-oss, llama4, and the
// Gated DeltaNet hybrids qwen35, qwen35moe (Qwen3.5 / Qwen3.6) and qwen3next, whose recurrent state
// (convolution window and delta-rule matrices) is kept in double too.
//
// Written from the families' definitions (their papers, model cards and configurations, and the GGUF
// conventions for names and keys), not from src/model: it is what the program src/model builds is
// checked against. It reads the weights exactly as stored (dequantized to double) and rounds K and V to
// f16 as the default KV cache does; everything else is double.
#pragma once

#include "model/model.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace ember {

// Logits after each token of `tokens` (positions 0..n-1, one sequence). Throws Error for a family it
// does not know.
// What the pass saw that bears on comparing with it.
struct ReferenceStats {
    // The smallest margin, over tokens and layers, between the last chosen expert's router logit and
    // the best of the others (infinite without experts). Where a product's rounding moves router
    // logits by more than this, its choice of experts may differ: a jump, not a rounding error.
    double min_route_margin = 1e300;
};
// n_ctx: the context the pass runs in (0: the tokens' count), which picks LongRoPE's long factors when
// it exceeds rope.scaling.original_context_length (context_length when absent), as llama.cpp picks them
// by the context per sequence.
std::vector<std::vector<double>> reference_logits(const Model &model, const std::vector<int32_t> &tokens,
                                                  ReferenceStats *stats = nullptr, uint32_t n_ctx = 0);
// The same from the parsed file alone: for families Ember's loader does not take (yet).
std::vector<std::vector<double>> reference_logits(const gguf::File &file, const std::vector<int32_t> &tokens,
                                                  ReferenceStats *stats = nullptr, uint32_t n_ctx = 0);
// The same for the model in a GGUF file (parsed here, not loaded as a Model): for tools that run Ember
// through its public API, and for families Ember does not run.
std::vector<std::vector<double>> reference_logits_file(const std::string &path, const std::vector<int32_t> &tokens);
// A tensor's values as stored (every row, dequantized), as doubles: what both passes read weights with.
std::vector<double> reference_weights(const gguf::TensorInfo &t);
// Gemma 4's pass (reference_gemma4.cpp), which reference_logits runs for files of that architecture.
std::vector<std::vector<double>> reference_gemma4_logits(const gguf::File &file, const std::vector<int32_t> &tokens,
                                                         ReferenceStats *stats);

} // namespace ember
