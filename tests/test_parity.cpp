// test_parity.cpp — every kernel of every backend against double-precision references: the parity
// harness. One op description (src/backend/module_api.h's ember_mod_op: one op of backend/graph.h on host
// arrays) is run by a backend's module table — the CPU's built-in one, or with the argument "vulkan" or
// "cuda" that module's (module_run_op) — each result held to the bound derived next to its op below.
// Every op a model's program can contain has a test here.
//
// Bounds use u = 2^-24 (float's unit roundoff) and the accuracy Vulkan allows its shader built-ins
// (the SPIR-V environment's precision table): exp within 3 + 2|x| ulp, division 2.5 ulp, sqrt as
// 1/inversesqrt (2 ulp) — looser than the CPU's, so the bounds below are the GPU's and hold for both.
// A module's run exits 77 (skipped, reason printed) without a usable device; for Vulkan ctest runs it with the
// validation layer on, and checks that the layer really reports a deliberately invalid call.
#include "test_util.h"

#include "backend/module_loader.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/fp16.hpp"
#include "cpu/kernels.hpp"  // GGUF quantizers, to make quantized test weights
#include "parity_encoder_ops.hpp"
#include "parity_family_ops.hpp"
#include "parity_hybrid_ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

using namespace ember;

namespace {

using namespace parity;

// A weight of `type`, n_out x n_in, from random floats: its file bytes and its exact values.
struct Weight {
    std::vector<uint8_t> bytes;
    std::vector<double> exact;
};
Weight make_weight(DType type, uint32_t n_in, uint32_t n_out, uint64_t *st) {
    Weight w;
    const std::vector<float> f = rand_vec(st, size_t{n_in} * n_out, -1, 1);
    const size_t rb = dtype_row_bytes(type, n_in);
    w.bytes.resize(rb * n_out);
    std::vector<float> deq(n_in);
    for (uint32_t o = 0; o < n_out; ++o) {
        uint8_t *row = w.bytes.data() + o * rb;
        const float *src = f.data() + size_t{o} * n_in;
        if (type == DType::F32) std::memcpy(row, src, rb);
        else if (type == DType::F16 || type == DType::BF16)
            for (uint32_t i = 0; i < n_in; ++i) {
                const uint16_t h = type == DType::F16 ? fp32_to_fp16(src[i]) : fp32_to_bf16(src[i]);
                std::memcpy(row + 2 * i, &h, 2);
            }
        else cpu::quantize_row(type, src, row, n_in);
        cpu::dequantize_row(type, row, deq.data(), n_in);  // exact: a half scale times a small code
        w.exact.insert(w.exact.end(), deq.begin(), deq.end());
    }
    return w;
}

bool quantized(DType t) { return t != DType::F32 && t != DType::F16 && t != DType::BF16; }

// Every weight type a model may hold, and those of them that add or subtract an offset apart from the
// scaled code (below).
constexpr DType kTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0,   DType::Q4_1,
                            DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K, DType::Q4_K,   DType::Q5_K,
                            DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4};
bool has_offset(DType t) {
    return t == DType::Q4_K || t == DType::Q5_K || t == DType::Q4_1 || t == DType::Q5_1 || t == DType::Q2_K;
}

// The offset each weight's value subtracts or adds (dmin * m of its Q4_K/Q5_K/Q2_K sub-block, Q4_1/Q5_1's
// m; 0 for other types): the integer kernels compute code and offset terms apart, so their rounding
// scales with both.
std::vector<double> weight_offsets(DType type, const Weight &w, uint32_t n_in, uint32_t n_out) {
    std::vector<double> off(size_t{n_in} * n_out, 0.0);
    auto half = [](const uint8_t *p) {
        uint16_t h;
        std::memcpy(&h, p, 2);
        return static_cast<double>(fp16_to_fp32(h));
    };
    if (type == DType::Q4_1 || type == DType::Q5_1) {  // d, then m
        const size_t block = type == DType::Q4_1 ? sizeof(BlockQ4_1) : sizeof(BlockQ5_1);
        for (size_t b = 0; b < off.size() / 32; ++b)
            for (int l = 0; l < 32; ++l) off[b * 32 + l] = std::fabs(half(w.bytes.data() + b * block + 2));
        return off;
    }
    if (type == DType::Q2_K) {  // 16 scale/min bytes (min in the high nibble), the codes, d, dmin
        for (size_t s = 0; s < off.size() / QK_K; ++s) {
            const uint8_t *b = w.bytes.data() + s * sizeof(BlockQ2_K);
            for (int i = 0; i < QK_K; ++i) off[s * QK_K + i] = std::fabs(half(b + 82)) * (b[i / 16] >> 4);
        }
        return off;
    }
    if (type != DType::Q4_K && type != DType::Q5_K) return off;
    const size_t block = type == DType::Q4_K ? sizeof(BlockQ4_K) : sizeof(BlockQ5_K);
    for (size_t s = 0; s < off.size() / QK_K; ++s) {
        const uint8_t *b = w.bytes.data() + s * block;
        uint16_t dmin_h;
        std::memcpy(&dmin_h, b + 2, 2);
        const uint8_t *sc = b + 4;  // d, dmin, then the 12 scale bytes (core/dtype.hpp)
        for (int j = 0; j < 8; ++j) {
            const int m = j < 4 ? sc[j + 4] & 63 : (sc[j + 4] >> 4) | (sc[j] >> 6) << 4;
            for (int l = 0; l < 32; ++l) off[s * QK_K + 32 * j + l] = fp16_to_fp32(dmin_h) * m;
        }
    }
    return off;
}

