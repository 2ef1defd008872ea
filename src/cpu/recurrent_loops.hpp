// recurrent_loops.hpp — the inner loops of the recurrent layers' kernels (recurrent.hpp), written once
// over a lane policy and compiled per ISA level: recurrent.cpp (baseline: 8 lanes, separate multiply and
// add), recurrent_avx2.cpp and recurrent_avx512.cpp (16 lanes with fused multiply-adds, as two AVX
// registers or one AVX-512 register: the same operations, so those two levels give the same bits).
//
// Bits: each lane sums its elements in order, the lanes are reduced in one fixed order, and nothing is
// contracted into an FMA that the code does not ask for (the files are built with -ffp-contract=off), so
// at one level every split of the work gives the same bits, and a prompt fed whole gives those of its
// tokens fed one at a time.
//
// Internal linkage (anonymous namespace) on purpose: each including file gets its own copy, compiled
// with its own flags, and the linker can never hand an AVX copy to the baseline's caller.
#pragma once

#include "cpu/recurrent.hpp"
#include "cpu/vec_dot.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ember::cpu::detail {

// Limits the callers check (recurrent.cpp) so that the loops keep their buffers on the stack.
constexpr int kMaxDeltaHeadDim = 1024;
constexpr int64_t kMaxConvKernel = 64, kMaxConvChunk = 64;

// One value head of one sequence's run through the gated delta rule (recurrent.cpp's gated_delta).
struct DeltaHead {
    const float *qkv, *a, *b;   // the batch's rows
    float *y;
    const DeltaParams *p;
    int h, hk;                  // value head, the key head it reads
    const float *from;          // the state the run's first token starts from (nullptr: zeros; may be M)
    float *M;                   // the head's state written: head_dim rows (value dim) of head_dim key dims
    uint32_t t0, t1;
    float *const *keep;         // StateRun::keep (nullptr: none), each slot's head at keep_off
    int64_t keep_off;
};

// One channel range [c0, c1) of one sequence's run through the causal convolution (ssm_conv).
struct ConvChunk {
    const float *x;
    float *y;
    int64_t C, K;
    const float *w;      // [C][K]
    const float *from;   // the window the run starts from (nullptr: zeros; may be win)
    float *win;          // [K - 1][C], oldest first
    int64_t c0, c1;
    uint32_t t0, t1;
    const float *bias;   // [C], added after the taps (nullptr: none)
    bool act_silu;       // silu of the sum (else the sum itself: a linear convolution)
    float *const *keep;  // StateRun::keep (nullptr: none), each slot's window at keep_off
    int64_t keep_off;
};

// The levels' entry points are declared in vec_dot.hpp with the other kernels' variants.

namespace {

// Where token t of a run [t0, t1) leaves its state: the slot it keeps it in (StateRun::keep), except the
// last token, which writes the run's own (`last`, then copied to its kept slot: keep_last_copy).
inline float *kept_or(float *const *keep, int64_t off, uint32_t t, uint32_t t0, uint32_t t1, float *last) {
    return keep && keep[t - t0] && t + 1 < t1 ? keep[t - t0] + off : last;
}
inline void keep_last_copy(float *const *keep, int64_t off, uint32_t t0, uint32_t t1, const float *last, int64_t n) {
    if (keep && t1 > t0 && keep[t1 - 1 - t0]) std::memcpy(keep[t1 - 1 - t0] + off, last, sizeof(float) * size_t(n));
}

typedef float V8 __attribute__((vector_size(32)));
constexpr int kLanes = 8;

inline V8 load8(const float *p) {
    V8 v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
inline void store8(float *p, V8 v) { std::memcpy(p, &v, sizeof v); }
inline float reduce8(V8 a) { return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7])); }

// The baseline's lanes: 8, multiply then add.
struct Lanes8 {
    static constexpr int W = 8;
    using Reg = V8;
    static Reg zero() { return Reg{}; }
    static Reg load(const float *p) { return load8(p); }
    static void store(float *p, Reg v) { store8(p, v); }
    static Reg scale(Reg a, float s) { return a * s; }
    static Reg madd(Reg a, Reg b, Reg c) { return a * b + c; }        // a b + c, two roundings
    static Reg madd(Reg a, float b, Reg c) { return a * b + c; }
    static float madd1(float a, float b, float c) { return a * b + c; }
};

// Lanes reduced in one fixed order: for 16, lane l + 8 onto lane l first, then the tree of 8.
template <int W> inline float reduce_lanes(const float *l) {
    if constexpr (W == 16) {
        float h[8];
        for (int i = 0; i < 8; ++i) h[i] = l[i] + l[i + 8];
        return reduce_lanes<8>(h);
    } else {
        static_assert(W == 8);
        return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
    }
}

// sum_i a[i] * b[i]: element i in lane i % W.
template <class L> inline float dot_lanes(const float *a, const float *b, int n) {
    typename L::Reg acc = L::zero();
    int i = 0;
    for (; i + L::W <= n; i += L::W) acc = L::madd(L::load(a + i), L::load(b + i), acc);
    float l[L::W];
    L::store(l, acc);
    for (int j = 0; i < n; ++i, ++j) l[j] = L::madd1(a[i], b[i], l[j]);
    return reduce_lanes<L::W>(l);
}

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// log(1 + e^x), exact to float beyond 20 (where e^x alone would overflow sooner than it matters).
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// x / max(|x|, eps) * scale, n values, into out.
template <class L> inline void l2_normalize(const float *x, float *out, int n, float eps, float scale) {
    const float norm = std::sqrt(dot_lanes<L>(x, x, n));
    const float inv = scale / std::max(norm, eps);
    for (int i = 0; i < n; ++i) out[i] = x[i] * inv;
}

