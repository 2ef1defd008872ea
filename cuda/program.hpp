// program.hpp — the model's program (backend/graph.h) as this backend runs it: copied out of the
// description, checked once at load, with its fusions decided once (backend/fusion_plan.hpp, from the
// fusions program.cpp's kCudaFusions lists); and what a context allocates for it. Plain C++ (no CUDA header): tests/test_cuda_host.cpp runs it on the CPU against the programs the
// architectures build, so that the decisions the GPU code follows blindly are tested without a GPU.
//
// The executor (model.cpp, Context::enqueue) walks the nodes in order and only reads `how` to know
// which launches to make; nothing in this folder knows an architecture.
#pragma once

#include "backend/module_api.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ember::cu {

// The matrix products' fixed device scratch (model.cpp, Matmul): the dequantized tiles that feed
// cuBLASLt, and its workspace. Part of every context's size.
constexpr size_t kMatmulScratchBytes = size_t{64} << 20, kMatmulWorkspaceBytes = size_t{32} << 20;

// How the executor runs one node (only the fields of its op mean anything).
struct NodeRun {
    // MATMUL: reuses the input (quantized codes, f16 copy) prepared for the MATMUL just before it, which
    // reads the same buffer (the Q/K/V products, gate/up).
    bool share_input = false;
    // MATMUL: the ADD right after it adds this product into the residual; the product is accumulated
    // there directly (dst += W src + b) and its own dst is not written, which nothing reads.
    bool accumulate = false;
    // ADD: done by the MATMUL before it (accumulate).
    bool skip = false;
    // ROPE, ROPE_YARN: fills the rope angle table (the first rope of the program, or one whose op, rotation,
    // base, scale, factors or YaRN options differ from the rope before it); later ropes reuse the table. A
    // rope that rotates nothing (n_rot 0) fills none.
    bool new_angles = false;
};

struct Program {
    uint32_t n_vocab = 0, n_layer = 0, kv_width = 0;
    std::vector<ember_graph_buf> bufs;
    std::vector<ember_graph_node> nodes;
    std::vector<NodeRun> how;        // [nodes.size()]
    int32_t logits_buf = -1;
    // For each tensor of the description: read as a matrix (MATMUL, GET_ROWS weights: uploaded in the
    // kernels' layout), as a 3-D stack of MOE experts (each expert's matrix uploaded on its own, in that
    // layout) and/or as an F32 vector (norms, biases, rope factors, sinks, expert biases).
    enum : uint8_t { kMatrix = 1, kVector = 2, kExperts = 4 };
    std::vector<uint8_t> tensor_use;
    // Over the program's ROPE and ATTENTION nodes (the context's scratch is sized by them).
    uint32_t max_rot = 0, max_attn_heads = 0, max_head_dim = 0;
    // [n_layer] whether the layer keeps K/V rows (has a KV_STORE node): a hybrid model's recurrent layers
    // keep none, and get no cache (backend.hpp's kv_layers).
    std::vector<bool> has_kv;
    // Floats of one sequence's recurrent state (the description's state_floats; 0: attention only).
    uint32_t state_floats = 0;
    // Over its MOE nodes: the experts' widths and the most chosen experts (the MOE work buffers).
    uint32_t moe_in = 0, moe_ff = 0, moe_out = 0, moe_used = 0;
    bool has_moe() const { return moe_used > 0; }
    // The encoders' inputs: rows of the smallest ADD_POS_ROWS table (0: no such node; a pass's positions
    // must be below it), and whether an ATTENTION_EXT attends both ways (graph.h's SEQUENCE mask: the pass
    // then uploads each token's sequence's last position, inputs.hpp).
    uint32_t n_pos_rows = 0;
    bool seq_mask = false;