// --- matmul ------------------------------------------------------------------------------------------
// Bound per output: the float sum of n_in products (F32/F16) or of nb block terms (quantized) plus the
// bias, summed in any order: gamma_k (sum |w x| + |b|) with k = n_in + 8 (resp. nb + 8 for the block
// terms, each an exact integer sum times a product of two scales: 2 more roundings). Quantized types
// also quantize the activations to 8 bits per block (d_b = max_b |x| / 127; Q4_K: per super-block of 256
// on the CPU, QuantActsK): each x_i off by at most
// (0.5 + 1e-4) d_b, so qerr = sum_b (0.5 + 1e-4) d_b sum_{i in b} |w_i|, and the products' magnitudes
// grow accordingly (mag uses |x_i| + that). Q4_K/Q5_K/Q2_K subtract a per-sub-block offset off_i from
// each weight, Q4_1/Q5_1 add one per block, computed as a separate float term: their terms' magnitude is |w_i| + 2 off_i, and
// the reference's weights (the CPU's dequantized floats) are themselves one rounding from exact:
// one more u of that magnitude (k + 1).
void test_matmul(void **) {
    uint64_t st = 7;
    for (DType type : kTypes)
        for (uint32_t n_in : {32u, 64u, 256u, 288u, 768u})
            for (uint32_t n_out : {1u, 7u, 130u})
                for (uint32_t nt : {1u, 3u, 9u}) {
                    if (n_in % dtype_info(type).block_size != 0) continue;
                    const Weight w = make_weight(type, n_in, n_out, &st);
                    const std::vector<double> off = weight_offsets(type, w, n_in, n_out);
                    const std::vector<float> x = rand_vec(&st, size_t{nt} * n_in, -2, 2);
                    const std::vector<float> bias = rand_vec(&st, n_out, -1, 1);
                    const bool with_bias = (n_out + nt) % 2 == 0;
                    std::vector<float> y(size_t{nt} * n_out);
                    ember_mod_op op = make_op(EMBER_MOD_OP_MATMUL);
                    op.type = static_cast<uint32_t>(type), op.n_in = n_in, op.n_out = n_out, op.n_tokens = nt;
                    op.w = w.bytes.data(), op.w_bytes = w.bytes.size(), op.x = x.data(), op.y = y.data();
                    op.bias = with_bias ? bias.data() : nullptr;
                    run(op);
                    const uint32_t nb = n_in / 32;
                    // The CPU quantizes Q4_K's activations per 256 (one scale per super-block), the others
                    // per 32; a backend that quantizes finer, or not at all, is inside the same bound.
                    const uint32_t span = type == DType::Q4_K ? 256 : 32;
                    for (uint32_t t = 0; t < nt; ++t)
                        for (uint32_t o = 0; o < n_out; ++o) {
                            double s = 0, mag = 0, qerr = 0;
                            for (uint32_t b = 0; b < nb; ++b) {
                                double amax = 0;
                                const uint32_t b0 = b * 32 / span * span;
                                for (uint32_t j = 0; j < span; ++j) amax = std::fmax(amax, std::fabs(x[t * n_in + b0 + j]));
                                const double xe = quantized(type) ? (0.5 + 1e-4) * amax / 127 : 0.0;
                                for (uint32_t i = b * 32; i < b * 32 + 32; ++i) {
                                    const double wi = w.exact[size_t{o} * n_in + i];
                                    s += wi * x[t * n_in + i];
                                    mag += (std::fabs(wi) + 2 * off[size_t{o} * n_in + i]) * (std::fabs(x[t * n_in + i]) + xe);
                                    qerr += std::fabs(wi) * xe;
                                }
                            }
                            const double b = with_bias ? bias[o] : 0.0;
                            const double k = has_offset(type) ? 2 * nb + 9 : quantized(type) ? nb + 9 : n_in + 8;
                            const double bound = qerr + k * kU * (mag + std::fabs(b)) * 1.01;
                            char what[64];
                            std::snprintf(what, sizeof what, "matmul %s %ux%u nt %u", dtype_name(type), n_out, n_in, nt);
                            check(what, t * n_out + o, y[t * n_out + o], s + b, bound);
                        }
                }
}

