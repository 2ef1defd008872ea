// recurrent.cpp — the CPU's recurrent-layer kernels (recurrent.hpp): the work split and the level's
// loops (recurrent_loops.hpp, the same bits at every level and for any split of the work).
//
// Cost: the delta rule is ~4 head_dim^2 operations per value head and token — for a 2B-parameter hybrid
// model (16 value heads of 128 in 18 layers) about 0.5 % of a token's products — and its state
// (head_dim^2 floats a head, 64 KiB at 128) stays in L2 while a thread runs one head through a prompt;
// so the recurrent form serves prompts too (a chunked form buys parallelism over tokens, which a GPU
// needs and two cores do not). It is bound by arithmetic, not memory: written as scalar loops the compiler
// could not vectorise (the state is updated in place) it took a quarter of a 512-token prompt's time on
// an AVX-512 machine; in 16 lanes with FMAs (recurrent_loops.hpp) a few percent.
#include "cpu/recurrent.hpp"

#include "core/error.hpp"
#include "cpu/recurrent_loops.hpp"
#include "cpu/vec_dot.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ember::cpu {

namespace detail {
void gated_delta_head_scalar(const DeltaHead &job) { gated_delta_head<Lanes8>(job); }
void ssm_conv_chunk_scalar(const ConvChunk &job) { ssm_conv_chunk(job); }
} // namespace detail

void ssm_conv(ThreadPool &pool, const float *x, float *y, int64_t C, int64_t K, const float *w, const StateRun *runs,
              uint32_t n_runs, uint32_t state_offset, const float *bias, bool act_silu) {
    if (K < 1 || K > detail::kMaxConvKernel) fail(EMBER_ERR_INVALID_MODEL, "ssm_conv: kernel %lld is not 1..64", (long long)K);
    // Work items: (run, channel chunk); each walks its run's tokens in order.
    constexpr int64_t kChunk = detail::kMaxConvChunk;
    const int64_t chunks_per_run = (C + kChunk - 1) / kChunk;
    const int64_t n_items = int64_t{n_runs} * chunks_per_run;
    const auto chunk = detail::kernels().ssm_conv_chunk;
    auto item = [&](int64_t it) {
        const StateRun &r = runs[it / chunks_per_run];
        const int64_t c0 = (it % chunks_per_run) * kChunk;
        chunk({x, y, C, K, w, r.from ? r.from + state_offset : nullptr, r.state + state_offset, c0, std::min(C, c0 + kChunk),
               r.t0, r.t1, bias, act_silu, r.keep, state_offset});
    };
    if (n_items == 1 || pool.size() == 1) {
        for (int64_t it = 0; it < n_items; ++it) item(it);
        return;
    }
    pool.run_chunks(n_items, item);
}

void gated_delta(ThreadPool &pool, const float *qkv, const float *a, const float *b, float *y, const DeltaParams &p,
                 const StateRun *runs, uint32_t n_runs, uint32_t state_offset) {
    if (p.head_dim < 1 || p.head_dim > detail::kMaxDeltaHeadDim)
        fail(EMBER_ERR_INVALID_MODEL, "gated_delta: head size %d is not 1..1024", p.head_dim);
    const int H = p.n_head, Hk = p.n_head_k;
    const int64_t head_state = int64_t{p.head_dim} * p.head_dim;
    const int64_t n_items = int64_t{n_runs} * H;
    const auto head = detail::kernels().gated_delta_head;
    auto item = [&](int64_t it) {
        const StateRun &r = runs[it / H];
        const int h = static_cast<int>(it % H), hk = p.grouped ? h / (H / Hk) : h % Hk;
        // The first token's decay reads the state it starts from (another slot's: no copy first).
        head({qkv, a, b, y, &p, h, hk, r.from ? r.from + state_offset + h * head_state : nullptr,
              r.state + state_offset + h * head_state, r.t0, r.t1, r.keep, state_offset + h * head_state});
    };
    if (n_items == 1 || pool.size() == 1) {
        for (int64_t it = 0; it < n_items; ++it) item(it);
        return;
    }
    pool.run_chunks(n_items, item);
}

