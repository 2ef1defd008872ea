// recurrent.cu — the hybrid families' stateful kernels: SSM_CONV (a causal depthwise convolution with a
// carried window), GATED_DELTA (the gated delta rule, recurrent form) and SSM_SCAN. See recurrent.hpp.
// Each also writes the state after a token into the slot that token keeps it in (StateRuns::keep).
//
// Rounding: both follow cpu/recurrent.cpp's order where it is cheap (the convolution's sum term by term,
// each product and sum rounded on its own, as the CPU's uncontracted loop); the delta rule's dot products
// are summed per lane then across the warp, an order of its own, within test_parity's bound
// (tests/parity_hybrid_ops.cpp). Each order is fixed whatever the pass holds (batch invariance).
#include "cu_check.hpp"
#include "cu_util.cuh"
#include "recurrent.hpp"
#include "recurrent_math.hpp"

namespace ember::cu {

namespace {

__device__ __forceinline__ const float *slot_state(const StateRuns &r, int32_t slot, uint32_t off) {
    return slot < 0 ? nullptr : r.states + static_cast<size_t>(slot) * r.state_floats + off;
}

// SSM_CONV's outputs, a thread per (token, channel): every input a token's window needs is either a row of
// this pass (from its run's first token on) or in the window its run starts from (recurrent_math.hpp),
// which this kernel only reads; k_ssm_conv_state replaces the windows after it.
__global__ void k_ssm_conv(const float *x, float *y, int64_t n_tokens, int64_t C, int K, const float *w, StateRuns r,
                           uint32_t off, const float *bias, bool silu) {
    const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e >= n_tokens * C) return;
    const int64_t t = e / C, c = e % C;
    const int32_t run = r.run_of[t];
    const int64_t t0 = r.t0[run];
    const float *win = slot_state(r, r.from[run], off);  // [K - 1][C]
    const float *wc = w + c * K;
    float s = 0.0f;
    for (int j = 0; j < K; ++j) {
        const ConvInput in = conv_input(t, j, t0, K);
        const float v = in.row ? x[in.index * C + c] : win ? win[in.index * C + c] : 0.0f;
        s = __fadd_rn(s, __fmul_rn(wc[j], v));
    }
    if (bias) s = __fadd_rn(s, bias[c]);
    y[e] = silu ? __fdiv_rn(s, __fadd_rn(1.0f, expf(-s))) : s;
}

// The window after each run, a thread per (run, channel): a row of this pass or, for a run shorter than the
// window, an entry of the window it started from (recurrent_math.hpp: safe in place, from == slot).
__global__ void k_ssm_conv_state(const float *x, int64_t max_runs, int64_t C, int K, StateRuns r, uint32_t off) {
    const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e >= max_runs * C) return;
    const int64_t run = e / C, c = e % C;
    if (run >= *r.n_runs) return;
    const int64_t t0 = r.t0[run], t1 = r.t1[run];
    const float *old = slot_state(r, r.from[run], off);
    float *win = r.states + static_cast<size_t>(r.slot[run]) * r.state_floats + off;
    // The windows kept after a verifying pass's tokens first: they may read the old window, which the run's
    // own is written over when it goes on in place.
    for (int64_t t = t0; r.keep && t < t1; ++t) {
        if (r.keep[t] < 0) continue;
        float *kw = r.states + static_cast<size_t>(r.keep[t]) * r.state_floats + off;
        for (int64_t j = 0; j < K - 1; ++j) {
            const ConvInput in = conv_window_after(j, t0, t + 1, K);
            kw[j * C + c] = in.row ? x[in.index * C + c] : old ? old[in.index * C + c] : 0.0f;
        }
    }
    for (int64_t j = 0; j < K - 1; ++j) {
        const ConvInput in = conv_window_after(j, t0, t1, K);
        win[j * C + c] = in.row ? x[in.index * C + c] : old ? old[in.index * C + c] : 0.0f;
    }
}

// GATED_DELTA, recurrent form. A warp owns kDeltaCols value columns j of one head of one run; lane l holds
// key dims i = l + 32 e (e < E) of each: the state a warp carries through the run's tokens is kDeltaCols x
// E registers a lane (64 at head_dim 256), and warps share nothing (no shared memory, no block barrier).
// Per token a warp normalises q and k itself (each warp of the head the same values, the same way).
constexpr int kDeltaCols = 8, kDeltaWarps = 4;

struct DeltaArgs {
    const float *qkv, *a, *b;
    float *y;
    DeltaShape p;
};

