// model_desc.hpp — a model as the backends see it: hyper-parameters and weight views, architecture-free.
//
// The architecture files (model/arch_*.cpp) turn GGUF metadata and tensor names into this description;
// every backend executes the same decoder from it. A new architecture that fits the decoder (norm →
// attention → norm → gated FFN, with optional biases and rope variants) is one small arch file.
#pragma once

#include "core/dtype.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ember {

// A tensor's bytes as stored in the file (host memory: the mapping). n_dims <= 4, ne[0] innermost.
struct TensorRef {
    std::string name;
    DType type = DType::F32;
    int n_dims = 0;
    int64_t ne[4] = {1, 1, 1, 1};
    const void *data = nullptr;
    size_t n_bytes = 0;
};

struct HParams {
    uint32_t n_vocab = 0;
    uint32_t n_embd = 0;
    uint32_t n_layer = 0;
    uint32_t n_head = 0;
    uint32_t n_head_kv = 0;
    uint32_t head_dim = 0;     // n_embd / n_head unless the file says otherwise
    uint32_t n_ff = 0;
    uint32_t n_ctx_train = 0;
    float norm_eps = 1e-5f;    // RMSNorm epsilon
    // Rotary embedding
    uint32_t n_rot = 0;        // rotated dims per head
    bool rope_neox = false;    // pairs (i, i + n_rot/2) instead of (2i, 2i + 1)
    float rope_theta = 10000.0f;
    float rope_freq_scale = 1.0f;

    uint32_t n_embd_kv() const { return n_head_kv * head_dim; }
    uint32_t n_embd_q() const { return n_head * head_dim; }
};

struct LayerWeights {
    const TensorRef *attn_norm = nullptr;
    const TensorRef *wq = nullptr, *wk = nullptr, *wv = nullptr, *wo = nullptr;
    const TensorRef *bq = nullptr, *bk = nullptr, *bv = nullptr, *bo = nullptr;  // optional biases
    const TensorRef *ffn_norm = nullptr;
    const TensorRef *ffn_gate = nullptr, *ffn_up = nullptr, *ffn_down = nullptr;
};

struct ModelDesc {
    std::string arch;
    HParams hp;
    const TensorRef *tok_embd = nullptr;
    const TensorRef *output_norm = nullptr;
    const TensorRef *output = nullptr;       // == tok_embd when the model ties them
    const TensorRef *rope_freqs = nullptr;   // optional per-frequency divisors (Llama-3 rope scaling)
    std::vector<LayerWeights> layers;
};

} // namespace ember
