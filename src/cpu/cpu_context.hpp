// cpu_context.hpp — the CPU backend's model (the description, weights used in place from the file
// mapping) and context: a paged KV cache (f16, Q8_0 or Q4_0 rows), the program's activation buffers, threads.
#pragma once

#include "backend/module_api.h"
#include "cpu/kernels.hpp"
#include "cpu/recurrent.hpp"

#include <atomic>
#include <memory>
#include <vector>

namespace ember::cpu {

// The model: its description (which outlives it) checked once for what this backend runs.
class CpuModel {
public:
    explicit CpuModel(const ember_mod_model_desc &desc);
    const ember_mod_model_desc &desc;
    std::vector<WeightView> views;          // [n_tensors]: each tensor as a kernel operand
    std::vector<ember_graph_node> nodes;    // the program (backend/program_read.hpp)
    const ember_graph_node &node(uint32_t i) const { return nodes[i]; }
    void check_moe(uint32_t i, const ember_graph_node &n) const;
    void check_hybrid(uint32_t i, const ember_graph_node &n) const;
    // The positions ADD_POS_ROWS nodes have rows for (INT32_MAX without such a node).
    int64_t n_pos_rows = INT32_MAX;
    const float *f32(int32_t tensor) const {
        return tensor < 0 ? nullptr : static_cast<const float *>(desc.tensors[tensor].data);
    }
};

// Everything a CpuContext allocates, as counts: computed before allocating, and by memory estimates
// (one function, so an estimate is what the context will really take).
struct CpuContextSizes {
    size_t kv_rows = 0;                         // cache rows in K (and as many in V), all layers
    // [n_layer] whether the layer's rows are in the window pool (its attention has a sliding window and
    // the context has n_window_blocks), and the first cache row of each layer.
    std::vector<bool> windowed;
    std::vector<size_t> layer_row;
    std::vector<bool> has_kv;                   // [n_layer] the layer keeps K/V rows (a recurrent one does not)
    size_t kv_row_bytes = 0;                    // bytes of one row (kv_width values of the cache type)
    std::vector<size_t> buf_floats;             // [n_bufs] floats of each activation buffer (0: the logits)
    size_t scratch = 0;                         // bytes of quantized activations
    size_t moe_floats = 0;                      // MOE's work (the most one node needs)
    size_t state_floats = 0;                    // the recurrent states: n_state_slots x the model's state
    size_t bytes() const {
        size_t b = 2 * kv_rows * kv_row_bytes + scratch + moe_floats * sizeof(float) + state_floats * sizeof(float);
        for (size_t f : buf_floats) b += f * sizeof(float);
        return b;
    }
};
CpuContextSizes cpu_context_sizes(const ember_mod_model_desc &desc, const ember_mod_context_params &params);

class CpuContext {
public:
    CpuContext(const CpuModel &model, const ember_mod_context_params &params, CpuContext *share_threads_with);
    void forward(const ember_mod_batch &batch);
    void copy_block(int32_t src, int32_t dst);
    void read_kv(const int32_t *table, uint32_t n, uint8_t *dst) const;
    void write_kv(const int32_t *table, uint32_t n, const uint8_t *src);
    void copy_state(int32_t src, int32_t dst);
    void read_state(int32_t slot, float *dst) const;
    void write_state(int32_t slot, const float *src);

private:
    // Checks the batch's state slots and groups its tokens into per-sequence runs (runs_).
    void prepare_state_runs(const ember_mod_batch &b);
    float *state_slot(int32_t slot) { return states_.data() + static_cast<size_t>(slot) * m_.desc.state_floats; }
    void check_slot(int32_t slot, const char *what) const;
    // Runs nodes [i, end) that are all row-local over token rows (norms, rope, cache stores, adds,
    // SwiGLU) as one pass over row chunks; returns end.
    uint32_t run_rowwise(uint32_t i, const ember_mod_batch &b);
    // Runs the matmuls from node i that read the same input as one product; returns the next node.
    uint32_t run_matmuls(uint32_t i, uint32_t n_rows);
    void run_node(const ember_graph_node &n, const ember_mod_batch &b, int64_t r0, int64_t r1);
    float *buf(int32_t id) const { return bufs_[static_cast<size_t>(id)]; }
    uint32_t width(int32_t id) const { return m_.desc.bufs[id].width; }
    uint32_t rows(int32_t id, const ember_mod_batch &b) const {
        return m_.desc.bufs[id].rows == EMBER_GRAPH_ROWS_LOGITS ? b.n_logits : b.n_tokens;
    }
    // K (or V) of layer il, block 0, row 0; a block is block_size rows of row_bytes_. A window layer's
    // blocks are the window pool's (n_window_blocks of them), the others' the main pool's.
    uint8_t *k_layer(uint32_t il) { return k_cache_.data() + layer_offset(il); }
    uint8_t *v_layer(uint32_t il) { return v_cache_.data() + layer_offset(il); }
    size_t layer_offset(uint32_t il) const { return sizes_.layer_row[il] * row_bytes_; }
    bool windowed(uint32_t il) const { return sizes_.windowed[il]; }
    bool has_kv(uint32_t il) const { return sizes_.has_kv[il]; }
    // Byte offset of the row of position p (block `block`) in layer il's K or V cache.
    size_t row_offset(uint32_t il, int32_t block, uint32_t p) const {
        const uint32_t bs = params_.block_size;
        return layer_offset(il) + (static_cast<size_t>(block) * bs + p % bs) * row_bytes_;
    }

    const CpuModel &m_;
    ember_mod_context_params params_;
    std::shared_ptr<ThreadPool> pool_;   // shared with contexts made with share_threads_with
    Scratch scratch_;
    bool precise_ = false;   // this pass's ember_mod_batch.precision is EMBER_PRECISION_HIGH
    std::vector<float> moe_work_;   // MOE's gathered rows and expert outputs (cpu/moe.cpp)
    size_t row_bytes_ = 0;       // one position's K (or V) row of one layer
    CpuContextSizes sizes_;
    std::vector<uint8_t> k_cache_, v_cache_;
    std::vector<float> states_;                // [n_state_slots][state_floats]
    std::vector<StateRun> runs_;               // this pass's sequences (recurrent models)
    std::vector<float *> keep_;                // [n_tokens] the slots of this pass's kept states (StateRun::keep)
    std::vector<std::vector<float>> storage_;  // the activation buffers
    std::vector<float *> bufs_;                // [n_bufs]; the logits buffer is the batch's own array
};

} // namespace ember::cpu