    bool logits_rows(int32_t buf) const { return bufs[static_cast<size_t>(buf)].rows == EMBER_GRAPH_ROWS_LOGITS; }
    uint32_t width(int32_t buf) const { return bufs[static_cast<size_t>(buf)].width; }
    // The buffer whose rows a node runs over (its row count in a pass: the tokens or the logits rows).
    int32_t row_buf(const ember_graph_node &n) const { return n.op == EMBER_GRAPH_KV_STORE ? n.src : n.dst; }
};

// GATED_DELTA's head_dim: a warp holds 8 value columns of its head's state, head_dim / 32 key dims a lane
// (recurrent.hpp), so that 256 fits in registers.
constexpr uint32_t kMaxDeltaDim = 256;
// SSM_CONV's kernel length (the CPU's bound).
constexpr int64_t kMaxConvKernel = 64;

// Copies and checks the description's program: an op or option this backend does not run is
// EMBER_ERR_UNSUPPORTED naming it (and the node); references out of range or shapes that do not fit are
// EMBER_ERR_INVALID_MODEL. Tensors are checked for the use the nodes make of them (weights.hpp's
// types for matrices, F32 for vectors).
Program program_of(const ember_mod_model_desc &d);

// Expert e's matrix of a 3-D MOE stack, as a 2-D tensor over its bytes (ne[0] x ne[1] of the stack).
ember_mod_tensor expert_matrix(const ember_mod_tensor &t, uint32_t e);

// What a context allocates on the device (context_bytes reports `bytes()`). Offsets are into one
// activation allocation: the program's buffers (rows: n_batch per token, n_logits per logits row),
// then the executor's scratch.
struct ContextSizes {
    size_t kv_row_bytes = 0;                      // one K (or V) row
    // With n_window_blocks the sliding-window layers' rows are in a pool of their own (backend.hpp):
    // such a layer's K (or V) cache is n_window_blocks blocks, the others' n_blocks. [n_layer] whether
    // each layer is windowed and where its cache starts in the K (or V) allocation of kv_cache_bytes.
    uint32_t n_window_blocks = 0;
    std::vector<bool> windowed;
    std::vector<size_t> kv_layer_off;
    size_t kv_cache_bytes = 0;
    size_t kv_bytes = 0;                          // all layers, K and V
    // The recurrent states: n_state_slots of the program's state_floats (f32), in one allocation.
    uint32_t n_state_slots = 0;
    size_t state_bytes = 0;
    size_t rows = 0;                              // max(n_batch, n_logits): the pass inputs' rows
    size_t io_words = 0;                          // the pass inputs (inputs.hpp's io)
    size_t partial_rows = 0;                      // attention partials (m, l, acc) the scratch holds
    // Attention's splits (kAttnSplitKeys positions each, enough for the context's every position: fixed,
    // so that a captured step stays valid as sequences grow) and the tokens whose partials the scratch
    // holds at once: a longer pass runs attention over its tokens in groups of attn_group.
    int32_t attn_splits = 1;
    uint32_t attn_group = 1;
    std::vector<size_t> buf_offset;               // [bufs]
    size_t act_codes = 0, act_scales = 0, act16 = 0;  // a MATMUL input prepared: Q8 codes and scales, f16
    size_t rope_cos = 0, rope_sin = 0, partials = 0, io = 0;
    // MOE (moe.hpp's MoeWork): gathered inputs, gate and up products, expert outputs, the route's lists.
    size_t moe_xin = 0, moe_g = 0, moe_u = 0, moe_outs = 0, moe_token = 0, moe_pos = 0, moe_gate = 0, moe_row_gate = 0;
    size_t moe_slots = 0;  // rows * moe_used
    size_t total = 0;  // bytes of the activation allocation
    size_t bytes() const { return kv_bytes + state_bytes + total + kMatmulScratchBytes + kMatmulWorkspaceBytes; }
};
// Checks the parameters (positive counts, an F16, Q8_0 or Q4_0 cache that fits the rows, state slots for a
// model with recurrent state). A params struct that ends before n_window_blocks (n_state_slots) has none.
ContextSizes context_sizes(const Program &pg, const ember_mod_context_params &p);

} // namespace ember::cu
