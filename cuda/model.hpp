// model.hpp — a model's weights on a CUDA device, and a context (KV cache, activations, the forward
// pass: the model's program run node by node, the decode step's CUDA graph).
#pragma once

#include "backend/module_api.h"
#include "cublaslt.hpp"
#include "device.hpp"
#include "inputs.hpp"
#include "kernels.hpp"
#include "program.hpp"
#include "recurrent.hpp"

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

// A model on the device: its program (checked at load) and the tensors the program reads, uploaded once
// each (a tied output matrix is the embedding's index), matrices in the kernels' layout (weights.hpp),
// vectors (norms, biases, rope factors) as the file's F32.
class Model {
public:
    Model(Device &dev, const ember_mod_model_desc &desc);
    Device &dev;
    Program prog;
    // By tensor index; empty (codes null) for a tensor the program does not read.
    std::vector<DevWeight> tensors;
    // By tensor index: a MOE expert stack's matrices, one per expert (empty for other tensors).
    std::vector<std::vector<DevWeight>> experts;
    const DevWeight &matrix(int32_t i) const { return tensors[static_cast<size_t>(i)]; }
    // An F32 vector, or nullptr for -1 (an optional tensor that is absent).
    const float *vec(int32_t i) const { return i < 0 ? nullptr : static_cast<const float *>(tensors[static_cast<size_t>(i)].codes); }
    // MOE's choice biases (EMBER_GRAPH_MOE_GATE_SIGMOID's sel_bias) on the host, where the routing runs.
    std::map<int32_t, std::vector<float>> sel_bias;
    const float *sel_bias_of(int32_t t) const {
        auto it = sel_bias.find(t);
        return it == sel_bias.end() ? nullptr : it->second.data();
    }
    // Token ids must be below this: the smallest GET_ROWS table's rows (UINT32_MAX without one).
    uint32_t n_token_ids = UINT32_MAX;
    // A part of a program cut across devices starts from the batch's input rows in this buffer (-1: tokens).
    int32_t input_buf = -1;

private:
    DevBuf buf_;
};

// Matrix products of one stream: the matrix-vector kernels (up to 32 tokens per pass over a weight),
// or, with $EMBER_CUDA_CUBLASLT=1 and cuBLASLt there, cuBLASLt (dequantized tiles) for more than 8
// tokens (not batch-invariant: see the constructor).
class Matmul {
public:
    Matmul();
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
    static constexpr size_t kScratchBytes = kMatmulScratchBytes, kWorkspaceBytes = kMatmulWorkspaceBytes;

private:
    const LtApi *lt_ = nullptr;
    cublasLtHandle_t h_ = nullptr;
    DevBuf scratch_, workspace_;
};

class Context {
public:
    Context(Model &m, const ember_mod_context_params &p);
    ~Context();
    void forward(const ember_mod_batch &b);
    void copy_block(int32_t src, int32_t dst);
    void read_kv(const int32_t *table, uint32_t n, uint8_t *dst);
    void write_kv(const int32_t *table, uint32_t n, const uint8_t *src);
    // The recurrent states by slot (module_api.h): a device copy, or one slot's state_floats to or from the host.
    void copy_state(int32_t src, int32_t dst);
    void read_state(int32_t slot, float *dst);
    void write_state(int32_t slot, const float *src);

private:
    void enqueue(uint32_t n, uint32_t n_logits, bool cancellable, const ember_mod_batch *b);
    void attention_node(const ember_graph_node &nd, uint32_t n);
    // MOE: reads the router logits back (a stream synchronisation), routes, enqueues the experts.
    void moe_node(const ember_graph_node &nd, uint32_t rows);
    float *buf(int32_t i) const { return reinterpret_cast<float *>(act_.data() + z_.buf_offset[static_cast<size_t>(i)]); }
    float *scratch(size_t offset) const { return reinterpret_cast<float *>(act_.data() + offset); }
    int32_t *io() const { return reinterpret_cast<int32_t *>(act_.data() + z_.io); }
    // The layer's K (or V) cache in buffer c; whether it is a window layer (its rows in the window pool).
    uint8_t *layer_cache(const DevBuf &c, int32_t layer) const { return c.data() + z_.kv_layer_off[static_cast<size_t>(layer)]; }
    bool windowed(int32_t layer) const { return z_.windowed[static_cast<size_t>(layer)]; }
    bool has_kv(uint32_t layer) const { return m_.prog.has_kv[layer]; }
    // The pass's sequence runs (in io, inputs.hpp's StateIo) and the state slots, for the stateful kernels.
    StateRuns state_runs() const;
    float *state_slot(int32_t slot) const {
        return reinterpret_cast<float *>(states_.data()) + static_cast<size_t>(slot) * m_.prog.state_floats;
    }
    void check_slot(int32_t slot, const char *what) const;
    // read_kv/write_kv's rows of the main and the window blocks (inputs.hpp), uploaded.
    struct KvPlans;
    KvPlans kv_plans(const int32_t *table, uint32_t n);
    // read_kv (dst set) and write_kv (src set): one walk over the layers' cache rows, in either direction.
    void copy_kv(const int32_t *table, uint32_t n, uint8_t *dst, const uint8_t *src);
    // Where the window layers' cache slots and table offsets are in io (inputs.hpp).
    const int32_t *window_slots() const { return io() + step_io_window_slots(z_.rows, p_.n_logits); }
    const int32_t *window_offsets() const { return io() + step_io_window_offsets(z_.rows, p_.n_logits); }
    // Each token's sequence's last position in the pass (a program that attends both ways).
    const int32_t *seq_last() const {
        return io() + step_io_seq_last(z_.rows, p_.n_logits, p_.n_window_blocks > 0, z_.n_state_slots > 0);
    }

    Model &m_;
    ember_mod_context_params p_;
    ContextSizes z_;
    cudaStream_t s_ = nullptr;
    bool own_stream_ = false;
    DevBuf k_, v_, act_, tables_;
    DevBuf states_;                     // [n_state_slots][state_floats] f32, zeroed at creation
    HostBuf host_io_, host_logits_;
    HostBuf host_moe_;                  // MOE: the route's lists on their way to the device
    std::vector<float> router_logits_;  // MOE: a node's router logits read back
    size_t host_io_bytes_ = 0;
    std::unique_ptr<Matmul> mm_;
    // Whether every token of this pass reads one block table (a prompt chunk of one sequence): the
    // attention kernel then shares K/V tiles between tokens (attention_q_tile).
    bool one_table_ = false;
    // The decode step's graph, for one (n_tokens, n_logits, one table) shape; re-captured when it
    // changes.
    cudaGraphExec_t graph_ = nullptr;
    uint32_t graph_n_ = 0, graph_logits_ = 0;
    bool graph_one_table_ = false;
    bool graphs_ = true;
};

} // namespace ember::cu
