// parity_hybrid_ops.cpp — the parity harness's cases for the ops of the hybrid families (graph.h's ops
// from COPY_COLS on: copy_cols, sigmoid_mul, ssm_conv, gated_delta, ssm_scan, mul), compiled into test_parity and run on
// whichever backend it runs. Each result is held to a bound derived next to its op, against a
// double-precision reference written from graph.h's definitions; the recurrent ops also carry their
// state across calls, and the state after the last token is checked too, as is the state each token
// leaves where the op keeps it (ember_mod_op.states_after, a verifying pass's kept states). u is float's
// unit roundoff.
#include "parity_hybrid_ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

using namespace parity;

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double silu(double x) { return x * sigmoid(x); }

// copy_cols moves values: exact. sigmoid_mul: exp (a few ulp) and two roundings, relative to |x|.
void test_copy_sigmoid(void **) {
    uint64_t st = 51;
    const uint32_t rows = 5, groups = 3, stride = 20, off = 7, n = 9;
    const std::vector<float> x = rand_vec(&st, rows * groups * stride, -4, 4);
    // Into rows of y_width from column y_col (the columns around stay as they were: -1).
    const uint32_t y_width = groups * n + 11, y_col = 4;
    std::vector<float> y(rows * y_width, -1.0f);
    ember_mod_op op = make_op(EMBER_GRAPH_COPY_COLS);
    op.n_tokens = rows, op.n_in = groups * stride, op.n_head = groups, op.head_dim = n, op.col_offset = off;
    op.n_out = y_width, op.n_rot = y_col;
    op.x = x.data(), op.y = y.data();
    run(op);
    for (uint32_t r = 0; r < rows; ++r)
        for (uint32_t c = 0; c < y_width; ++c) {
            const bool inside = c >= y_col && c < y_col + groups * n;
            const uint32_t g = (c - y_col) / n, i = (c - y_col) % n;
            check("copy_cols", r * y_width + c, y[r * y_width + c], inside ? x[r * groups * stride + g * stride + off + i] : -1.0, 0);
        }
    const uint32_t w = 300;
    const std::vector<float> a = rand_vec(&st, rows * w, -5, 5), g = rand_vec(&st, rows * w, -12, 12);
    std::vector<float> z(rows * w);
    for (uint32_t per_row = 0; per_row < 2; ++per_row) {
        op = make_op(EMBER_GRAPH_SIGMOID_MUL);
        op.n_tokens = rows, op.n_in = w, op.n_out = per_row ? 1 : w, op.x = a.data(), op.x2 = g.data(), op.y = z.data();
        run(op);
        for (uint32_t r = 0; r < rows; ++r)
            for (uint32_t i = 0; i < w; ++i) {
                const double gate = per_row ? g[r] : g[r * w + i];
                check(per_row ? "sigmoid_mul (one gate a row)" : "sigmoid_mul", r * w + i, z[r * w + i],
                      a[r * w + i] * sigmoid(gate), 16 * kU * std::fabs(a[r * w + i]));
            }
    }
}