// The block formats CUDA multiplies against f32 activations (no activation quantization: all but
// Q8_0/Q4_0/Q4_K/Q6_K, which go to the tensor cores against quantized activations, test_matmul's bound),
// so the bound is the F32/F16 one, gamma_{n_in + 8} (sum |w x| + |b|): each weight is the CPU's
// dequantized value exactly (one rounding, as cpu::dequantize_row), then float products and sums in any
// order.
void test_matmul_kquants(void **) {
    uint64_t st = 29;
    for (DType type : {DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K, DType::Q5_K, DType::IQ4_NL,
                       DType::IQ4_XS, DType::MXFP4})
        for (uint32_t n_in : {256u, 512u})
            for (uint32_t n_out : {1u, 7u, 130u})
                for (uint32_t nt : {1u, 3u, 9u}) {
                    const Weight w = make_weight(type, n_in, n_out, &st);
                    const std::vector<float> x = rand_vec(&st, size_t{nt} * n_in, -2, 2);
                    const std::vector<float> bias = rand_vec(&st, n_out, -1, 1);
                    std::vector<float> y(size_t{nt} * n_out);
                    ember_mod_op op = make_op(EMBER_MOD_OP_MATMUL);
                    op.type = static_cast<uint32_t>(type), op.n_in = n_in, op.n_out = n_out, op.n_tokens = nt;
                    op.w = w.bytes.data(), op.w_bytes = w.bytes.size(), op.x = x.data(), op.y = y.data();
                    op.bias = bias.data();
                    run(op);
                    for (uint32_t t = 0; t < nt; ++t)
                        for (uint32_t o = 0; o < n_out; ++o) {
                            double s = 0, mag = 0;
                            for (uint32_t i = 0; i < n_in; ++i) {
                                const double wi = w.exact[size_t{o} * n_in + i];
                                s += wi * x[t * n_in + i];
                                mag += std::fabs(wi * x[t * n_in + i]);
                            }
                            const double bound = (n_in + 8) * kU * (mag + std::fabs(bias[o])) * 1.01;
                            char what[64];
                            std::snprintf(what, sizeof what, "matmul %s %ux%u nt %u", dtype_name(type), n_out, n_in, nt);
                            check(what, t * n_out + o, y[t * n_out + o], s + bias[o], bound);
                        }
                }
}

// Batch invariance of the products (the CPU's and CUDA's promise; Vulkan makes none yet): a token's
// outputs are the same bits in a pass of 70 tokens (CUDA: the tensor cores' tiled kernel for the types it
// takes, passes of 32 for the rest), of 5 and of 1 (the split kernel, passes of 1..8). With test_matmul's
// bound on the small passes this checks the large ones too.
void test_matmul_batch_invariant(void **) {
    uint64_t st = 41;
    for (DType type : kTypes)
        for (uint32_t n_in : {256u, 768u}) {
            const uint32_t n_out = 130, nt = 70;
            const Weight w = make_weight(type, n_in, n_out, &st);
            const std::vector<float> x = rand_vec(&st, size_t{nt} * n_in, -2, 2), bias = rand_vec(&st, n_out, -1, 1);
            auto product = [&](uint32_t t0, uint32_t n) {
                std::vector<float> y(size_t{n} * n_out);
                ember_mod_op op = make_op(EMBER_MOD_OP_MATMUL);
                op.type = static_cast<uint32_t>(type), op.n_in = n_in, op.n_out = n_out, op.n_tokens = n;
                op.w = w.bytes.data(), op.w_bytes = w.bytes.size(), op.x = x.data() + size_t{t0} * n_in, op.y = y.data();
                op.bias = bias.data();
                run(op);
                return y;
            };
            const std::vector<float> all = product(0, nt);
            for (const uint32_t t0 : {0u, 30u, 62u, 65u})
                for (const uint32_t n : {1u, 5u}) {
                    const std::vector<float> part = product(t0, n);
                    if (std::memcmp(part.data(), all.data() + size_t{t0} * n_out, part.size() * sizeof(float)) != 0)
                        fail_msg("matmul %s %ux%u: tokens %u..%u in a pass of %u differ from the pass of %u", dtype_name(type),
                                 n_out, n_in, t0, t0 + n - 1, n, nt);
                }
        }
}

