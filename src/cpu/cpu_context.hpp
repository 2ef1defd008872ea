// cpu_context.hpp — the CPU backend's context: a paged KV cache (f16 or Q8_0 rows), activation buffers,
// threads.
#pragma once

#include "backend/backend.hpp"
#include "cpu/kernels.hpp"

#include <memory>
#include <vector>

namespace ember::cpu {

// Everything a CpuContext allocates, as counts: computed before allocating, and by memory estimates
// (one function, so an estimate is what the context will really take).
struct CpuContextSizes {
    size_t kv_rows = 0;                         // cache rows in K (and as many in V), all layers
    size_t kv_row_bytes = 0;                    // bytes of one row (n_embd_kv values of the cache type)
    size_t rows = 0;                            // activation rows (max of n_batch and n_logits)
    size_t embd = 0, q = 0, kv = 0, ff = 0;     // row widths of the activation buffers
    size_t scratch = 0;                         // bytes of quantized activations
    size_t bytes() const {
        return 2 * kv_rows * kv_row_bytes + rows * (3 * embd + 2 * q + 2 * kv + 2 * ff) * sizeof(float) + scratch;
    }
};
CpuContextSizes cpu_context_sizes(const ModelDesc &desc, const ContextParams &params);

class CpuContext final : public BackendContext {
public:
    CpuContext(const ModelDesc &desc, const ContextParams &params);
    void forward(const Batch &batch) override;
    void copy_block(int32_t src, int32_t dst) override;
    size_t kv_bytes_per_token() const override;
    void read_kv(const int32_t *table, uint32_t n, uint8_t *dst) const override;
    void write_kv(const int32_t *table, uint32_t n, const uint8_t *src) override;

private:
    void layer(uint32_t il, const Batch &b);
    // K (or V) of layer il, block 0, row 0; a block is block_size rows of row_bytes_.
    uint8_t *k_layer(uint32_t il) { return k_cache_.data() + il * layer_stride_; }
    uint8_t *v_layer(uint32_t il) { return v_cache_.data() + il * layer_stride_; }
    // Byte offset of the row of position p (block table `table`) in layer il's K or V cache.
    size_t row_offset(uint32_t il, const int32_t *table, uint32_t p) const {
        const uint32_t bs = params_.block_size;
        return il * layer_stride_ + (static_cast<size_t>(table[p / bs]) * bs + p % bs) * row_bytes_;
    }

    const ModelDesc &desc_;
    ContextParams params_;
    std::shared_ptr<ThreadPool> pool_;   // shared with contexts made with share_threads_with
    Scratch scratch_;
    size_t row_bytes_ = 0;       // one position's K (or V) row of one layer
    size_t layer_stride_ = 0;    // bytes per layer: n_blocks * block_size * row_bytes_
    std::vector<uint8_t> k_cache_, v_cache_;
    // Activations for up to n_batch tokens.
    std::vector<float> x_, xn_, q_, k_, v_, attn_, tmp_, gate_, up_;
};

} // namespace ember::cpu