// Per token: M = g M (decay); d_j = beta (v_j - M_j . k); M_j += d_j k; y_j = M_j . q. Each state row is
// read and written in two passes (decay with its k product, then update with its q product) while it
// sits in L1.
template <class L> inline void gated_delta_head(const DeltaHead &job) {
    using Reg = typename L::Reg;
    constexpr int W = L::W;
    const DeltaParams &p = *job.p;
    const int S = p.head_dim, H = p.n_head, Hk = p.n_head_k;
    const int64_t row = int64_t{2 * Hk + H} * S;
    const float *in = job.from;
    if (!in) std::fill(job.M, job.M + int64_t{S} * S, 0.0f), in = job.M;
    float qk[2 * kMaxDeltaHeadDim];
    float *q = qk, *k = qk + S;
    float lanes[W];
    for (uint32_t t = job.t0; t < job.t1; ++t) {
        float *M = kept_or(job.keep, job.keep_off, t, job.t0, job.t1, job.M);
        const float *xt = job.qkv + int64_t{t} * row;
        l2_normalize<L>(xt + int64_t{job.hk} * S, q, S, p.eps, p.scale);
        l2_normalize<L>(xt + int64_t{Hk + job.hk} * S, k, S, p.eps, 1.0f);
        const float *v = xt + int64_t{2 * Hk + job.h} * S;
        const float g = std::exp(softplus(job.a[int64_t{t} * H + job.h] + p.dt[job.h]) * p.decay[job.h]);
        const float beta = sigmoid(job.b[int64_t{t} * H + job.h]);
        float *out = job.y + int64_t{t} * H * S + int64_t{job.h} * S;
        for (int j = 0; j < S; ++j) {
            float *m = M + int64_t{j} * S;
            const float *m_in = in + int64_t{j} * S;
            Reg acc = L::zero();
            int i = 0;
            for (; i + W <= S; i += W) {
                const Reg mv = L::scale(L::load(m_in + i), g);
                L::store(m + i, mv);
                acc = L::madd(mv, L::load(k + i), acc);
            }
            L::store(lanes, acc);
            for (int l = 0; i < S; ++i, ++l) {
                m[i] = m_in[i] * g;
                lanes[l] = L::madd1(m[i], k[i], lanes[l]);
            }
            const float d = beta * (v[j] - reduce_lanes<W>(lanes));
            acc = L::zero();
            i = 0;
            for (; i + W <= S; i += W) {
                const Reg mv = L::madd(L::load(k + i), d, L::load(m + i));
                L::store(m + i, mv);
                acc = L::madd(mv, L::load(q + i), acc);
            }
            L::store(lanes, acc);
            for (int l = 0; i < S; ++i, ++l) {
                m[i] = L::madd1(k[i], d, m[i]);
                lanes[l] = L::madd1(m[i], q[i], lanes[l]);
            }
            out[j] = reduce_lanes<W>(lanes);
        }
        in = M;
    }
    keep_last_copy(job.keep, job.keep_off, job.t0, job.t1, job.M, int64_t{S} * S);
}

// y_t[c] = act(sum_j w[c][j] x_{t-K+1+j}[c] + bias[c]), 8 channels at a time; each channel sums its taps in
// order (act: silu, or none for a linear convolution).
inline void ssm_conv_chunk(const ConvChunk &job) {
    const int64_t C = job.C, K = job.K, W = K - 1, c0 = job.c0, n = job.c1 - job.c0;
    float wt[kMaxConvKernel][kMaxConvChunk];   // the chunk's taps, tap-major
    for (int64_t c = 0; c < n; ++c)
        for (int64_t j = 0; j < K; ++j) wt[j][c] = job.w[(c0 + c) * K + j];
    float *win = job.win;
    for (int64_t j = 0; j < W; ++j)
        for (int64_t c = 0; c < n; ++c) win[j * C + c0 + c] = job.from ? job.from[j * C + c0 + c] : 0.0f;
    float s[kMaxConvChunk];
    for (uint32_t t = job.t0; t < job.t1; ++t) {
        const float *xt = job.x + int64_t{t} * C + c0;
        float *yt = job.y + int64_t{t} * C + c0;
        int64_t c = 0;
        for (; c + kLanes <= n; c += kLanes) {
            V8 acc = {};
            for (int64_t j = 0; j < W; ++j) acc += load8(&wt[j][c]) * load8(win + j * C + c0 + c);
            acc += load8(&wt[W][c]) * load8(xt + c);
            if (job.bias) acc += load8(job.bias + c0 + c);
            store8(s + c, acc);
        }
        for (; c < n; ++c) {
            float a = 0.0f;
            for (int64_t j = 0; j < W; ++j) a += wt[j][c] * win[j * C + c0 + c];
            a = a + wt[W][c] * xt[c];
            s[c] = job.bias ? a + job.bias[c0 + c] : a;
        }
        if (job.act_silu)
            for (c = 0; c < n; ++c) yt[c] = silu(s[c]);
        else
            std::memcpy(yt, s, sizeof(float) * size_t(n));
        for (int64_t j = 0; j + 1 < W; ++j)
            std::memcpy(win + j * C + c0, win + (j + 1) * C + c0, sizeof(float) * size_t(n));
        if (W > 0) std::memcpy(win + (W - 1) * C + c0, xt, sizeof(float) * size_t(n));
        // A kept token's window: the chunk's K - 1 rows of its channels (small; copied, not written there).
        if (job.keep && job.keep[t - job.t0])
            for (int64_t j = 0; j < W; ++j)
                std::memcpy(job.keep[t - job.t0] + job.keep_off + j * C + c0, win + j * C + c0, sizeof(float) * size_t(n));
    }
}

} // namespace

} // namespace ember::cpu::detail