// --- get_rows ----------------------------------------------------------------------------------------
// A dequantized value is one float product of a scale and a code (exact), or for the types with an
// offset exact products and one rounding in the offset's subtraction; F32/F16/BF16 are copies: bound
// u |value|.
void test_get_rows(void **) {
    uint64_t st = 11;
    for (DType type : kTypes) {
        const uint32_t n_in = dtype_info(type).block_size == QK_K ? 512 : 96, n_out = 50, nt = 6;
        const Weight w = make_weight(type, n_in, n_out, &st);
        const int32_t ids[nt] = {0, 49, 7, 7, 23, 1};
        std::vector<float> y(size_t{nt} * n_in);
        ember_mod_op op = make_op(EMBER_MOD_OP_GET_ROWS);
        op.type = static_cast<uint32_t>(type), op.n_in = n_in, op.n_out = n_out, op.n_tokens = nt;
        op.w = w.bytes.data(), op.w_bytes = w.bytes.size(), op.ids = ids, op.y = y.data();
        run(op);
        for (uint32_t t = 0; t < nt; ++t)
            for (uint32_t i = 0; i < n_in; ++i) {
                const double want = w.exact[static_cast<size_t>(ids[t]) * n_in + i];
                check(dtype_name(type), t * n_in + i, y[t * n_in + i], want, kU * std::fabs(want));
            }
    }
}

// --- rmsnorm -----------------------------------------------------------------------------------------
// scale = 1 / sqrt(mean(x^2) + eps): the sum of squares (dim terms, any order) is within gamma_dim
// relative, the division by dim and the eps add 2u, sqrt and the reciprocal (or inversesqrt) 2.5 + 2
// ulp; the square root halves the sum's relative error. Then x * scale * w: 2u. So relative error
// <= (dim / 2 + 12) u on every output.
void test_rmsnorm(void **) {
    uint64_t st = 13;
    for (uint32_t dim : {64u, 288u, 1000u})
        for (uint32_t nt : {1u, 5u}) {
          for (int weighted = 0; weighted < 2; ++weighted) {  // a norm without a weight: the program's option
            const std::vector<float> x = rand_vec(&st, size_t{nt} * dim, -3, 3),
                                     w = weighted ? rand_vec(&st, dim, -2, 2) : std::vector<float>(dim, 1.0f);
            std::vector<float> y(x.size());
            ember_mod_op op = make_op(EMBER_MOD_OP_RMSNORM);
            op.n_in = dim, op.n_tokens = nt, op.eps = 1e-5f, op.x = x.data(), op.norm = weighted ? w.data() : nullptr;
            op.y = y.data();
            run(op);
            for (uint32_t t = 0; t < nt; ++t) {
                double ss = 0;
                for (uint32_t i = 0; i < dim; ++i) ss += double(x[t * dim + i]) * x[t * dim + i];
                const double scale = 1.0 / std::sqrt(ss / dim + double(1e-5f));
                for (uint32_t i = 0; i < dim; ++i) {
                    const double want = x[t * dim + i] * scale * w[i];
                    check(weighted ? "rmsnorm" : "rmsnorm (no weight)", t * dim + i, y[t * dim + i], want,
                          (dim / 2.0 + 12) * kU * std::fabs(want));
                }
            }
          }
        }
}