// ssm_conv: a sum of K products (K roundings of the running sum, each within u of it: K u sum|w x|), then
// silu (|silu'| < 1.1; exp and the division a few ulp: 8 u |silu|). Run as two calls (the window carried
// in the state), against the whole sequence in double; the state after is the last K - 1 inputs, exact.
void test_ssm_conv(void **) {
    uint64_t st = 53;
    const uint32_t C = 70, K = 4, T = 11, split = 6;
    const std::vector<float> x = rand_vec(&st, T * C, -3, 3), w = rand_vec(&st, C * K, -1, 1),
                             init = rand_vec(&st, (K - 1) * C, -3, 3);
    std::vector<float> y(T * C), state = init, after(T * (K - 1) * C, -7.0f);
    for (uint32_t part = 0; part < 2; ++part) {
        const uint32_t t0 = part ? split : 0, t1 = part ? T : split;
        ember_mod_op op = make_op(EMBER_GRAPH_SSM_CONV);
        op.n_tokens = t1 - t0, op.n_in = C, op.conv_kernel = K, op.w = w.data(), op.x = x.data() + t0 * C;
        op.y = y.data() + t0 * C, op.state = state.data(), op.states_after = after.data() + t0 * (K - 1) * C;
        run(op);
    }
    // The input history: the initial window, then x.
    auto input = [&](int64_t t, uint32_t c) -> double { return t < 0 ? init[(t + K - 1) * C + c] : x[t * C + c]; };
    for (uint32_t t = 0; t < T; ++t)
        for (uint32_t c = 0; c < C; ++c) {
            double s = 0, mag = 0;
            for (uint32_t j = 0; j < K; ++j) {
                const double p = double(w[c * K + j]) * input(int64_t(t) - K + 1 + j, c);
                s += p, mag += std::fabs(p);
            }
            check("ssm_conv", t * C + c, y[t * C + c], silu(s), 1.1 * (K + 1) * kU * mag + 8 * kU * std::fabs(silu(s)));
        }
    for (uint32_t j = 0; j + 1 < K; ++j)
        for (uint32_t c = 0; c < C; ++c) check("ssm_conv state", j * C + c, state[j * C + c], input(T - K + 1 + j, c), 0);
    // The window kept after each token (states_after, a verifying pass's): its last K - 1 inputs, exact.
    for (uint32_t t = 0; t < T; ++t)
        for (uint32_t j = 0; j + 1 < K; ++j)
            for (uint32_t c = 0; c < C; ++c)
                check("ssm_conv state after a token", (t * (K - 1) + j) * C + c, after[(t * (K - 1) + j) * C + c],
                      input(int64_t(t) - K + 2 + j, c), 0);
}

// gated_delta in double from graph.h's definition. Bound: each token's state update is a decay, a dot
// product of S terms and an update (about 2 S + 4 roundings on values of the state's size, |M| <= mag);
// errors carry through later tokens scaled by g < 1 and (1 - beta k_i^2) <= 1, so they add at most:
// (4 S + 16) u mag per token, times T tokens, for the state and (with |q| = scale) the outputs.
void test_gated_delta(void **) {
    uint64_t st = 57;
    const uint32_t H = 4, Hk = 2, S = 32, T = 13, split = 5;
    const uint32_t row = (2 * Hk + H) * S;
    const float eps = 1e-6f, scale = 1.0f / std::sqrt(float(S));
    const std::vector<float> qkv = rand_vec(&st, T * row, -1, 1), a = rand_vec(&st, T * H, -3, 2),
                             b = rand_vec(&st, T * H, -3, 3), dt = rand_vec(&st, H, -1, 1), decay = rand_vec(&st, H, -2, -0.1f),
                             init = rand_vec(&st, H * S * S, -0.5f, 0.5f);
    const size_t floats = size_t(H) * S * S;
    for (int whole = 0; whole < 2; ++whole) {
        std::vector<float> y(T * H * S), state = init, after(T * floats, -7.0f);
        for (uint32_t part = 0; part < (whole ? 1u : 2u); ++part) {
            const uint32_t t0 = whole ? 0 : part ? split : 0, t1 = whole ? T : part ? T : split;
            ember_mod_op op = make_op(EMBER_GRAPH_GATED_DELTA);
            op.n_tokens = t1 - t0, op.n_head = H, op.n_head_kv = Hk, op.head_dim = S, op.eps = eps, op.scale = scale;
            op.x = qkv.data() + t0 * row, op.x2 = a.data() + t0 * H, op.x3 = b.data() + t0 * H;
            op.dt = dt.data(), op.decay_a = decay.data(), op.y = y.data() + t0 * H * S, op.state = state.data();
            op.states_after = after.data() + t0 * floats;   // each token's state kept, as a verifying pass keeps it
            run(op);
        }
        // Reference.
        std::vector<double> M(init.begin(), init.end());
        double mag = 0;
        for (double m : M) mag = std::max(mag, std::fabs(m));
        for (uint32_t t = 0; t < T; ++t) {
            const float *xt = qkv.data() + t * row;
            for (uint32_t h = 0; h < H; ++h) {
                const uint32_t hk = h % Hk;
                double q[64], k[64], nq = 0, nk = 0;
                for (uint32_t i = 0; i < S; ++i) nq += double(xt[hk * S + i]) * xt[hk * S + i], nk += double(xt[(Hk + hk) * S + i]) * xt[(Hk + hk) * S + i];
                for (uint32_t i = 0; i < S; ++i) {
                    q[i] = xt[hk * S + i] / std::max(std::sqrt(nq), double(eps)) * scale;
                    k[i] = xt[(Hk + hk) * S + i] / std::max(std::sqrt(nk), double(eps));
                }
                const double sp = double(a[t * H + h]) + dt[h];
                const double g = std::exp((sp > 20 ? sp : std::log1p(std::exp(sp))) * decay[h]), beta = sigmoid(b[t * H + h]);
                double *Mh = M.data() + size_t(h) * S * S;
                for (uint32_t j = 0; j < S; ++j) {
                    double *m = Mh + size_t(j) * S, u = 0, o = 0;
                    for (uint32_t i = 0; i < S; ++i) m[i] *= g, u += m[i] * k[i];
                    const double d = beta * (xt[(2 * Hk + h) * S + j] - u);
                    for (uint32_t i = 0; i < S; ++i) m[i] += k[i] * d, o += m[i] * q[i], mag = std::max(mag, std::fabs(m[i]));
                    const double bound = (4.0 * S + 16) * kU * std::max(1.0, mag) * (t + 1);
                    char what[64];
                    std::snprintf(what, sizeof what, "gated_delta%s t %u h %u", whole ? "" : " (two calls)", t, h);
                    check(what, j, y[(t * H + h) * S + j], o, bound);
                }
            }
            for (size_t i = 0; i < floats; ++i)
                check("gated_delta state after a token", t * floats + i, after[t * floats + i], M[i],
                      (4.0 * S + 16) * kU * std::max(1.0, mag) * (t + 1));
        }
        for (size_t i = 0; i < M.size(); ++i)
            check(whole ? "gated_delta state" : "gated_delta state (two calls)", i, state[i], M[i],
                  (4.0 * S + 16) * kU * std::max(1.0, mag) * T);
    }
}

