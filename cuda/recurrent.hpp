// recurrent.hpp — launchers of the hybrid families' ops (graph.h's COPY_COLS, SIGMOID_MUL, SSM_CONV and
// GATED_DELTA; defined in elementwise.cu and recurrent.cu), beside kernels.hpp's. Same conventions: f32
// row-major activations, enqueued on `s`, never synchronizing.
//
// The two stateful ops walk each sequence's tokens in order from the state its slot carries. Work is
// split over (sequence run, channel) and (sequence run, value head, column group), never over tokens, so
// a prompt fed whole and the same tokens fed one at a time do the same float operations in the same
// order (the state goes through device memory as f32 between passes): the same bits.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace ember::cu {

// A pass's sequence runs on the device (inputs.hpp's StateIo) and the context's state slots.
struct StateRuns {
    const int32_t *run_of = nullptr;             // [n_tokens] each token's run
    const int32_t *t0 = nullptr, *t1 = nullptr;  // [runs] tokens [t0, t1)
    const int32_t *from = nullptr, *slot = nullptr;  // [runs] the slot read first (-1: zeros), the slot written
    const int32_t *n_runs = nullptr;             // one value
    const int32_t *keep = nullptr;               // [n_tokens] the slot keeping the state after each (-1: none)
    float *states = nullptr;                     // slot 0's state; slot s at states + s * state_floats
    size_t state_floats = 0;
};

// y[r][y_col + g*n + i] = x[r][g*(x_width/groups) + off + i] for g < groups, i < n (rows of y_width; y is
// not x; the rest of y untouched).
void copy_cols(const float *x, float *y, int64_t n_rows, int64_t x_width, int64_t y_width, int64_t y_col, int64_t groups,
               int64_t off, int64_t n, cudaStream_t s);
// y = x * sigmoid(g): g of `width` per row, or of one per row (g_width 1). y may be x.
void sigmoid_mul(const float *x, const float *g, float *y, int64_t n_rows, int64_t width, int64_t g_width, cudaStream_t s);

// SSM_CONV over n_tokens rows of C channels with the kernel w (F32 [C][K]); each run's window of K - 1
// inputs at `state_offset` of its slots ([K - 1][C], oldest first) is read, then replaced by the one
// after its last token. y is not x.
// bias: F32 [C] on the device or nullptr; silu false: the sum itself (graph.h's EMBER_GRAPH_SSM_CONV_LINEAR).
void ssm_conv(const float *x, float *y, int64_t n_tokens, int64_t C, int K, const float *w, const StateRuns &r,
              uint32_t state_offset, cudaStream_t s, const float *bias = nullptr, bool silu = true);

struct ScanShape {
    int n_head = 0, head_dim = 0, n_group = 0, d_state = 0;
    const float *A = nullptr, *D = nullptr, *dt_bias = nullptr;  // [n_head] on the device
};
// SSM_SCAN (Mamba-2) over n_tokens rows of xbc (x: n_head * head_dim, B, C: n_group * d_state each) and dt
// (n_head per row) into y (n_head * head_dim per row); the heads' states at `state_offset` of the runs' slots.
void ssm_scan(const float *xbc, const float *dt, float *y, int64_t n_tokens, const ScanShape &p, const StateRuns &r,
              uint32_t state_offset, cudaStream_t s);

struct DeltaShape {
    int n_head = 0, n_head_k = 0, head_dim = 0;  // head_dim <= program.hpp's kMaxDeltaDim
    const float *dt = nullptr, *decay = nullptr;  // [n_head] on the device
    float eps = 1e-6f, scale = 1.0f;
    bool grouped = false;  // value head h reads key head h / (n_head / n_head_k), else h % n_head_k
};
// GATED_DELTA over n_tokens rows of qkv (q, k: n_head_k heads; v: n_head heads), a and b (n_head per row)
// into y (n_head * head_dim per row); the heads' states at `state_offset` of the runs' slots.
void gated_delta(const float *qkv, const float *a, const float *b, float *y, int64_t n_tokens, const DeltaShape &p,
                 const StateRuns &r, uint32_t state_offset, cudaStream_t s);

} // namespace ember::cu