// --- rope --------------------------------------------------------------------------------------------
// The angle and its cos/sin are formed in double and rounded to float (u each, relative to 1); then
// x0 c - x1 s: two products and a sum, 3u of |x0| + |x1|. Bound: 4u (|x0| + |x1|) (+1% slack).
void test_rope(void **) {
    uint64_t st = 17;
    for (int neox = 0; neox < 2; ++neox)
        for (int factors = 0; factors < 2; ++factors) {
            const uint32_t n_head = 3, hd = 16, n_rot = neox ? 12 : 16, nt = 4;
            const int32_t pos[nt] = {0, 1, 37, 1000};
            const std::vector<float> x = rand_vec(&st, size_t{nt} * n_head * hd, -2, 2);
            const std::vector<float> ff = rand_vec(&st, n_rot / 2, 1, 8);
            std::vector<float> y(x.size());
            ember_mod_op op = make_op(EMBER_MOD_OP_ROPE);
            op.n_tokens = nt, op.n_head = n_head, op.head_dim = hd, op.n_rot = n_rot, op.rope_mode = neox ? EMBER_GRAPH_ROPE_NEOX : EMBER_GRAPH_ROPE_NORMAL;
            op.rope_theta = 10000.0f, op.rope_freq_scale = 0.5f, op.norm = factors ? ff.data() : nullptr;
            op.ids = pos, op.x = x.data(), op.y = y.data();
            run(op);
            for (uint32_t t = 0; t < nt; ++t)
                for (uint32_t h = 0; h < n_head; ++h) {
                    const float *v = x.data() + (t * n_head + h) * hd;
                    const float *g = y.data() + (t * n_head + h) * hd;
                    std::vector<double> want(v, v + hd);
                    for (uint32_t i = 0; i < n_rot / 2; ++i) {
                        double f = 0.5 * std::pow(10000.0, -2.0 * i / n_rot);
                        if (factors) f /= ff[i];
                        const double a = pos[t] * f;
                        const uint32_t i0 = neox ? i : 2 * i, i1 = neox ? i + n_rot / 2 : 2 * i + 1;
                        want[i0] = v[i0] * std::cos(a) - v[i1] * std::sin(a);
                        want[i1] = v[i0] * std::sin(a) + v[i1] * std::cos(a);
                    }
                    for (uint32_t i = 0; i < hd; ++i) {
                        const uint32_t pair = i < n_rot ? (neox ? (i < n_rot / 2 ? i + n_rot / 2 : i - n_rot / 2) : (i ^ 1u)) : i;
                        const double bound = 4.04 * kU * (std::fabs(v[i]) + (pair != i ? std::fabs(v[pair]) : 0.0));
                        check(neox ? "rope neox" : "rope", (t * n_head + h) * hd + i, g[i], want[i], bound);
                    }
                }
        }
}

// --- swiglu ------------------------------------------------------------------------------------------
// silu(g) u = g / (1 + e^-g) u: e^-g within (3 + 2|g|) ulp, 1 + e^-g adds u (its relative error can
// only shrink), the division 2.5 ulp, the product u: relative error <= (8 + 2|g|) u.
void test_swiglu(void **) {
    uint64_t st = 19;
    const uint32_t n = 4000;
    const std::vector<float> g = rand_vec(&st, n, -10, 10), u = rand_vec(&st, n, -3, 3);
    std::vector<float> y(n);
    ember_mod_op op = make_op(EMBER_MOD_OP_SWIGLU);
    op.n_in = n, op.x = g.data(), op.x2 = u.data(), op.y = y.data();
    run(op);
    for (uint32_t i = 0; i < n; ++i) {
        const double want = g[i] / (1.0 + std::exp(-double(g[i]))) * u[i];
        check("swiglu", i, y[i], want, (8 + 2 * std::fabs(g[i])) * kU * std::fabs(want) * 1.01);
    }
}


// --- add, gather_logits -----------------------------------------------------------------------------
// One float addition is correctly rounded: within u of the exact sum. A gather copies: exact.
void test_add(void **) {
    uint64_t st = 29;
    const uint32_t n = 3000;
    const std::vector<float> a = rand_vec(&st, n, -100, 100), b = rand_vec(&st, n, -1, 1);
    std::vector<float> y(n);
    ember_mod_op op = make_op(EMBER_GRAPH_ADD);
    op.n_in = n, op.x = a.data(), op.x2 = b.data(), op.y = y.data();
    run(op);
    for (uint32_t i = 0; i < n; ++i) {
        const double want = double(a[i]) + double(b[i]);
        check("add", i, y[i], want, 1.01 * kU * std::fabs(want));
    }
}

void test_gather_logits(void **) {
    uint64_t st = 31;
    const uint32_t width = 96, n_rows = 9;
    const std::vector<float> x = rand_vec(&st, size_t{n_rows} * width, -5, 5);
    const int32_t ids[4] = {8, 0, 3, 8};
    std::vector<float> y(4 * width, -1.0f);
    ember_mod_op op = make_op(EMBER_GRAPH_GATHER_LOGITS);
    op.n_in = width, op.n_tokens = 4, op.ids = ids, op.x = x.data(), op.y = y.data();
    run(op);
    for (uint32_t r = 0; r < 4; ++r)
        for (uint32_t i = 0; i < width; ++i) check("gather_logits", r * width + i, y[r * width + i], x[ids[r] * width + i], 0.0);
}