using detail::sigmoid;   // recurrent_loops.hpp's
using detail::softplus;

void ssm_scan(ThreadPool &pool, const float *xbc, const float *dt, float *y, const ScanParams &p, const StateRun *runs,
              uint32_t n_runs, uint32_t state_offset) {
    const int H = p.n_head, P = p.head_dim, G = p.n_group, N = p.d_state;
    const int64_t row = int64_t{H} * P + 2 * int64_t{G} * N;
    const int64_t head_state = int64_t{P} * N;
    const int64_t n_items = int64_t{n_runs} * H;
    auto item = [&](int64_t it) {
        const StateRun &r = runs[it / H];
        const int h = static_cast<int>(it % H), g = h / (H / G);
        const int64_t off = state_offset + h * head_state;
        float *const last = r.state + off;   // row i (head dim) of N state dims
        const float *in = r.from ? r.from + off : nullptr;
        if (!in) std::fill(last, last + head_state, 0.0f), in = last;
        for (uint32_t t = r.t0; t < r.t1; ++t) {
            float *S = detail::kept_or(r.keep, off, t, r.t0, r.t1, last);
            const float *xt = xbc + int64_t{t} * row;
            const float *x = xt + int64_t{h} * P, *B = xt + int64_t{H} * P + int64_t{g} * N,
                        *C = xt + int64_t{H} * P + int64_t{G} * N + int64_t{g} * N;
            const float s = softplus(dt[int64_t{t} * H + h] + p.dt_bias[h]);
            const float dA = std::exp(s * p.A[h]);
            float *out = y + int64_t{t} * H * P + int64_t{h} * P;
            for (int i = 0; i < P; ++i) {
                // The row's update and its product with C in one pass of 8 lanes (the state is updated in
                // place, which keeps the compiler from vectorising a plain loop); element k in lane k % 8,
                // reduced as dot_lanes<Lanes8> reduces.
                float *m = S + int64_t{i} * N;
                const float *m_in = in + int64_t{i} * N;
                const float xs = x[i] * s;
                detail::V8 acc = {};
                int k = 0;
                for (; k + 8 <= N; k += 8) {
                    const detail::V8 mv = detail::load8(m_in + k) * dA + detail::load8(B + k) * xs;
                    detail::store8(m + k, mv);
                    acc += mv * detail::load8(C + k);
                }
                for (int l = 0; k < N; ++k, ++l) {
                    m[k] = m_in[k] * dA + B[k] * xs;
                    acc[l] += m[k] * C[k];
                }
                float lanes[8];
                detail::store8(lanes, acc);
                out[i] = detail::reduce_lanes<8>(lanes) + p.D[h] * x[i];
            }
            in = S;
        }
        detail::keep_last_copy(r.keep, off, r.t0, r.t1, last, head_state);
    };
    if (n_items == 1 || pool.size() == 1) {
        for (int64_t it = 0; it < n_items; ++it) item(it);
        return;
    }
    pool.run_chunks(n_items, item);
}

void copy_cols(const float *x, float *y, int64_t n_rows, int64_t x_width, int64_t y_width, int64_t y_col, int64_t groups,
               int64_t off, int64_t n) {
    const int64_t stride = x_width / groups;
    for (int64_t r = 0; r < n_rows; ++r)
        for (int64_t g = 0; g < groups; ++g)
            std::memcpy(y + r * y_width + y_col + g * n, x + r * x_width + g * stride + off, sizeof(float) * size_t(n));
}

void sigmoid_mul(const float *x, const float *g, float *y, int64_t n_rows, int64_t width, int64_t g_width) {
    for (int64_t r = 0; r < n_rows; ++r) {
        const float *xr = x + r * width, *gr = g + r * g_width;
        float *yr = y + r * width;
        if (g_width == 1) {
            const float s = sigmoid(gr[0]);
            for (int64_t i = 0; i < width; ++i) yr[i] = xr[i] * s;
        } else {
            for (int64_t i = 0; i < width; ++i) yr[i] = xr[i] * sigmoid(gr[i]);
        }
    }
}

} // namespace ember::cpu
