// vk_model.hpp — a model's tensors and program on a Vulkan device, and its contexts (KV cache, the
// program's activation buffers, the forward pass that records the program's steps).
#pragma once

#include "backend/module_api.h"
#include "vk_exec.hpp"
#include "vk_moe.hpp"
#include "vk_program.hpp"

#include <cstdint>
#include <map>
#include <vector>

namespace ember::vk {

class Model {
public:
    Model(Device &dev, const ember_mod_model_desc &d);
    ~Model();
    Device &dev;
    Program prog;
    Buffer weights;
    std::vector<WeightRef> tensors;  // by the description's index; a tensor listed twice is stored once
    uint32_t vec(int32_t t) const { return t < 0 ? kNone : tensors[static_cast<size_t>(t)].off; }
    // MOE's choice biases (EMBER_GRAPH_MOE_GATE_SIGMOID's sel_bias), by tensor index: the routing runs on the host.
    std::map<int32_t, std::vector<float>> sel_bias;
    const float *sel_bias_of(int32_t t) const {
        auto it = sel_bias.find(t);
        return it == sel_bias.end() ? nullptr : it->second.data();
    }
    // A part of a program cut across devices starts from the batch's input rows in this buffer (-1: tokens).
    int32_t input_buf = -1;
};

// What a context allocates (one function: the estimate is what create allocates).
struct ContextSizes {
    size_t kv_row_bytes = 0;
    // With n_window_blocks, the sliding-window layers' rows are in a pool of their own (backend.hpp):
    // such a layer's K (or V) cache is n_window_blocks blocks, the others' n_blocks; a layer without a
    // KV_STORE (a hybrid model's recurrent layer) has none. [n_layer] whether each layer is windowed,
    // whether it keeps rows and where its cache starts in the K (or V) buffer; kv_bytes: that buffer.
    std::vector<bool> windowed, has_kv;
    std::vector<size_t> kv_layer_off;
    size_t kv_bytes = 0;
    uint32_t n_layer = 0;
    size_t acts_words = 0;
    std::vector<uint32_t> buf_off;  // the program's buffers (word offsets in the activations; kNone: unused)
    uint32_t xq = 0, xd = 0, xs = 0, part = 0;  // quantized matmul inputs, attention's split-K partials
    MoeWork moe;                                // MOE's work buffers (vk_moe.hpp)
    uint32_t n_state_slots = 0;
    size_t state_bytes = 0;                     // the recurrent states: n_state_slots of state_floats f32
    uint64_t bytes() const { return 2 * kv_bytes + acts_words * 4 + state_bytes; }
};
ContextSizes context_sizes(const Program &prog, const ember_mod_context_params &p);

class Context {
public:
    Context(Model &m, const ember_mod_context_params &p);
    ~Context();
    Device &device() { return dev_; }
    void forward(const ember_mod_batch &b);
    void copy_block(int32_t src, int32_t dst);
    void read_kv(const int32_t *table, uint32_t n, uint8_t *dst);
    void write_kv(const int32_t *table, uint32_t n, const uint8_t *src);
    // The recurrent states by slot (module_api.h): copy one to another, read or write one's floats.
    void copy_state(int32_t src, int32_t dst);
    void read_state(int32_t slot, float *dst);
    void write_state(int32_t slot, const float *src);

private:
    // Where a pass's inputs sit in the io buffer (word offsets).
    struct Io {
        uint32_t tok, pos, rows, tab, lrows, logits;
        uint32_t wrows, wtab;        // the window layers' cache rows and table offsets (kNone: no window pool)
        std::vector<uint32_t> rope;  // the cos/sin table of each of the program's rope sets
        uint32_t max_keys;
        uint32_t seq_last;           // per token, the last position of its sequence in the pass (SEQUENCE mask)
        uint32_t moe_logits;         // a MOE node's router logits, read back for the routing
        MoeIo moe;                   // its routing lists
        uint32_t runs, n_runs;       // the sequences' state runs (state_runs.glsl), for a model with state
        uint32_t inputs, hidden;     // the batch's input rows and the pass's hidden rows (kNone: none)
        uint32_t input;              // the batch's input rows (Model::input_buf), copied to their buffer first
    };
    Io fill_io(const ember_mod_batch &b);
    void record_input(const Io &io, uint32_t n);
    void record(Recorder &r, const Step &s, const Io &io, uint32_t n, uint32_t nl);
    void release();
    void ensure_io(size_t words);
    // Byte offset of position p's row (in block `block` of layer il's pool) in the K or V buffer.
    size_t row_off(uint32_t il, int32_t block, uint32_t p) const;
    // The staged copies of read_kv/write_kv: for each layer, K (or V) rows of positions 0..n-1 at
    // staging offset il * 2n + (0 or n) rows; rows of released window blocks (-1) have none.
    void kv_copies(const int32_t *table, uint32_t n, bool to_stage, std::vector<VkBufferCopy> &ck,
                   std::vector<VkBufferCopy> &cv) const;
    uint32_t off(int32_t buf) const { return z_.buf_off[static_cast<size_t>(buf)]; }
    void check_slot(int32_t slot, const char *what) const;
    // The batch's state runs (5 ints each, state_runs.glsl) and its kept-state slots, checked as the CPU
    // checks them; n_runs gets the number of runs.
    std::vector<int32_t> state_runs(const ember_mod_batch &b, uint32_t &n_runs) const;
    // Bytes of the staging of read_kv / write_kv: K and V rows of n positions of the layers that keep them.
    size_t kv_stage_bytes(uint32_t n) const;

    Model &m_;
    Device &dev_;
    ember_mod_context_params p_;
    DType kv_type_;
    ContextSizes z_;
    Buffer acts_, kc_, vc_, io_, states_;
    Bindings bind_;
    MoeRoute route_;                 // the routing of the MOE step being recorded
    VkCommandPool pool_ = VK_NULL_HANDLE;
    VkCommandBuffer cb_ = VK_NULL_HANDLE;
    VkFence fence_ = VK_NULL_HANDLE;
};

} // namespace ember::vk
