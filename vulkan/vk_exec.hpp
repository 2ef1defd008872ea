// vk_exec.hpp — recording the kernels into a command buffer.
//
// A Bindings is the one descriptor set a context (or a test op) uses: its six buffers bound whole,
// made once and reused for every dispatch and every pass (shapes and offsets go in push constants).
// A Recorder appends dispatches to a command buffer, with a compute-to-compute memory barrier before
// each one that follows another (the kernels of a pass read what the previous ones wrote).
#pragma once

#include "vk_device.hpp"
#include "vk_weights.hpp"

namespace ember::vk {

constexpr uint32_t kNone = 0xffffffffu;

struct Bindings {
    VkDescriptorPool pool = VK_NULL_HANDLE;
    VkDescriptorSet set = VK_NULL_HANDLE;
    void create(Device &dev, const Buffer *const (&bufs)[kBindingCount]);
    void update(Device &dev, const Buffer *const (&bufs)[kBindingCount]);
    void destroy(Device &dev);
};

class Recorder {
public:
    Recorder(Device &dev, VkCommandBuffer cb, VkDescriptorSet set);

    // Activation offsets are in floats (= words) of the activations buffer; io offsets in words of io.
    // The 8-bit activations: codes at q_off, block scales at d_off, block code sums at s_off.
    struct QActs {
        uint32_t q_off, d_off, s_off;
    };
    void quantize(uint32_t x_off, uint32_t n_in, uint32_t rows, const QActs &q);
    // x_off: f32 input rows for float weights; for quantized weights q, quantize()'s output.
    void matmul(const WeightRef &w, uint32_t x_off, const QActs &q, uint32_t rows, uint32_t y_off, uint32_t bias_off,
                bool accumulate);
    // Groups of n values, groups_per_row to a row; w_off kNone: no weight; rows_off: io offset of the source
    // row of each output row (kNone: row r reads row r).
    // With b_off set (kNone: none) or center: graph.h's LAYER_NORM (the mean taken off, then the bias added).
    void rmsnorm(uint32_t x_off, uint32_t y_off, uint32_t w_off, uint32_t n, uint32_t groups_per_row, uint32_t rows,
                 uint32_t rows_off, float eps, bool center = false, uint32_t b_off = kNone);
    void rope(uint32_t x_off, uint32_t rows, uint32_t n_heads, uint32_t head_dim, uint32_t n_rot, bool neox, uint32_t cs_off);
    void swiglu(uint32_t g_off, uint32_t u_off, uint32_t o_off, uint32_t n);
    // elementwise.comp's ops: y = x * a (SCALE), a * tanh(x / a) (SOFTCAP), gelu(x) * x2 (GEGLU), gpt-oss's
    // clamped SwiGLU with alpha a and limit b (SWIGLU_OAI). n values; y may be x or x2.
    // MUL: y = x * x2 (graph.h's MUL).
    enum class Ew : uint32_t { Scale = 0, Softcap = 1, Geglu = 2, SwigluOai = 3, Mul = 5, Gelu = 6 };
    void elementwise(Ew op, uint32_t x_off, uint32_t x2_off, uint32_t y_off, uint32_t n, float a = 0, float b = 0);
    // graph.h's ADD_POS_ROWS: rows of `width` values at x_off += the F32 table's (weights word table_off) row of
    // each token's position (io word pos_off on).
    void add_pos_rows(uint32_t x_off, uint32_t table_off, uint32_t rows, uint32_t width, uint32_t pos_off);

