// parity_family_ops.cpp — the parity harness's cases for the ops graph.h has for the model families of
// docs/model-families.md (scale, softcap, geglu, attention_ext, rope_yarn, moe), compiled into test_parity and run on
// whichever backend it runs (the CPU's table, or "vulkan" / "cuda"). Each result is held to a bound
// derived next to its op, against a double-precision reference written from graph.h's definitions. A
// backend that has not implemented an op yet fails these with its EMBER_ERR_UNSUPPORTED message.
#include "parity_family_ops.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "cpu/kernels.hpp"  // GGUF quantizers and the f16/Q8_0 cache rows, to make test inputs

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <vector>

using namespace ember;

namespace {

using namespace parity;

// --- scale, softcap, geglu ---------------------------------------------------------------------------
// scale: one rounding (u). softcap: x / c (u), tanh (the GPU's: a few ulp, 4 u allowed relative to the
// cap, as |tanh| <= 1), times c (u): within 8 u c. geglu: the tanh form's polynomial and tanh (~10 u),
// 0.5 g (1 + t) u: relative to |g u| (1 + |g|) within 32 u, plus the absolute 32 u |g u| of tanh near -1.
void test_elementwise(void **) {
    uint64_t st = 41;
    const uint32_t n = 3000;
    const std::vector<float> x = rand_vec(&st, n, -80, 80), g = rand_vec(&st, n, -8, 8), u = rand_vec(&st, n, -3, 3);
    std::vector<float> y(n);
    ember_mod_op op = make_op(EMBER_GRAPH_SCALE);
    op.n_in = n, op.x = x.data(), op.y = y.data(), op.scale = 0.37f;
    run(op);
    for (uint32_t i = 0; i < n; ++i) check("scale", i, y[i], double(x[i]) * double(op.scale), 2 * kU * std::fabs(x[i]));
    op = make_op(EMBER_GRAPH_SOFTCAP);
    op.n_in = n, op.x = x.data(), op.y = y.data(), op.softcap = 30.0f;
    run(op);
    for (uint32_t i = 0; i < n; ++i) check("softcap", i, y[i], 30.0 * std::tanh(x[i] / 30.0), 8 * kU * 30.0);
    op = make_op(EMBER_GRAPH_GEGLU);
    op.n_in = n, op.x = g.data(), op.x2 = u.data(), op.y = y.data();
    run(op);
    for (uint32_t i = 0; i < n; ++i) {
        const double gd = g[i], gelu = 0.5 * gd * (1 + std::tanh(std::sqrt(2 / 3.14159265358979323846) * (gd + 0.044715 * gd * gd * gd)));
        check("geglu", i, y[i], gelu * u[i], 32 * kU * std::fabs(gd * u[i]) * (2 + std::fabs(gd)));
    }
}

// --- rope_yarn -----------------------------------------------------------------------------------------
// graph.h's formula in double; the bound is rope's (test_parity.cpp) times the output scale: each output
// is two products and a sum of values of |x| <= 2, the angle's cos/sin exact in double and rounded once.
void test_rope_yarn(void **) {
    uint64_t st = 43;
    for (int yarn = 0; yarn < 2; ++yarn)
        for (int neox = 0; neox < 2; ++neox) {
            const uint32_t n_head = 3, hd = 32, n_rot = neox ? 24 : 32, nt = 4;
            const int32_t pos[nt] = {0, 3, 57, 3000};
            const std::vector<float> x = rand_vec(&st, size_t{nt} * n_head * hd, -2, 2), ff = rand_vec(&st, n_rot / 2, 1, 6);
            std::vector<float> y(x.size());
            ember_mod_op op = make_op(EMBER_GRAPH_ROPE_YARN);
            op.n_tokens = nt, op.n_head = n_head, op.head_dim = hd, op.n_rot = n_rot;
            op.rope_mode = neox ? EMBER_GRAPH_ROPE_NEOX : EMBER_GRAPH_ROPE_NORMAL;
            op.rope_theta = 150000.0f, op.ids = pos, op.x = x.data(), op.y = y.data();
            if (yarn) {  // gpt-oss's: factor 32 over 4096 positions, the whole ramp
                op.rope_freq_scale = 1.0f / 32, op.rope_ext_factor = 1, op.rope_attn_factor = 1;
                op.rope_beta_fast = 32, op.rope_beta_slow = 1, op.rope_n_ctx_orig = 4096;
            } else {     // LongRoPE: per-pair divisors and an attention factor
                op.rope_freq_scale = 1, op.norm = ff.data(), op.rope_attn_factor = 1.19f;
            }
            run(op);
            const double lo = std::max(0.0, std::floor(n_rot * std::log(4096 / (32 * 2 * 3.14159265358979323846)) / (2 * std::log(150000.0))));
            const double hi = std::min<double>(n_rot - 1, std::ceil(n_rot * std::log(4096 / (1 * 2 * 3.14159265358979323846)) / (2 * std::log(150000.0))));
            const double mscale = yarn ? 1 + 0.1 * std::log(32.0) : 1.19;
            for (uint32_t t = 0; t < nt; ++t)
                for (uint32_t h = 0; h < n_head; ++h) {
                    const float *v = x.data() + (t * n_head + h) * hd;
                    std::vector<double> want(v, v + hd);
                    for (uint32_t i = 0; i < n_rot / 2; ++i) {
                        double base = std::pow(150000.0, -2.0 * i / n_rot), f = base;
                        if (yarn) {
                            const double ramp = 1 - std::clamp((i - lo) / std::max(0.001, hi - lo), 0.0, 1.0);
                            f = base / 32 * (1 - ramp) + base * ramp;
                        } else {
                            f = base / ff[i];
                        }
                        const double a = pos[t] * f;
                        const uint32_t i0 = neox ? i : 2 * i, i1 = neox ? i + n_rot / 2 : 2 * i + 1;
                        want[i0] = (v[i0] * std::cos(a) - v[i1] * std::sin(a)) * mscale;
                        want[i1] = (v[i0] * std::sin(a) + v[i1] * std::cos(a)) * mscale;
                    }
                    for (uint32_t i = 0; i < hd; ++i)
                        check(yarn ? "rope_yarn yarn" : "rope_yarn longrope", (t * n_head + h) * hd + i,
                              y[(t * n_head + h) * hd + i], want[i], 6 * kU * 4 * mscale);
                }
        }
}

// --- attention_ext -------------------------------------------------------------------------------------
// One sequence of 70 positions on shuffled blocks; the last 9 positions as queries (a prefill) and the
// last alone (decode); window 0 / 5 / 40, softcap 0 / 3, sinks or none, f16 and Q8_0 caches; then, each
// alone and with a softcap and sinks, chunked local attention (chunks of 16: the prefill's queries span
// two) and attention temperature (scale 0.5, offset 1, floor 8: factors 1 + 0.5 ln 8 .. ln 9 over the
// queries). The bound is attention's (test_parity.cpp): 1e-4 on outputs that are convex combinations of
// |v| <= 1.
// Which keys a query sees and how its scores scale: a window, a local chunk, a temperature (0: off).
struct Mask {
    uint32_t window, chunk;
    float temp;
};

void test_attention_ext(void **) {
    uint64_t st = 47;
    for (DType type : {DType::F16, DType::Q8_0})
        for (const Mask mask : {Mask{0, 0, 0}, Mask{5, 0, 0}, Mask{40, 0, 0}, Mask{0, 16, 0}, Mask{0, 0, 0.5f}})
            for (int cap = 0; cap < 2; ++cap)
                for (int sink = 0; sink < 2; ++sink)
                    for (int decode = 0; decode < 2; ++decode) {
                        const uint32_t n_head = 4, n_head_kv = 2, hd = 64, n_kv = n_head_kv * hd, bs = 16, len = 70;
                        const uint32_t n_blocks = (len + bs - 1) / bs + 3;
                        const size_t rb = dtype_row_bytes(type, n_kv);
                        std::vector<uint8_t> kc(size_t{n_blocks} * bs * rb), vc(kc.size());
                        std::vector<int32_t> table((len + bs - 1) / bs);
                        for (size_t b = 0; b < table.size(); ++b) table[b] = int32_t((b * 5 + 2) % n_blocks);
                        std::vector<double> K, V;
                        for (uint32_t j = 0; j < len; ++j) {
                            const size_t row = (size_t(table[j / bs]) * bs + j % bs) * rb;
                            for (auto [cache, dec] : {std::pair{&kc, &K}, std::pair{&vc, &V}}) {
                                const std::vector<float> vals = rand_vec(&st, n_kv, -1, 1);
                                cpu::store_kv_row(type, vals.data(), cache->data() + row, n_kv);
                                std::vector<float> back(n_kv);
                                cpu::dequantize_row(type, cache->data() + row, back.data(), n_kv);
                                dec->insert(dec->end(), back.begin(), back.end());
                            }
                        }
                        std::vector<int32_t> pos;
                        for (uint32_t j = decode ? len - 1 : len - 9; j < len; ++j) pos.push_back(int32_t(j));
                        const uint32_t nt = uint32_t(pos.size());
                        std::vector<const int32_t *> tabs(nt, table.data());
                        const std::vector<float> q = rand_vec(&st, size_t{nt} * n_head * hd, -1, 1);
                        const std::vector<float> sinks = rand_vec(&st, n_head, -2, 4);
                        std::vector<float> y(q.size());
                        ember_mod_op op = make_op(EMBER_GRAPH_ATTENTION_EXT);
                        op.type = static_cast<uint32_t>(type), op.n_tokens = nt, op.n_head = n_head, op.n_head_kv = n_head_kv;
                        op.head_dim = hd, op.scale = 8.0f / std::sqrt(float(hd));
                        op.x = q.data(), op.ids = pos.data(), op.tables = tabs.data(), op.k_cache = kc.data(), op.v_cache = vc.data();
                        op.n_blocks = n_blocks, op.block_size = bs, op.y = y.data(), op.attn_chunk = 0;
                        const uint32_t window = mask.window, chunk = mask.chunk, temp_floor = 8;
                        const float temp = mask.temp, temp_offset = 1.0f;
                        op.window = window, op.softcap = cap ? 3.0f : 0.0f, op.sinks = sink ? sinks.data() : nullptr;
                        op.attn_local_chunk = chunk, op.attn_temp_scale = temp, op.attn_temp_offset = temp_offset;
                        op.attn_temp_floor = temp ? temp_floor : 0;
                        run(op);
                        for (uint32_t t = 0; t < nt; ++t)
                            for (uint32_t h = 0; h < n_head; ++h) {
                                const uint32_t kvo = (h / (n_head / n_head_kv)) * hd;
                                int32_t first = window && pos[t] + 1 > int32_t(window) ? pos[t] + 1 - int32_t(window) : 0;
                                if (chunk) first = pos[t] / int32_t(chunk) * int32_t(chunk);
                                const double tf = temp ? 1 + temp * std::log(std::floor((pos[t] + temp_offset) / temp_floor) + 1) : 1;
                                std::vector<double> s;
                                double m = sink ? sinks[h] : -INFINITY;
                                for (int32_t j = first; j <= pos[t]; ++j) {
                                    double d = 0;
                                    for (uint32_t i = 0; i < hd; ++i) d += double(q[(t * n_head + h) * hd + i]) * K[size_t(j) * n_kv + kvo + i];
                                    d *= op.scale * tf;
                                    if (cap) d = 3.0 * std::tanh(d / 3.0);
                                    s.push_back(d);
                                    m = std::fmax(m, d);
                                }
                                double l = sink ? std::exp(sinks[h] - m) : 0.0;
                                for (double &e : s) l += (e = std::exp(e - m));
                                for (uint32_t i = 0; i < hd; ++i) {
                                    double o = 0;
                                    for (size_t j = 0; j < s.size(); ++j) o += s[j] * V[(size_t(first) + j) * n_kv + kvo + i];
                                    char what[128];
                                    std::snprintf(what, sizeof what, "attention_ext %s window %u chunk %u temp %g softcap %d sinks %d %s t %u h %u",
                                                  dtype_name(type), window, chunk, double(temp), cap, sink, decode ? "decode" : "prefill", t, h);
                                    check(what, i, y[(t * n_head + h) * hd + i], o / l, 1e-4);
                                }
                            }
                    }
}

// --- moe -----------------------------------------------------------------------------------------------
// 7 tokens, 6 experts, 2 or 3 chosen, every activation and gating, with and without biases; F32 and F16
// experts (read exactly: the bound is the products' float rounding, 1e-4 of the output's scale) and
// Q8_0 ones (activations rounded to 8 bits per block: 2e-2). Router logits are spaced >= 0.3 apart so
// the choice is unambiguous. Gating on the input (Llama 4's): each chosen expert reads x times the sigmoid of
// its logit, the outputs summed unweighted; the CUDA module refuses it (EMBER_ERR_UNSUPPORTED), which is
// what is checked there.
void test_moe(void **) {
    uint64_t st = 53;
    const uint32_t nt = 7, n_in = 64, n_ff = 96, n_out = 64, ne = 6;
    for (DType type : {DType::F32, DType::F16, DType::Q8_0})
        for (uint32_t act : {EMBER_GRAPH_ACT_SILU, EMBER_GRAPH_ACT_GELU, EMBER_GRAPH_ACT_SWIGLU_OAI})
            for (uint32_t gating : {EMBER_GRAPH_MOE_GATE_SOFTMAX_TOPK, EMBER_GRAPH_MOE_GATE_SOFTMAX,
                                    EMBER_GRAPH_MOE_GATE_SIGMOID_INPUT})
                for (int bias = 0; bias < 2; ++bias) {
                    const uint32_t k = act == EMBER_GRAPH_ACT_GELU ? 3 : 2;
                    const std::vector<float> x = rand_vec(&st, size_t{nt} * n_in, -1, 1);
                    std::vector<float> logits(size_t{nt} * ne);
                    for (uint32_t t = 0; t < nt; ++t) {
                        std::vector<int> order(ne);
                        std::iota(order.begin(), order.end(), 0);
                        for (uint32_t i = ne - 1; i > 0; --i) std::swap(order[i], order[uint32_t(test_randf(&st, 0, 1) * (i + 1)) % (i + 1)]);
                        for (uint32_t e = 0; e < ne; ++e) logits[t * ne + order[e]] = 0.3f * float(e) + test_randf(&st, 0, 0.05f) - 1.0f;
                    }
                    // Expert matrices: values as stored (exactly representable in `type`).
                    auto experts = [&](uint32_t cols, uint32_t rows, std::vector<uint8_t> &bytes) {
                        std::vector<float> w = rand_vec(&st, size_t{ne} * rows * cols, -1.0f / std::sqrt(float(cols)), 1.0f / std::sqrt(float(cols)));
                        const size_t rb = dtype_row_bytes(type, cols);
                        bytes.assign(rb * ne * rows, 0);
                        std::vector<double> exact(w.size());
                        std::vector<float> back(cols);
                        for (size_t r = 0; r < size_t{ne} * rows; ++r) {
                            uint8_t *dst = bytes.data() + r * rb;
                            if (type == DType::F32) std::memcpy(dst, w.data() + r * cols, rb);
                            else if (type == DType::F16) cpu::store_f16(w.data() + r * cols, reinterpret_cast<uint16_t *>(dst), 1, cols);
                            else cpu::quantize_row(type, w.data() + r * cols, dst, cols);
                            cpu::dequantize_row(type, dst, back.data(), cols);
                            std::copy(back.begin(), back.end(), exact.begin() + r * cols);
                        }
                        return exact;
                    };
                    std::vector<uint8_t> gb, ub, db;
                    const std::vector<double> G = experts(n_in, n_ff, gb), Up = experts(n_in, n_ff, ub), D = experts(n_ff, n_out, db);
                    const std::vector<float> bg = rand_vec(&st, size_t{ne} * n_ff, -0.3f, 0.3f), bu = rand_vec(&st, size_t{ne} * n_ff, -0.3f, 0.3f);
                    const std::vector<float> bd = rand_vec(&st, size_t{ne} * n_out, -0.3f, 0.3f);
                    std::vector<float> y(size_t{nt} * n_out);
                    ember_mod_op op = make_op(EMBER_GRAPH_MOE);
                    op.type = op.type2 = op.type3 = static_cast<uint32_t>(type);
                    op.n_tokens = nt, op.n_in = n_in, op.n_ff = n_ff, op.n_out = n_out, op.n_expert = ne, op.n_expert_used = k;
                    op.moe_gating = gating, op.moe_act = act, op.act_alpha = 1.702f, op.act_limit = 7.0f;
                    op.w = gb.data(), op.w_bytes = gb.size(), op.w2 = ub.data(), op.w2_bytes = ub.size(), op.w3 = db.data(), op.w3_bytes = db.size();
                    op.bias = bias ? bg.data() : nullptr, op.bias2 = bias ? bu.data() : nullptr, op.bias3 = bias ? bd.data() : nullptr;
                    op.x = x.data(), op.x2 = logits.data(), op.y = y.data();
                    const bool on_input = gating == EMBER_GRAPH_MOE_GATE_SIGMOID_INPUT;
                    run(op);
                    const double bound = type == DType::Q8_0 ? 2e-2 : 1e-4;
                    for (uint32_t t = 0; t < nt; ++t) {
                        const float *l = logits.data() + t * ne;
                        std::vector<int> idx(ne);
                        std::iota(idx.begin(), idx.end(), 0);
                        std::sort(idx.begin(), idx.end(), [&](int a, int b) { return l[a] > l[b]; });
                        double sum = 0;
                        for (uint32_t e = 0; e < (gating == EMBER_GRAPH_MOE_GATE_SOFTMAX ? ne : k); ++e) sum += std::exp(double(l[idx[e]]) - l[idx[0]]);
                        std::vector<double> want(n_out, 0.0);
                        double scale = 0;
                        for (uint32_t j = 0; j < k; ++j) {
                            const int e = idx[j];
                            const double sig = 1 / (1 + std::exp(-double(l[e])));
                            const double gw = on_input ? 1.0 : std::exp(double(l[e]) - l[idx[0]]) / sum;
                            const double in_scale = on_input ? sig : 1.0;
                            std::vector<double> h(n_ff);
                            for (uint32_t f = 0; f < n_ff; ++f) {
                                double a = bias ? bg[e * n_ff + f] : 0, b = bias ? bu[e * n_ff + f] : 0;
                                for (uint32_t i = 0; i < n_in; ++i) {
                                    a += G[(size_t(e) * n_ff + f) * n_in + i] * x[t * n_in + i] * in_scale;
                                    b += Up[(size_t(e) * n_ff + f) * n_in + i] * x[t * n_in + i] * in_scale;
                                }
                                if (act == EMBER_GRAPH_ACT_SILU) h[f] = a / (1 + std::exp(-a)) * b;
                                else if (act == EMBER_GRAPH_ACT_GELU) h[f] = 0.5 * a * (1 + std::tanh(std::sqrt(2 / 3.14159265358979323846) * (a + 0.044715 * a * a * a))) * b;
                                else {
                                    const double ac = std::min(a, 7.0), bc = std::clamp(b, -7.0, 7.0);
                                    h[f] = ac / (1 + std::exp(-1.702 * ac)) * (bc + 1);
                                }
                            }
                            for (uint32_t o = 0; o < n_out; ++o) {
                                double s = bias ? bd[e * n_out + o] : 0;
                                for (uint32_t f = 0; f < n_ff; ++f) s += D[(size_t(e) * n_out + o) * n_ff + f] * h[f];
                                want[o] += gw * s;
                                scale = std::max(scale, std::fabs(s));
                            }
                        }
                        for (uint32_t o = 0; o < n_out; ++o) {
                            char what[96];
                            std::snprintf(what, sizeof what, "moe %s act %u gating %u bias %d t %u", dtype_name(type), act, gating, bias, t);
                            check(what, o, y[t * n_out + o], want[o], bound * std::max(1.0, scale));
                        }
                    }
                }
}

} // namespace

void parity_family_ops_add(std::vector<CMUnitTest> &tests) {
    tests.push_back(cmocka_unit_test(test_elementwise));
    tests.push_back(cmocka_unit_test(test_rope_yarn));
    tests.push_back(cmocka_unit_test(test_attention_ext));
    tests.push_back(cmocka_unit_test(test_moe));
}