// ssm_conv's options: a bias (one more rounding of the sum) and no activation (LFM2); mul: one rounding.
void test_ssm_conv_linear_bias(void **) {
    uint64_t st = 59;
    const uint32_t C = 40, K = 3, T = 7;
    const std::vector<float> x = rand_vec(&st, T * C, -3, 3), w = rand_vec(&st, C * K, -1, 1), bias = rand_vec(&st, C, -1, 1);
    for (uint32_t act = 0; act < 2; ++act) {
        std::vector<float> y(T * C), state((K - 1) * C, 0.0f);
        ember_mod_op op = make_op(EMBER_GRAPH_SSM_CONV);
        op.n_tokens = T, op.n_in = C, op.conv_kernel = K, op.w = w.data(), op.x = x.data(), op.y = y.data();
        op.state = state.data(), op.bias = bias.data(), op.n_out = act;   // 1: EMBER_GRAPH_SSM_CONV_LINEAR
        run(op);
        for (uint32_t t = 0; t < T; ++t)
            for (uint32_t c = 0; c < C; ++c) {
                double s = bias[c], mag = std::fabs(bias[c]);
                for (uint32_t j = 0; j < K; ++j) {
                    const int64_t at = int64_t(t) - K + 1 + j;
                    const double p = at < 0 ? 0.0 : double(w[c * K + j]) * x[at * C + c];
                    s += p, mag += std::fabs(p);
                }
                const double want = act ? s : silu(s);
                check(act ? "ssm_conv (linear, bias)" : "ssm_conv (bias)", t * C + c, y[t * C + c], want,
                      1.1 * (K + 2) * kU * mag + 8 * kU * std::fabs(want));
            }
    }
    const std::vector<float> a = rand_vec(&st, 300, -5, 5), b = rand_vec(&st, 300, -5, 5);
    std::vector<float> z(300);
    ember_mod_op op = make_op(EMBER_GRAPH_MUL);
    op.n_tokens = 1, op.n_in = 300, op.x = a.data(), op.x2 = b.data(), op.y = z.data();
    run(op);
    for (uint32_t i = 0; i < 300; ++i) check("mul", i, z[i], double(a[i]) * b[i], kU * std::fabs(double(a[i]) * b[i]));
}