__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// A warp's columns of a head's state (registers m, as k_gated_delta holds them) into `dst`.
template <int E>
__device__ __forceinline__ void store_columns(float *dst, const float (&m)[kDeltaCols][E], int j0, int lane, int S) {
#pragma unroll
    for (int c = 0; c < kDeltaCols; ++c)
#pragma unroll
        for (int e = 0; e < E; ++e) {
            const int j = j0 + c, i = lane + 32 * e;
            if (j < S && i < S) dst[static_cast<size_t>(j) * S + i] = m[c][e];
        }
}

template <int E>
__global__ void __launch_bounds__(kDeltaWarps * 32) k_gated_delta(DeltaArgs g, StateRuns r, uint32_t off) {
    const int64_t run = blockIdx.x;
    if (run >= *r.n_runs) return;
    const int S = g.p.head_dim, H = g.p.n_head, Hk = g.p.n_head_k, h = static_cast<int>(blockIdx.z);
    const int lane = static_cast<int>(threadIdx.x % 32);
    const int j0 = (static_cast<int>(blockIdx.y) * kDeltaWarps + static_cast<int>(threadIdx.x / 32)) * kDeltaCols;
    if (j0 >= S) return;
    const int hk = g.p.grouped ? h / (H / Hk) : h % Hk;
    const size_t head = static_cast<size_t>(h) * S * S;  // the head's state: column j (value dim) of S key dims
    const float *in = slot_state(r, r.from[run], off);
    float *out = r.states + static_cast<size_t>(r.slot[run]) * r.state_floats + off + head;
    if (in) in += head;

    float m[kDeltaCols][E];
#pragma unroll
    for (int c = 0; c < kDeltaCols; ++c)
#pragma unroll
        for (int e = 0; e < E; ++e) {
            const int j = j0 + c, i = lane + 32 * e;
            m[c][e] = in && j < S && i < S ? in[static_cast<size_t>(j) * S + i] : 0.0f;
        }
    const float dt = g.p.dt[h], decay = g.p.decay[h];
    const int64_t row = static_cast<int64_t>(2 * Hk + H) * S;
    for (int64_t t = r.t0[run]; t < r.t1[run]; ++t) {
        const float *xt = g.qkv + t * row;
        float q[E], k[E], nq = 0.0f, nk = 0.0f;
#pragma unroll
        for (int e = 0; e < E; ++e) {
            const int i = lane + 32 * e;
            q[e] = i < S ? xt[hk * S + i] : 0.0f;
            k[e] = i < S ? xt[(Hk + hk) * S + i] : 0.0f;
            nq += q[e] * q[e], nk += k[e] * k[e];
        }
        const float iq = g.p.scale / fmaxf(sqrtf(warp_sum(nq)), g.p.eps), ik = 1.0f / fmaxf(sqrtf(warp_sum(nk)), g.p.eps);
#pragma unroll
        for (int e = 0; e < E; ++e) q[e] *= iq, k[e] *= ik;
        const float decay_t = expf(softplus(g.a[t * H + h] + dt) * decay);
        const float beta = 1.0f / (1.0f + expf(-g.b[t * H + h]));
        const float *v = xt + static_cast<int64_t>(2 * Hk + h) * S;
        float *yt = g.y + t * H * S + static_cast<int64_t>(h) * S;
#pragma unroll
        for (int c = 0; c < kDeltaCols; ++c) {
            const int j = j0 + c;
            if (j >= S) break;  // the same for the whole warp
            float u = 0.0f;
#pragma unroll
            for (int e = 0; e < E; ++e) m[c][e] *= decay_t, u += m[c][e] * k[e];
            const float d = beta * (v[j] - warp_sum(u));
            float o = 0.0f;
#pragma unroll
            for (int e = 0; e < E; ++e) m[c][e] += k[e] * d, o += m[c][e] * q[e];
            o = warp_sum(o);
            if (lane == 0) yt[j] = o;
        }
        // The state after this token kept (a verifying pass).
        if (r.keep && r.keep[t] >= 0)
            store_columns<E>(r.states + static_cast<size_t>(r.keep[t]) * r.state_floats + off + head, m, j0, lane, S);
    }
    store_columns<E>(out, m, j0, lane, S);
}

// SSM_SCAN, recurrent form: a thread per (run, head, row i of the head), walking the run's tokens with its
// state row of d_state floats in the slot written (copied first from the slot read, or zeroed); the sum
// over the state in 8 lanes reduced as cpu/recurrent.cpp's dot, each product and sum rounded on its own.
struct ScanArgs {
    const float *xbc, *dt;
    float *y;
    ScanShape p;
};

