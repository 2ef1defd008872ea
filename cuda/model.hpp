// model.hpp — a model's weights on a CUDA device, and a context (KV cache, activations, the forward
// pass, the decode step's CUDA graph).
#pragma once

#include "backend/module_api.h"
#include "cublaslt.hpp"
#include "device.hpp"
#include "kernels.hpp"

#include <map>
#include <utility>
#include <memory>
#include <vector>

namespace ember::cu {

// A device allocation freed with the object.
class DevBuf {
public:
    DevBuf() = default;
    explicit DevBuf(size_t bytes);
    ~DevBuf();
    DevBuf(DevBuf &&o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
    DevBuf &operator=(DevBuf &&o) noexcept;
    uint8_t *data() const { return static_cast<uint8_t *>(p_); }
    size_t size() const { return n_; }

private:
    void *p_ = nullptr;
    size_t n_ = 0;
};

// Pinned host memory (the staging of a pass's inputs and logits).
class HostBuf {
public:
    HostBuf() = default;
    explicit HostBuf(size_t bytes);
    ~HostBuf();
    HostBuf(HostBuf &&o) noexcept : p_(o.p_) { o.p_ = nullptr; }
    HostBuf &operator=(HostBuf &&o) noexcept {
        std::swap(p_, o.p_);
        return *this;
    }
    uint8_t *data() const { return static_cast<uint8_t *>(p_); }

private:
    void *p_ = nullptr;
};

struct Hyper {
    uint32_t n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_rot;
    bool neox;
    float eps, rope_theta, rope_freq_scale;
    uint32_t n_embd_q() const { return n_head * head_dim; }
    uint32_t n_embd_kv() const { return n_head_kv * head_dim; }
};
Hyper hyper_of(const ember_mod_model_desc &d);

struct LayerW {
    const float *attn_norm = nullptr, *ffn_norm = nullptr;
    const float *bq = nullptr, *bk = nullptr, *bv = nullptr, *bo = nullptr;
    DevWeight wq, wk, wv, wo, gate, up, down;
};

class Model {
public:
    Model(Device &dev, const ember_mod_model_desc &desc);
    Device &dev;
    Hyper hp;
    DevWeight tok_embd, output;
    const float *output_norm = nullptr, *rope_freqs = nullptr;
    std::vector<LayerW> layers;

private:
    DevBuf buf_;
};

// Matrix products of one stream: matrix-vector kernels for few tokens, cuBLASLt (dequantized tiles)
// for more when cuBLASLt is there.
class Matmul {
public:
    explicit Matmul(bool use_lt);
    ~Matmul();
    Matmul(const Matmul &) = delete;
    Matmul &operator=(const Matmul &) = delete;
    // Prepares an input of n rows of n_in for the weights that read it (quantized codes, f16 copy).
    struct Input {
        const float *x;
        int64_t n, n_in;
        ActQ8 q;
        uint16_t *x16;
        bool have_q = false, have_16 = false;
    };
    // y (n rows of w.n_out) = [y +] W x + bias.
    void run(const DevWeight &w, Input &in, float *y, const float *bias, bool accumulate, cudaStream_t s);
    // Whether n tokens go through cuBLASLt.
    bool gemm_for(int64_t n) const { return lt_ && n > kGemvMaxTokens; }
    static constexpr int64_t kGemvMaxTokens = 8;
    static constexpr size_t kScratchBytes = size_t{64} << 20, kWorkspaceBytes = size_t{32} << 20;

private:
    const LtApi *lt_ = nullptr;
    cublasLtHandle_t h_ = nullptr;
    DevBuf scratch_, workspace_;
};

// What a context allocates on the device, computed without a device (context_bytes).
struct ContextSizes {
    size_t kv_row_bytes = 0, kv_layer_bytes = 0;  // one row; one layer's K (or V) cache
    size_t rows = 0, max_in = 0;
    size_t partial_rows = 0;
    size_t offsets[32] = {};
    size_t total = 0;  // bytes of the activation buffer
    size_t bytes(const Hyper &hp) const {
        return 2 * hp.n_layer * kv_layer_bytes + total + Matmul::kScratchBytes + Matmul::kWorkspaceBytes;
    }
};
ContextSizes context_sizes(const Hyper &hp, const ember_mod_context_params &p);

class Context {
public:
    Context(Model &m, const ember_mod_context_params &p);
    ~Context();
    void forward(const ember_mod_batch &b);
    void copy_block(int32_t src, int32_t dst);
    void read_kv(const int32_t *table, uint32_t n, uint8_t *dst);
    void write_kv(const int32_t *table, uint32_t n, const uint8_t *src);

private:
    void enqueue(uint32_t n, uint32_t n_logits, bool cancellable, const ember_mod_batch *b);
    void layer(uint32_t il, uint32_t n);
    float *f(int i) const { return reinterpret_cast<float *>(act_.data() + z_.offsets[i]); }
    int32_t *io(int i) const { return reinterpret_cast<int32_t *>(act_.data() + z_.offsets[i]); }
    std::vector<int32_t> slot_rows(const int32_t *table, uint32_t n) const;

    Model &m_;
    ember_mod_context_params p_;
    ContextSizes z_;
    cudaStream_t s_ = nullptr;
    bool own_stream_ = false;
    DevBuf k_, v_, act_, tables_;
    HostBuf host_io_, host_logits_;
    size_t host_io_bytes_ = 0;
    std::unique_ptr<Matmul> mm_;
    int n_splits_ = 1, q_tile_ = 1;
    // The decode step's graph, for one (n_tokens, n_logits, attention tile) shape; re-captured when it
    // changes.
    cudaGraphExec_t graph_ = nullptr;
    uint32_t graph_n_ = 0, graph_logits_ = 0;
    int graph_q_tile_ = 0;
    bool graphs_ = true;
};

} // namespace ember::cu