// --- kv_store ----------------------------------------------------------------------------------------
// Rows land at their token's slot (block table[pos / block_size], row pos % block_size) and nowhere else.
// F16: the value rounded to nearest, exactly as fp32_to_fp16 does. Q8_0 (per block of 32: d = amax / 127
// as f16, codes round(x / d)): within half a step, d / 2, plus the clamp where d rounded down (amax -
// 127 d <= amax 2^-11): bound 0.51 amax / 127. Q4_0 (per block: d = max / -8 as f16, max the element of
// largest magnitude with its sign; codes clamp(round(x / d + 8), 0, 15)): within d / 2, except an element
// of max's magnitude and the other sign, whose code 16 clamps to 15: off by |d| <= amax (1 + 2^-11) / 8,
// plus amax 2^-11 where d rounded down: bound 1.01 amax / 8.
void test_kv_store(void **) {
    uint64_t st = 37;
    for (DType type : {DType::F16, DType::Q8_0, DType::Q4_0}) {
        const uint32_t width = 64, bs = 4, n_blocks = 6, nt = 5;
        const size_t rb = dtype_row_bytes(type, width), cache = size_t{n_blocks} * bs * rb;
        const int32_t table_a[2] = {5, 2}, table_b[2] = {0, 3};
        const int32_t *tables[nt] = {table_a, table_a, table_b, table_b, table_b};
        const int32_t pos[nt] = {0, 5, 1, 2, 7};
        const std::vector<float> k = rand_vec(&st, size_t{nt} * width, -4, 4), v = rand_vec(&st, size_t{nt} * width, -1, 1);
        std::vector<uint8_t> kc(cache, 0), vc(cache, 0);
        ember_mod_op op = make_op(EMBER_GRAPH_KV_STORE);
        op.type = static_cast<uint32_t>(type), op.n_in = width, op.n_tokens = nt, op.ids = pos, op.tables = tables;
        op.block_size = bs, op.n_blocks = n_blocks, op.x = k.data(), op.x2 = v.data(), op.k_out = kc.data(), op.v_out = vc.data();
        run(op);
        std::vector<bool> written(size_t{n_blocks} * bs, false);
        for (uint32_t t = 0; t < nt; ++t) {
            const size_t slot = size_t(tables[t][pos[t] / bs]) * bs + pos[t] % bs;
            written[slot] = true;
            for (int kv = 0; kv < 2; ++kv) {
                const float *src = (kv ? v : k).data() + size_t{t} * width;
                const uint8_t *row = (kv ? vc : kc).data() + slot * rb;
                // A quantized row is the CPU quantizer's bytes on every backend (saved states move
                // between them, and they read the same K/V values).
                if (type != DType::F16) {
                    std::vector<uint8_t> want(rb);
                    cpu::store_kv_row(type, src, want.data(), width);
                    for (size_t b = 0; b < rb; ++b)
                        if (row[b] != want[b])
                            fail_msg("%s kv_store %s token %u %c byte %zu: 0x%02x, the CPU's 0x%02x", target().name,
                                     dtype_name(type), t, kv ? 'v' : 'k', b, row[b], want[b]);
                }
                for (uint32_t i = 0; i < width; ++i) {
                    double got, bound = 0.0;
                    if (type == DType::F16) {
                        uint16_t h;
                        std::memcpy(&h, row + 2 * i, 2);
                        got = fp16_to_fp32(h);
                        const double want = fp16_to_fp32(fp32_to_fp16(src[i]));
                        check("kv_store f16", t * width + i, got, want, 0.0);
                        continue;
                    }
                    const bool q4 = type == DType::Q4_0;
                    const uint8_t *blk = row + (i / 32) * (q4 ? 18 : 34);
                    uint16_t dh;
                    std::memcpy(&dh, blk, 2);
                    const int code = q4 ? ((blk[2 + i % 16] >> (i % 32 >= 16 ? 4 : 0)) & 15) - 8
                                        : static_cast<int8_t>(blk[2 + i % 32]);
                    got = fp16_to_fp32(dh) * code;
                    double amax = 0;
                    for (uint32_t j = i / 32 * 32; j < i / 32 * 32 + 32; ++j) amax = std::max(amax, std::fabs(double(src[j])));
                    bound = q4 ? 1.01 * amax / 8 : 0.51 * amax / 127;
                    check(q4 ? "kv_store q4_0" : "kv_store q8_0", t * width + i, got, src[i], bound);
                }
            }
        }
        for (size_t slot = 0; slot < written.size(); ++slot)
            if (!written[slot])
                for (size_t b = 0; b < rb; ++b)
                    if (kc[slot * rb + b] || vc[slot * rb + b]) fail_msg("%s kv_store wrote slot %zu, no token's", target().name, slot);
    }
}

