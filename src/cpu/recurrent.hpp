// recurrent.hpp — the CPU kernels of the hybrid families' recurrent layers (graph.h's SSM_CONV,
// GATED_DELTA and SSM_SCAN) and their small companions (COPY_COLS, SIGMOID_MUL).
//
// A recurrent layer runs each sequence's tokens in order from the state it carries; the batch may hold
// several sequences (consecutive runs of tokens). Work is split over (sequence, channel range) for the
// convolution and (sequence, value head) for the delta rule, never over tokens, so a prompt fed whole and
// the same tokens fed one at a time do the same float operations in the same order: the same bits.
#pragma once

#include "cpu/threadpool.hpp"

#include <cstdint>

namespace ember::cpu {

// One sequence's run of tokens in a batch: rows [t0, t1), its state `state` (the slot written), and where
// its first token's state comes from (`from`: another slot's, or nullptr for zeros; `from == state`: in
// place). `keep`, when not nullptr, is [t1 - t0]: per token a slot (its state's start, like `state`) that
// also receives the state after that token, or nullptr (module_api.h's state_keep). The kernels write a
// kept token's state straight into its slot and the next token reads it there (no copy but the last
// token's): the same float operations, so the same bits as a run that keeps nothing.
struct StateRun {
    uint32_t t0 = 0, t1 = 0;
    float *state = nullptr;
    const float *from = nullptr;
    float *const *keep = nullptr;
};

// SSM_CONV: y_t[c] = act(sum_j w[c][j] x_{t-K+1+j}[c] + bias[c]) over rows of C channels, act SiLU or
// none (silu false), bias optional (nullptr); state: the last K - 1 inputs, [K - 1][C] (oldest first). y
// may not alias x.
void ssm_conv(ThreadPool &pool, const float *x, float *y, int64_t C, int64_t K, const float *w, const StateRun *runs,
              uint32_t n_runs, uint32_t state_offset, const float *bias = nullptr, bool silu = true);

struct DeltaParams {
    int n_head = 0, n_head_k = 0, head_dim = 0;
    const float *dt = nullptr, *decay = nullptr;   // [n_head]
    float eps = 1e-6f, scale = 1.0f;
    bool grouped = false;   // value head h reads key head h / (n_head / n_head_k), else h % n_head_k
};
// GATED_DELTA over rows of qkv (q, k: n_head_k heads; v: n_head heads), a and b (n_head per row), into y
// (n_head * head_dim per row).
void gated_delta(ThreadPool &pool, const float *qkv, const float *a, const float *b, float *y, const DeltaParams &p,
                 const StateRun *runs, uint32_t n_runs, uint32_t state_offset);

struct ScanParams {
    int n_head = 0, head_dim = 0, n_group = 0, d_state = 0;
    const float *A = nullptr, *D = nullptr, *dt_bias = nullptr;   // [n_head]
};
// SSM_SCAN (Mamba-2) over rows of xbc (x: n_head * head_dim, then B and C: n_group * d_state each) and dt
// (n_head per row), into y (n_head * head_dim per row).
void ssm_scan(ThreadPool &pool, const float *xbc, const float *dt, float *y, const ScanParams &p, const StateRun *runs,
              uint32_t n_runs, uint32_t state_offset);

// y[r][y_col + g*n + i] = x[r][g*stride + off + i] (g < groups, i < n; rows of x_width and y_width).
void copy_cols(const float *x, float *y, int64_t n_rows, int64_t x_width, int64_t y_width, int64_t y_col, int64_t groups,
               int64_t off, int64_t n);
// y = x * sigmoid(g): g of `width` per row, or of one per row (g_width 1). y may alias x.
void sigmoid_mul(const float *x, const float *g, float *y, int64_t n_rows, int64_t width, int64_t g_width);

} // namespace ember::cpu
