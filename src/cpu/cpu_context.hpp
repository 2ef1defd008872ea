// cpu_context.hpp — the CPU backend's per-sequence state: an f16 KV cache, activation buffers, threads.
#pragma once

#include "backend/backend.hpp"
#include "cpu/kernels.hpp"

#include <memory>
#include <vector>

namespace ember::cpu {

class CpuContext final : public BackendContext {
public:
    CpuContext(const ModelDesc &desc, const ContextParams &params);
    void forward(const int32_t *tokens, uint32_t n, uint32_t pos0, float *logits) override;
    size_t memory_bytes() const override;

private:
    void layer(uint32_t il, uint32_t n, uint32_t pos0);

    const ModelDesc &desc_;
    ContextParams params_;
    ThreadPool pool_;
    Scratch scratch_;
    // KV cache: per layer n_ctx rows of n_embd_kv f16 values, row = position.
    std::vector<uint16_t> k_cache_, v_cache_;
    // Activations for up to n_batch tokens.
    std::vector<float> x_, xn_, q_, k_, v_, attn_, tmp_, gate_, up_;
    std::vector<int32_t> pos_;
    std::vector<float> rope_factors_;
};

} // namespace ember::cpu
