// synthetic.hpp — GGUF models of any shape with random weights, written by our own GGUF writer.
//
// For tests (architecture features the shipped real models do not exercise: biases, NEOX rope, rope
// scaling factors, GQA shapes) and for speed measurements on realistic shapes (a TinyLlama-shaped Q4_0
// or Q4_K_M model, say) without downloading anything. The vocabulary is a small SentencePiece-style one.
#pragma once

#include "core/dtype.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace ember {

// How the matrices' types are chosen: all `type`, or a mix by role (see synthetic.cpp for the recipe).
enum class WeightMix { Uniform, Q4_K_M };

struct SyntheticSpec {
    std::string arch = "llama";   // "llama", "qwen2" or "qwen3"
    uint32_t n_vocab = 64;        // >= 8
    uint32_t n_embd = 64;
    uint32_t n_layer = 2;
    uint32_t n_head = 4;
    uint32_t n_head_kv = 2;
    uint32_t n_ff = 96;
    uint32_t n_ctx = 512;
    DType type = DType::F32;      // matrices: F32, F16, BF16 or a quantized type the CPU kernels take (norms
                                  // and biases stay F32); K-quants need rows of whole 256-blocks, else fall back
    WeightMix mix = WeightMix::Uniform;  // Q4_K_M: `type` is ignored
    bool tied_output = true;      // no output.weight: the embedding matrix is reused
    bool qkv_bias = false;        // Q/K/V biases (qwen2 requires them)
    bool qk_norm = false;         // per-head q/k norm weights (qwen3 requires them)
    uint32_t head_dim = 0;        // 0: n_embd / n_head; else written as attention.key_length
    bool rope_freqs = false;      // add a rope_freqs.weight tensor (Llama-3 style scaling factors)
    float rope_theta = 10000.0f;
    uint64_t seed = 1;
};

// The GGUF file's bytes. Weights are uniform in ±1/sqrt(n_in) (norm weights around 1), so activations
// stay O(1) through the layers.
std::vector<uint8_t> synthetic_model_gguf(const SyntheticSpec &spec);

} // namespace ember