// ssm_scan (Mamba-2) in double from graph.h's definition, whole and in two calls (the state carried). Per
// token a state entry takes a multiplication by dA <= 1 (its error carried), and B x s added (3 roundings),
// the output a sum of N products plus D x (N + 3 roundings): with |H| <= mag, the state's error grows by
// about 4 u mag a token and the output's is (N + 4) u (mag |C|max N + |D x|) plus the state's carried in;
// softplus and exp (a few ulp each) move s and dA by ~8 u relative, which moves H by ~16 u mag a token.
void test_ssm_scan(void **) {
    uint64_t st = 61;
    const uint32_t H = 4, G = 2, P = 8, N = 16, T = 12, split = 5;
    const uint32_t inner = H * P, row = inner + 2 * G * N;
    const std::vector<float> xbc = rand_vec(&st, T * row, -1, 1), dt = rand_vec(&st, T * H, -3, 1),
                             A = rand_vec(&st, H, -4, -0.2f), D = rand_vec(&st, H, 0.5f, 1.5f),
                             dt_bias = rand_vec(&st, H, -1, 0.5f), init = rand_vec(&st, H * P * N, -0.5f, 0.5f);
    const size_t floats = size_t(H) * P * N;
    for (int whole = 0; whole < 2; ++whole) {
        std::vector<float> y(T * inner), state = init, after(T * floats, -7.0f);
        for (uint32_t part = 0; part < (whole ? 1u : 2u); ++part) {
            const uint32_t t0 = whole ? 0 : part ? split : 0, t1 = whole ? T : part ? T : split;
            ember_mod_op op = make_op(EMBER_GRAPH_SSM_SCAN);
            op.n_tokens = t1 - t0, op.n_head = H, op.n_head_kv = G, op.head_dim = P, op.conv_kernel = N;
            op.x = xbc.data() + t0 * row, op.x2 = dt.data() + t0 * H, op.y = y.data() + t0 * inner;
            op.decay_a = A.data(), op.norm = D.data(), op.dt = dt_bias.data(), op.state = state.data();
            op.states_after = after.data() + t0 * floats;   // each token's state kept, as a verifying pass keeps it
            run(op);
        }
        std::vector<double> S(init.begin(), init.end());
        double mag = 0;
        for (double v : S) mag = std::max(mag, std::fabs(v));
        for (uint32_t t = 0; t < T; ++t) {
            const float *xt = xbc.data() + t * row;
            for (uint32_t h = 0; h < H; ++h) {
                const uint32_t g = h / (H / G);
                const double z = double(dt[t * H + h]) + dt_bias[h], sp = z > 20 ? z : std::log1p(std::exp(z));
                const double dA = std::exp(sp * A[h]);
                const float *B = xt + inner + g * N, *C = xt + inner + (G + g) * N;
                for (uint32_t i = 0; i < P; ++i) {
                    double *m = S.data() + (size_t(h) * P + i) * N, o = 0;
                    const double x = xt[h * P + i];
                    for (uint32_t k = 0; k < N; ++k) {
                        m[k] = m[k] * dA + B[k] * x * sp;
                        o += m[k] * C[k];
                        mag = std::max(mag, std::fabs(m[k]));
                    }
                    o += D[h] * x;
                    const double bound = (N + 4) * kU * (mag * N + std::fabs(D[h] * x)) + 20.0 * kU * mag * N * (t + 1);
                    char what[64];
                    std::snprintf(what, sizeof what, "ssm_scan%s t %u h %u", whole ? "" : " (two calls)", t, h);
                    check(what, i, y[t * inner + h * P + i], o, bound);
                }
            }
            for (size_t i = 0; i < floats; ++i)
                check("ssm_scan state after a token", t * floats + i, after[t * floats + i], S[i], 20.0 * kU * mag * (t + 1));
        }
        for (size_t i = 0; i < S.size(); ++i)
            check(whole ? "ssm_scan state" : "ssm_scan state (two calls)", i, state[i], S[i], 20.0 * kU * mag * T);
    }
}

} // namespace

void parity_hybrid_ops_add(std::vector<CMUnitTest> &tests) {
    tests.push_back(cmocka_unit_test(test_ssm_conv_linear_bias));
    tests.push_back(cmocka_unit_test(test_ssm_scan));
    tests.push_back(cmocka_unit_test(test_copy_sigmoid));
    tests.push_back(cmocka_unit_test(test_ssm_conv));
    tests.push_back(cmocka_unit_test(test_gated_delta));
}