__global__ void k_ssm_scan(ScanArgs a, int64_t max_runs, StateRuns r, uint32_t off) {
    const int P = a.p.head_dim, H = a.p.n_head, G = a.p.n_group, N = a.p.d_state;
    const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e >= max_runs * H * P) return;
    const int64_t run = e / (int64_t{H} * P);
    if (run >= *r.n_runs) return;
    const int h = static_cast<int>(e / P % H), i = static_cast<int>(e % P), g = h / (H / G);
    const size_t at = (static_cast<size_t>(h) * P + i) * N;
    const float *in = slot_state(r, r.from[run], off);
    float *m = r.states + static_cast<size_t>(r.slot[run]) * r.state_floats + off + at;
    if (!in) {
        for (int k = 0; k < N; ++k) m[k] = 0.0f;
    } else if (in + at != m) {
        for (int k = 0; k < N; ++k) m[k] = in[at + k];
    }
    const int64_t inner = int64_t{H} * P, row = inner + 2 * int64_t{G} * N;
    const float A = a.p.A[h], D = a.p.D[h], dt_bias = a.p.dt_bias[h];
    for (int64_t t = r.t0[run]; t < r.t1[run]; ++t) {
        const float *xt = a.xbc + t * row, *B = xt + inner + int64_t{g} * N, *C = xt + inner + int64_t{G + g} * N;
        const float s = softplus(__fadd_rn(a.dt[t * H + h], dt_bias)), dA = expf(__fmul_rn(s, A));
        const float x = xt[int64_t{h} * P + i], xs = __fmul_rn(x, s);
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int k = 0; k < N; ++k) {
            m[k] = __fadd_rn(__fmul_rn(m[k], dA), __fmul_rn(B[k], xs));
            acc[k & 7] = __fadd_rn(acc[k & 7], __fmul_rn(m[k], C[k]));
        }
        const float sum = __fadd_rn(__fadd_rn(__fadd_rn(acc[0], acc[1]), __fadd_rn(acc[2], acc[3])),
                                    __fadd_rn(__fadd_rn(acc[4], acc[5]), __fadd_rn(acc[6], acc[7])));
        a.y[t * inner + int64_t{h} * P + i] = __fadd_rn(sum, __fmul_rn(D, x));
        if (r.keep && r.keep[t] >= 0) {  // the state after this token kept (a verifying pass)
            float *kept = r.states + static_cast<size_t>(r.keep[t]) * r.state_floats + off + at;
            for (int k = 0; k < N; ++k) kept[k] = m[k];
        }
    }
}

} // namespace

void ssm_scan(const float *xbc, const float *dt, float *y, int64_t n_tokens, const ScanShape &p, const StateRuns &r,
              uint32_t state_offset, cudaStream_t s) {
    if (n_tokens <= 0) return;
    // A pass has at most as many runs as tokens; the threads of runs beyond *r.n_runs return at once.
    const int64_t threads = n_tokens * p.n_head * p.head_dim;
    k_ssm_scan<<<blocks_for(threads, 128), 128, 0, s>>>(ScanArgs{xbc, dt, y, p}, n_tokens, r, state_offset);
}

void ssm_conv(const float *x, float *y, int64_t n_tokens, int64_t C, int K, const float *w, const StateRuns &r,
              uint32_t state_offset, cudaStream_t s, const float *bias, bool silu) {
    if (n_tokens <= 0 || C <= 0) return;
    k_ssm_conv<<<blocks_for(n_tokens * C, 256), 256, 0, s>>>(x, y, n_tokens, C, K, w, r, state_offset, bias, silu);
    // A pass has at most as many runs as tokens.
    if (K > 1) k_ssm_conv_state<<<blocks_for(n_tokens * C, 256), 256, 0, s>>>(x, n_tokens, C, K, r, state_offset);
}

void gated_delta(const float *qkv, const float *a, const float *b, float *y, int64_t n_tokens, const DeltaShape &p,
                 const StateRuns &r, uint32_t state_offset, cudaStream_t s) {
    if (n_tokens <= 0) return;
    const DeltaArgs g{qkv, a, b, y, p};
    // x: a run each (at most as many as tokens; the others return at once), y: column groups, z: value heads.
    const dim3 grid(static_cast<unsigned>(n_tokens), blocks_for(p.head_dim, kDeltaCols * kDeltaWarps),
                    static_cast<unsigned>(p.n_head));
    const int E = (p.head_dim + 31) / 32;
    if (E <= 1) k_gated_delta<1><<<grid, kDeltaWarps * 32, 0, s>>>(g, r, state_offset);
    else if (E <= 2) k_gated_delta<2><<<grid, kDeltaWarps * 32, 0, s>>>(g, r, state_offset);
    else if (E <= 4) k_gated_delta<4><<<grid, kDeltaWarps * 32, 0, s>>>(g, r, state_offset);
    else k_gated_delta<8><<<grid, kDeltaWarps * 32, 0, s>>>(g, r, state_offset);
}

} // namespace ember::cu