// --- attention ---------------------------------------------------------------------------------------
// Run whole and split-K (keys in chunks of 64 or 100 positions, partial results merged: the CPU ignores
// the chunk, the Vulkan module's decode path uses it).
// Against full softmax attention in double over the cache's values as stored (F16, Q8_0 or Q4_0, decoded
// exactly), so only the kernel's own rounding counts. Bound 1e-4 absolute: the output is a convex
// combination of V rows (|v| <= 1); score rounding (~hd u |q||k| scale ~ 1e-6) and exp (within
// (3 + 2|s|) ulp, |s| <= 16 here) move the weights by a few 1e-6 relative, far inside 1e-4, while a row
// read from the wrong block, a wrong head or a lost tile is off by ~1e-1.
void test_attention(void **) {
    uint64_t st = 23;
    for (DType type : {DType::F16, DType::Q8_0, DType::Q4_0})
        for (uint32_t bs : {16u, 7u})
            for (int prefill = 0; prefill < 3; ++prefill)  // decode; prefill of both; prefill of one
              for (uint32_t chunk : {UINT32_MAX, 64u, 100u}) {  // no split, split-K in tiles and across them
                const uint32_t n_head = 4, n_head_kv = 2, hd = 64, n_kv = n_head_kv * hd, n_blocks = 64;
                const size_t rb = dtype_row_bytes(type, n_kv);
                std::vector<uint8_t> kc(size_t{n_blocks} * bs * rb), vc(kc.size());
                // Two sequences of 150 and 40 positions on shuffled blocks.
                const uint32_t len[2] = {150, 40};
                std::vector<int32_t> perm(n_blocks);
                for (uint32_t i = 0; i < n_blocks; ++i) perm[i] = int32_t(i);
                for (uint32_t i = n_blocks - 1; i > 0; --i) std::swap(perm[i], perm[uint32_t(test_randf(&st, 0, 1) * (i + 1)) % (i + 1)]);
                std::vector<int32_t> table[2];
                std::vector<std::vector<double>> kd(2), vd(2);
                size_t next = 0;
                for (int s = 0; s < 2; ++s) {
                    for (uint32_t b = 0; b < (len[s] + bs - 1) / bs; ++b) table[s].push_back(perm[next++]);
                    for (uint32_t j = 0; j < len[s]; ++j) {
                        const size_t row = (size_t(table[s][j / bs]) * bs + j % bs) * rb;
                        for (auto [cache, dec] : {std::pair{&kc, &kd[s]}, std::pair{&vc, &vd[s]}}) {
                            const std::vector<float> vals = rand_vec(&st, n_kv, -1, 1);
                            cpu::store_kv_row(type, vals.data(), cache->data() + row, n_kv);
                            std::vector<float> back(n_kv);
                            cpu::dequantize_row(type, cache->data() + row, back.data(), n_kv);
                            dec->insert(dec->end(), back.begin(), back.end());
                        }
                    }
                }
                // Decode: the last position of each sequence; prefill: the last 20 of the first and
                // the last 5 of the second, causally; then the first's 20 alone (one block table for
                // the whole batch: the CUDA module's tiled kernel then shares K/V tiles between tokens).
                std::vector<int32_t> pos, which;
                for (int s = 0; s < 2; ++s) {
                    const uint32_t nq = prefill == 1 ? (s == 0 ? 20 : 5) : prefill == 2 ? (s == 0 ? 20 : 0) : 1;
                    for (uint32_t j = len[s] - nq; j < len[s]; ++j) pos.push_back(int32_t(j)), which.push_back(s);
                }
                const uint32_t nt = uint32_t(pos.size());
                std::vector<const int32_t *> tabs(nt);
                for (uint32_t t = 0; t < nt; ++t) tabs[t] = table[which[t]].data();
                const std::vector<float> q = rand_vec(&st, size_t{nt} * n_head * hd, -1, 1);
                std::vector<float> y(q.size());
                ember_mod_op op = make_op(EMBER_MOD_OP_ATTENTION);
                op.type = static_cast<uint32_t>(type), op.n_tokens = nt, op.n_head = n_head, op.n_head_kv = n_head_kv;
                op.head_dim = hd, op.scale = 16.0f / std::sqrt(float(hd));  // sharp: the maximum moves between tiles
                op.x = q.data(), op.ids = pos.data(), op.tables = tabs.data(), op.k_cache = kc.data(), op.v_cache = vc.data();
                op.n_blocks = n_blocks, op.block_size = bs, op.y = y.data(), op.attn_chunk = chunk;
                run(op);
                for (uint32_t t = 0; t < nt; ++t)
                    for (uint32_t h = 0; h < n_head; ++h) {
                        const uint32_t kvo = (h / (n_head / n_head_kv)) * hd;
                        const std::vector<double> &K = kd[which[t]], &V = vd[which[t]];
                        std::vector<double> s(size_t(pos[t]) + 1);
                        double m = -INFINITY;
                        for (int32_t j = 0; j <= pos[t]; ++j) {
                            double d = 0;
                            for (uint32_t i = 0; i < hd; ++i) d += double(q[(t * n_head + h) * hd + i]) * K[size_t(j) * n_kv + kvo + i];
                            s[j] = d * op.scale;
                            m = std::fmax(m, s[j]);
                        }
                        double l = 0;
                        for (double &e : s) l += (e = std::exp(e - m));
                        for (uint32_t i = 0; i < hd; ++i) {
                            double o = 0;
                            for (int32_t j = 0; j <= pos[t]; ++j) o += s[j] * V[size_t(j) * n_kv + kvo + i];
                            char what[80];
                            std::snprintf(what, sizeof what, "attention %s bs %u %s chunk %d t %u h %u", dtype_name(type),
                                          bs, prefill ? "prefill" : "decode", (int)chunk, t, h);
                            check(what, i, y[(t * n_head + h) * hd + i], o / l, 1e-4);
                        }
                    }
            }
}

