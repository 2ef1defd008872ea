// parity_encoder_ops.cpp — layer_norm, gelu and bidirectional attention against double precision
// (parity_encoder_ops.hpp).
#include "parity_encoder_ops.hpp"

#include "core/dtype.hpp"
#include "cpu/kernels.hpp"

#include <cmath>
#include <cstdio>

using namespace ember;
using namespace parity;

namespace {

// --- layer_norm ------------------------------------------------------------------------------------
// Mean and variance in double, the mean and the scale rounded to float, then (x - m) * s * w + b: the
// centring's rounding is relative to |x| + |m| (the inputs sit at an offset), the rest to |(x - m) s w| and
// |b|. Bound: 4 u (|x| + |m|) s |w| + 8 u (|(x - m) s w| + |b|) + u.
void test_layer_norm(void **) {
    uint64_t st = 71;
    for (uint32_t dim : {64u, 384u, 1000u})
        for (int affine = 0; affine < 2; ++affine) {
            const uint32_t nt = 3;
            std::vector<float> x = rand_vec(&st, size_t{nt} * dim, -3, 3);
            for (float &v : x) v += 5.0f;   // an offset the centring must remove exactly enough
            const std::vector<float> w = rand_vec(&st, dim, -2, 2), b = rand_vec(&st, dim, -1, 1);
            std::vector<float> y(x.size());
            ember_mod_op op = make_op(EMBER_GRAPH_LAYER_NORM);
            op.n_in = dim, op.n_tokens = nt, op.eps = 1e-12f, op.x = x.data(), op.y = y.data();
            op.norm = affine ? w.data() : nullptr, op.bias = affine ? b.data() : nullptr;
            run(op);
            for (uint32_t t = 0; t < nt; ++t) {
                double m = 0, var = 0;
                for (uint32_t i = 0; i < dim; ++i) m += x[t * dim + i];
                m /= dim;
                for (uint32_t i = 0; i < dim; ++i) var += (x[t * dim + i] - m) * (x[t * dim + i] - m);
                const double s = 1.0 / std::sqrt(var / dim + 1e-12);
                for (uint32_t i = 0; i < dim; ++i) {
                    const double n = (x[t * dim + i] - m) * s * (affine ? w[i] : 1.0);
                    const double want = n + (affine ? b[i] : 0.0);
                    const double wi = affine ? std::fabs(w[i]) : 1.0;
                    check(affine ? "layer_norm" : "layer_norm (no weight, no bias)", t * dim + i, y[t * dim + i], want,
                          4 * kU * (std::fabs(x[t * dim + i]) + std::fabs(m)) * s * wi +
                              8 * kU * (std::fabs(n) + (affine ? std::fabs(b[i]) : 0.0)) + kU);
                }
            }
        }
}

// --- gelu ------------------------------------------------------------------------------------------
// geglu's bound (parity_family_ops.cpp) with the up factor 1.
void test_gelu(void **) {
    uint64_t st = 73;
    const uint32_t n = 4099;
    const std::vector<float> g = rand_vec(&st, n, -8, 8);
    std::vector<float> y(n);
    ember_mod_op op = make_op(EMBER_GRAPH_GELU);
    op.n_in = n, op.x = g.data(), op.y = y.data();
    run(op);
    for (uint32_t i = 0; i < n; ++i) {
        const double gd = g[i], want = 0.5 * gd * (1 + std::tanh(std::sqrt(2 / 3.14159265358979323846) * (gd + 0.044715 * gd * gd * gd)));
        check("gelu", i, y[i], want, 32 * kU * std::fabs(gd) * (2 + std::fabs(gd)));
    }
}

// --- attention_ext with the SEQUENCE mask ------------------------------------------------------------
// Sequences of the given lengths, all in one batch (consecutive, each with its block table): every query
// attends every key of its own sequence, before and after it. The reference is test_parity's attention
// over those keys (K and V as the cache holds them); its bound, 1e-4 absolute on values of |v| <= 1. With a
// window (graph.h's, counted back from the sequence's last position as from a query's own under the causal
// mask) a sequence of n sees its last `window` keys only.
void attention_bidirectional(uint64_t seed, const std::vector<uint32_t> &len, uint32_t n_head, uint32_t n_head_kv,
                             uint32_t hd, uint32_t window = 0) {
    uint64_t st = seed;
    const uint32_t n_kv = n_head_kv * hd, bs = 16, n_blocks = 8;
    const size_t rb = dtype_row_bytes(DType::F16, n_kv);
    std::vector<uint8_t> kc(size_t{n_blocks} * bs * rb), vc(kc.size());
    const std::vector<int32_t> blocks[2] = {{0, 1, 2}, {5, 3}};   // each sequence's table: at most 48 / 32 tokens
    std::vector<std::vector<double>> kd(len.size()), vd(len.size());
    std::vector<int32_t> pos;
    std::vector<const int32_t *> tabs;
    std::vector<size_t> which;
    for (size_t s = 0; s < len.size(); ++s)
        for (uint32_t j = 0; j < len[s]; ++j) {
            const size_t row = (size_t(blocks[s][j / bs]) * bs + j % bs) * rb;
            for (auto [cache, dec] : {std::pair{&kc, &kd[s]}, std::pair{&vc, &vd[s]}}) {
                const std::vector<float> vals = rand_vec(&st, n_kv, -1, 1);
                cpu::store_kv_row(DType::F16, vals.data(), cache->data() + row, n_kv);
                std::vector<float> back(n_kv);
                cpu::dequantize_row(DType::F16, cache->data() + row, back.data(), n_kv);
                dec->insert(dec->end(), back.begin(), back.end());
            }
            pos.push_back(int32_t(j)), tabs.push_back(blocks[s].data()), which.push_back(s);
        }
    const uint32_t nt = uint32_t(pos.size());
    const std::vector<float> q = rand_vec(&st, size_t{nt} * n_head * hd, -1, 1);
    std::vector<float> y(q.size());
    ember_mod_op op = make_op(EMBER_GRAPH_ATTENTION_EXT);
    op.type = static_cast<uint32_t>(DType::F16), op.n_tokens = nt, op.n_head = n_head, op.n_head_kv = n_head_kv;
    op.head_dim = hd, op.scale = 8.0f / std::sqrt(float(hd));
    op.x = q.data(), op.ids = pos.data(), op.tables = tabs.data(), op.k_cache = kc.data(), op.v_cache = vc.data();
    op.n_blocks = n_blocks, op.block_size = bs, op.y = y.data(), op.attn_chunk = 0;
    op.attn_mask = EMBER_GRAPH_MASK_SEQUENCE, op.window = window;
    run(op);
    for (uint32_t t = 0; t < nt; ++t)
        for (uint32_t h = 0; h < n_head; ++h) {
            const uint32_t kvo = (h / (n_head / n_head_kv)) * hd, n = len[which[t]];
            const uint32_t first = window > 0 && n > window ? n - window : 0;
            const std::vector<double> &K = kd[which[t]], &V = vd[which[t]];
            std::vector<double> s(n, -INFINITY);
            double m = -INFINITY;
            for (uint32_t j = first; j < n; ++j) {
                double d = 0;
                for (uint32_t i = 0; i < hd; ++i) d += double(q[(t * n_head + h) * hd + i]) * K[size_t(j) * n_kv + kvo + i];
                s[j] = d * op.scale;
                m = std::fmax(m, s[j]);
            }
            double l = 0;
            for (double &e : s) l += (e = std::exp(e - m));   // exp(-inf) = 0: the keys outside the window
            for (uint32_t i = 0; i < hd; ++i) {
                double o = 0;
                for (uint32_t j = first; j < n; ++j) o += s[j] * V[size_t(j) * n_kv + kvo + i];
                char what[96];
                std::snprintf(what, sizeof what, "attention (bidirectional, head_dim %u) t %u h %u", hd, t, h);
                check(what, i, y[(t * n_head + h) * hd + i], o / l, 1e-4);
            }
        }
}

// Two sequences of 37 and 20 tokens (a query tile of one token on the GPU: several tables); one sequence
// of 45 (its queries share tiles), also under a window of 20; heads of 256 (the GPU's warp-per-query kernel).
void test_attention_bidirectional(void **) {
    attention_bidirectional(79, {37, 20}, 4, 2, 32);
    attention_bidirectional(83, {45}, 4, 2, 32);
    attention_bidirectional(97, {45, 12}, 4, 2, 32, 20);
    attention_bidirectional(89, {21, 30}, 3, 1, 256);
}

} // namespace

void parity_encoder_ops_add(std::vector<CMUnitTest> &tests) {
    tests.push_back(cmocka_unit_test(test_layer_norm));
    tests.push_back(cmocka_unit_test(test_gelu));
    tests.push_back(cmocka_unit_test(test_attention_bidirectional));
}
