// vk_model.hpp — a model's weights on a Vulkan device, and its contexts (KV cache, activations,
// forward pass).
#pragma once

#include "backend/module_api.h"
#include "vk_exec.hpp"

#include <cstdint>
#include <vector>

namespace ember::vk {

struct Hp {
    uint32_t n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_rot;
    bool neox;
    float eps, theta, freq_scale;
    uint32_t n_q() const { return n_head * head_dim; }
    uint32_t n_kv() const { return n_head_kv * head_dim; }
};
Hp hparams(const ember_mod_model_desc &d);

struct LayerRefs {
    uint32_t attn_norm, ffn_norm;                 // f32 vectors: word offsets
    uint32_t bq = kNone, bk = kNone, bv = kNone, bo = kNone;
    WeightRef wq, wk, wv, wo, gate, up, down;
};

class Model {
public:
    Model(Device &dev, const ember_mod_model_desc &d);
    ~Model();
    Device &dev;
    Hp hp;
    Buffer weights;
    WeightRef tok_embd, output;
    uint32_t output_norm = 0;
    std::vector<LayerRefs> layers;
    std::vector<double> rope_freq;  // n_rot/2 frequencies, in double as the CPU forms them
};

// What a context allocates (one function: the estimate is what create allocates).
struct ContextSizes {
    size_t kv_row_bytes = 0, kv_layer_bytes = 0;
    size_t acts_words = 0;
    uint32_t rows = 0;
    // activation offsets (words)
    uint32_t x, xn, q, k, v, attn, gate, up, logits, xq, xd, xs, part;
    uint64_t bytes() const { return 2 * kv_layer_bytes * n_layer + acts_words * 4; }
    uint32_t n_layer = 0;
};
ContextSizes context_sizes(const ember_mod_model_desc &d, const ember_mod_context_params &p);

class Context {
public:
    Context(Model &m, const ember_mod_context_params &p);
    ~Context();
    void forward(const ember_mod_batch &b);
    void copy_block(int32_t src, int32_t dst);
    void read_kv(const int32_t *table, uint32_t n, uint8_t *dst);
    void write_kv(const int32_t *table, uint32_t n, const uint8_t *src);

private:
    void release();
    void ensure_io(size_t words);
    void record_layer(Recorder &r, uint32_t il, uint32_t n, uint32_t io_pos, uint32_t io_rows, uint32_t io_tab,
                      uint32_t io_cs, uint32_t max_keys);
    // Matmul of acts at x_off (rows rows of w.n_in) whatever the weight type; quantizes first if needed
    // (quantized_for: the input offset whose quantized copy is already in xq, to share it between the
    // Q/K/V or gate/up products).
    void mm(Recorder &r, const WeightRef &w, uint32_t x_off, uint32_t rows, uint32_t y_off, uint32_t bias, bool acc,
            uint32_t &quantized_for);
    size_t row_off(uint32_t il, const int32_t *table, uint32_t p) const;

    Model &m_;
    Device &dev_;
    ember_mod_context_params p_;
    DType kv_type_;
    ContextSizes z_;
    Buffer acts_, kc_, vc_, io_;
    Bindings bind_;
    VkCommandPool pool_ = VK_NULL_HANDLE;
    VkCommandBuffer cb_ = VK_NULL_HANDLE;
    VkFence fence_ = VK_NULL_HANDLE;
};

} // namespace ember::vk