    // The hybrid families' ops (graph.h). COPY_COLS: y[r][y_col + g*n + i] = x[r][g*stride + off + i] over rows
    // of x_width (y's of y_width), groups of n.
    struct Cols {
        uint32_t x_width, groups, off, n, y_width, y_col;
    };
    void copy_cols(uint32_t x_off, uint32_t y_off, uint32_t rows, const Cols &c);
    // SIGMOID_MUL: y = x * sigmoid(g), rows of width values, g of width per row or (g_width 1) one.
    void sigmoid_mul(uint32_t x_off, uint32_t g_off, uint32_t y_off, uint32_t rows, uint32_t width, uint32_t g_width);
    // Where the recurrent ops find their sequences' states: the runs (state_runs.glsl's 5 ints each) at
    // io offset runs_off, each slot slot_floats floats of the states buffer, the node's share at state_off.
    struct States {
        uint32_t runs_off, n_runs, slot_floats, state_off;
    };
    // SSM_CONV over rows of c channels, the kernel [c][k] at w_off (weights, F32), the bias [c] at b_off
    // (kNoBias: none), SiLU after (silu) or not.
    static constexpr uint32_t kNoBias = 0xffffffffu;
    void ssm_conv(uint32_t x_off, uint32_t y_off, uint32_t c, uint32_t k, uint32_t w_off, const States &s,
                  uint32_t b_off = kNoBias, bool silu = true);
    // SSM_SCAN (Mamba-2): xbc rows of x (n_head heads of head_dim), B and C (n_group groups of d_state); dt
    // rows of n_head; A, D and the dt bias [n_head] at a_off, d_off, dtb_off (weights).
    struct Scan {
        uint32_t xbc_off, dt_off, y_off, n_head, head_dim, n_group, d_state, a_off, d_off, dtb_off;
    };
    void ssm_scan(const Scan &sc, const States &s);
    struct Delta {
        uint32_t qkv_off, a_off, b_off, y_off, n_head, n_head_k, head_dim, grouped, dt_off, decay_off;
        float eps, scale;
    };
    void gated_delta(const Delta &d, const States &s);
    void add(uint32_t y_off, uint32_t x_off, uint32_t n);  // y += x
    // MOE's last step: y[t] = sum_j io_f[gate_off + t k + j] * outs[io_i[pos_off + t k + j]] (rows of n_out).
    void moe_combine(uint32_t outs_off, uint32_t y_off, uint32_t rows, uint32_t n_out, uint32_t k, uint32_t pos_off,
                     uint32_t gate_off);
    // y[r] = x[io[rows_off + r]], rows of width floats; times io_f[scale_off + r] unless scale_off is kNone.
    void gather(uint32_t x_off, uint32_t y_off, uint32_t width, uint32_t rows, uint32_t rows_off, uint32_t scale_off = kNone);
    void get_rows(const WeightRef &w, uint32_t ids_off, uint32_t rows, uint32_t y_off);
    void kv_store(uint32_t k_off, uint32_t v_off, uint32_t rows, uint32_t n_kv, uint32_t rows_off, uint32_t layer_byte,
                  uint32_t row_bytes, DType type);
    struct Attn {
        uint32_t q_off, o_off, n_head, n_head_kv, head_dim, pos_off, tab_off, block_size, layer_byte, row_bytes;
        DType type;
        float scale;
        // Split-K: chunk keys per workgroup (0: none), n_split chunks, partials at part_off (floats).
        uint32_t chunk = 0, n_split = 1, part_off = 0;
        // graph.h's ATTENTION_EXT: sliding window (0: none), score softcap (0: none), sink logits (word
        // offset of [n_head] floats in the weights, kNone: none).
        uint32_t window = 0;
        float softcap = 0;
        uint32_t sink_off = kNone;
        // Chunked local attention (0: none) and attention temperature (temp_scale 0: none).
        uint32_t local_chunk = 0;
        float temp_scale = 0, temp_offset = 0;
        uint32_t temp_floor = 0;
    };
    void attention(const Attn &a, uint32_t rows);
    // A barrier that makes the kernels' writes visible to a following transfer (reading results back).
    void to_transfer();

private:
    void dispatch(Pipe p, const void *pc, uint32_t pc_bytes, uint32_t gx, uint32_t gy = 1, uint32_t gz = 1);
    // n_groups workgroups of a one-dimensional grid, as rows of at most 65535 (common.glsl's flat_id).
    void dispatch_flat(Pipe p, const void *pc, uint32_t pc_bytes, uint64_t n_groups);

    Device &dev_;
    VkCommandBuffer cb_;
    bool first_ = true;
};

// Split-K for attention: the chunk of keys per workgroup for a pass whose longest query sees max_keys
// keys, or 0 for no split. Splitting pays where few queries see many keys (decode): at most
// kMaxSplits chunks of at least 64 keys (one tile), only for passes of at most kMaxSplitRows tokens.
constexpr uint32_t kMaxSplits = 32, kMaxSplitRows = 64;
uint32_t attention_chunk(uint32_t rows, uint32_t max_keys);
// Floats of split-K partials for `rows` tokens.
inline size_t attention_part_floats(uint32_t rows, uint32_t n_head, uint32_t head_dim) {
    return size_t{rows < kMaxSplitRows ? rows : kMaxSplitRows} * n_head * kMaxSplits * (head_dim + 2);
}

// The recurrent shaders' limits: gated_delta.comp keeps a state row of head_dim floats in registers,
// ssm_conv.comp the K - 1 earlier inputs of a channel.
constexpr uint32_t kDeltaMaxHeadDim = 128, kConvMaxKernel = 64;
// ssm_scan.comp keeps a state row of d_state floats in registers, one invocation per row of a head.
constexpr uint32_t kScanMaxHeadDim = 128, kScanMaxState = 128;

inline uint64_t groups(uint64_t n, uint32_t size) { return (n + size - 1) / size; }

} // namespace ember::vk
