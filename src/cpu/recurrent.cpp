// recurrent.cpp — the CPU's recurrent-layer kernels (recurrent.hpp).
//
// Bits: every level of the machine runs these same loops (no ISA variants), the sums in 8 independent
// lanes reduced in one fixed order, and this file is compiled without floating-point contraction
// (CMakeLists.txt), so the results are the same on every x86 CPU and for any split of the work.
//
// Cost: the delta rule is ~4 head_dim^2 operations per value head and token — for a 2B-parameter hybrid
// model (16 value heads of 128 in 18 layers) about 1 % of a token's products — and its state (head_dim^2 floats a head, 64 KiB at 128)
// stays in L2 while a thread runs one head through a prompt; so the recurrent form serves prompts too
// (a chunked form buys parallelism over tokens, which a GPU needs and two cores do not).
#include "cpu/recurrent.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace ember::cpu {

namespace {

constexpr int kLanes = 8;

// sum_i a[i] * b[i] in kLanes lanes, reduced in a fixed order.
inline float dot(const float *a, const float *b, int n) {
    float acc[kLanes] = {};
    int i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
    for (int l = 0; i < n; ++i, ++l) acc[l] += a[i] * b[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// log(1 + e^x), exact to float beyond 20 (where e^x alone would overflow sooner than it matters).
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// x / max(|x|, eps), n values, into out.
inline void l2_normalize(const float *x, float *out, int n, float eps, float scale) {
    const float norm = std::sqrt(dot(x, x, n));
    const float inv = scale / std::max(norm, eps);
    for (int i = 0; i < n; ++i) out[i] = x[i] * inv;
}

} // namespace

void ssm_conv(ThreadPool &pool, const float *x, float *y, int64_t C, int64_t K, const float *w, const StateRun *runs,
              uint32_t n_runs, uint32_t state_offset, const float *bias, bool act_silu) {
    // Work items: (run, channel chunk of 64); each walks its run's tokens in order.
    constexpr int64_t kChunk = 64;
    const int64_t chunks_per_run = (C + kChunk - 1) / kChunk;
    const int64_t n_items = int64_t{n_runs} * chunks_per_run;
    const int64_t W = K - 1;   // window length
    auto item = [&](int64_t it) {
        const StateRun &r = runs[it / chunks_per_run];
        const int64_t c0 = (it % chunks_per_run) * kChunk, c1 = std::min(C, c0 + kChunk);
        float *win = r.state + state_offset;   // [W][C]
        const float *from = r.from ? r.from + state_offset : nullptr;
        for (int64_t j = 0; j < W; ++j)
            for (int64_t c = c0; c < c1; ++c) win[j * C + c] = from ? from[j * C + c] : 0.0f;
        for (uint32_t t = r.t0; t < r.t1; ++t) {
            const float *xt = x + int64_t{t} * C;
            float *yt = y + int64_t{t} * C;
            for (int64_t c = c0; c < c1; ++c) {
                const float *wc = w + c * K;
                float s = 0.0f;
                for (int64_t j = 0; j < W; ++j) s += wc[j] * win[j * C + c];
                s += wc[W] * xt[c];
                if (bias) s += bias[c];
                yt[c] = act_silu ? silu(s) : s;
                for (int64_t j = 0; j + 1 < W; ++j) win[j * C + c] = win[(j + 1) * C + c];
                if (W > 0) win[(W - 1) * C + c] = xt[c];
            }
        }
    };
    if (n_items == 1 || pool.size() == 1) {
        for (int64_t it = 0; it < n_items; ++it) item(it);
        return;
    }
    pool.run_chunks(n_items, item);
}

void gated_delta(ThreadPool &pool, const float *qkv, const float *a, const float *b, float *y, const DeltaParams &p,
                 const StateRun *runs, uint32_t n_runs, uint32_t state_offset) {
    const int S = p.head_dim, H = p.n_head, Hk = p.n_head_k;
    const int64_t row = int64_t{2 * Hk + H} * S;
    const int64_t head_state = int64_t{S} * S;
    const int64_t n_items = int64_t{n_runs} * H;
    auto item = [&](int64_t it) {
        const StateRun &r = runs[it / H];
        const int h = static_cast<int>(it % H), hk = p.grouped ? h / (H / Hk) : h % Hk;
        float *M = r.state + state_offset + h * head_state;   // row j (value dim) of S key dims
        // The first token's decay reads the state it starts from (another slot's: no copy first).
        const float *in = r.from ? r.from + state_offset + h * head_state : nullptr;
        if (!in) std::fill(M, M + head_state, 0.0f), in = M;
        std::vector<float> qk(2 * size_t(S));
        float *q = qk.data(), *k = q + S;
        for (uint32_t t = r.t0; t < r.t1; ++t, in = M) {
            const float *xt = qkv + int64_t{t} * row;
            l2_normalize(xt + int64_t{hk} * S, q, S, p.eps, p.scale);
            l2_normalize(xt + int64_t{Hk + hk} * S, k, S, p.eps, 1.0f);
            const float *v = xt + int64_t{2 * Hk + h} * S;
            const float g = std::exp(softplus(a[int64_t{t} * H + h] + p.dt[h]) * p.decay[h]);
            const float beta = sigmoid(b[int64_t{t} * H + h]);
            float *out = y + int64_t{t} * H * S + int64_t{h} * S;
            for (int j = 0; j < S; ++j) {
                float *m = M + int64_t{j} * S;
                const float *m_in = in + int64_t{j} * S;
                for (int i = 0; i < S; ++i) m[i] = m_in[i] * g;
                const float d = beta * (v[j] - dot(m, k, S));
                for (int i = 0; i < S; ++i) m[i] += k[i] * d;
                out[j] = dot(m, q, S);
            }
        }
    };
    if (n_items == 1 || pool.size() == 1) {
        for (int64_t it = 0; it < n_items; ++it) item(it);
        return;
    }
    pool.run_chunks(n_items, item);
}

void ssm_scan(ThreadPool &pool, const float *xbc, const float *dt, float *y, const ScanParams &p, const StateRun *runs,
              uint32_t n_runs, uint32_t state_offset) {
    const int H = p.n_head, P = p.head_dim, G = p.n_group, N = p.d_state;
    const int64_t row = int64_t{H} * P + 2 * int64_t{G} * N;
    const int64_t head_state = int64_t{P} * N;
    const int64_t n_items = int64_t{n_runs} * H;
    auto item = [&](int64_t it) {
        const StateRun &r = runs[it / H];
        const int h = static_cast<int>(it % H), g = h / (H / G);
        float *S = r.state + state_offset + h * head_state;   // row i (head dim) of N state dims
        const float *in = r.from ? r.from + state_offset + h * head_state : nullptr;
        if (!in) std::fill(S, S + head_state, 0.0f), in = S;
        for (uint32_t t = r.t0; t < r.t1; ++t, in = S) {
            const float *xt = xbc + int64_t{t} * row;
            const float *x = xt + int64_t{h} * P, *B = xt + int64_t{H} * P + int64_t{g} * N,
                        *C = xt + int64_t{H} * P + int64_t{G} * N + int64_t{g} * N;
            const float s = softplus(dt[int64_t{t} * H + h] + p.dt_bias[h]);
            const float dA = std::exp(s * p.A[h]);
            float *out = y + int64_t{t} * H * P + int64_t{h} * P;
            for (int i = 0; i < P; ++i) {
                float *m = S + int64_t{i} * N;
                const float *m_in = in + int64_t{i} * N;
                const float xs = x[i] * s;
                for (int k = 0; k < N; ++k) m[k] = m_in[k] * dA + B[k] * xs;
                out[i] = dot(m, C, N) + p.D[h] * x[i];
            }
        }
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