// The validation layer is on (ctest sets EMBER_VULKAN_VALIDATION=1) and its messages fail calls: a
// deliberately invalid call must come back as EMBER_ERR_BACKEND naming the rule it broke.
void test_validation_trap(void **) {
    ember_mod_op op = make_op(EMBER_MOD_OP_VALIDATION_PROBE);
    try {
        target().run(op);
        fail_msg("the invalid call was not reported");
    } catch (const Error &e) {
        std::printf("probe: %.160s\n", e.what());
        assert_int_equal(e.status(), EMBER_ERR_BACKEND);
        assert_non_null(std::strstr(e.what(), "VUID"));
    }
}

} // namespace

int main(int argc, char **argv) {
    // "vulkan" or "cuda": that module's kernels (through run_op); no argument: the CPU's built-in table,
    // through the same adapter.
    const char *module = argc > 1 ? argv[1] : nullptr;
    const bool vulkan = module && std::strcmp(module, "vulkan") == 0;
    static const LoadedModule cpu{ember_cpu_backend_module(), "built in"};
    std::unique_ptr<Backend> backend;
    if (module) {
        std::string why;
        const LoadedModule *mod = backend_module_load(module, &why);
        if (mod) {
            backend = module_backend_create(*mod);
            if (backend->score() <= 0) why = module_unavailable_reason(*backend);
        }
        if (!mod || backend->score() <= 0) {
            std::printf("SKIP: no %s backend: %s\n", module, why.c_str());
            return EMBER_TEST_SKIP;
        }
        target().name = module;
    } else {
        backend = module_backend_create(cpu);
    }
    target().run = [b = backend.get()](const ember_mod_op &op) { module_run_op(*b, op); };
    std::vector<CMUnitTest> tests = {
        cmocka_unit_test(test_matmul), cmocka_unit_test(test_get_rows), cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_rope),   cmocka_unit_test(test_swiglu),   cmocka_unit_test(test_attention),
        cmocka_unit_test(test_add),    cmocka_unit_test(test_gather_logits), cmocka_unit_test(test_kv_store),
    };
    parity_family_ops_add(tests);  // the model families' ops (parity_family_ops.cpp)
    parity_hybrid_ops_add(tests);  // the hybrid families' ops (parity_hybrid_ops.cpp)
    // The encoders' ops (parity_encoder_ops.cpp), on the backends whose run_op takes them (not Vulkan's yet).
    if (!vulkan) parity_encoder_ops_add(tests);
    if (vulkan && std::getenv("EMBER_VULKAN_VALIDATION")) tests.push_back(cmocka_unit_test(test_validation_trap));
    if (module && std::strcmp(module, "cuda") == 0) tests.push_back(cmocka_unit_test(test_matmul_kquants));
    // cuBLASLt's f16 tiles (EMBER_CUDA_CUBLASLT=1, opt-in) make no such promise either.
    const char *lt = std::getenv("EMBER_CUDA_CUBLASLT");
    if (!vulkan && !(lt && lt[0] == '1')) tests.push_back(cmocka_unit_test(test_matmul_batch_invariant));
    const std::string group = std::string("parity_") + (module ? module : "cpu");
    return _cmocka_run_group_tests(group.c_str(), tests.data(), tests.size(), nullptr, nullptr);
}
