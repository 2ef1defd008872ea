// test_cuda_host.cpp — the CUDA backend's arithmetic that needs no GPU (cuda/attn_math.hpp), on the CPU:
// split-K key ranges cover every key exactly once, in order; partial softmax results combine to the
// plain softmax whatever the split and whichever splits are empty; the Q8_0 cache offsets and paged
// row lookup match the CPU backend's layout (the kernels include the same header); a forward pass's
// device inputs (cuda/inputs.cpp), the device weight layouts (cuda/weights.cpp) and the kernels' element
// decoder (cuda/quant_math.hpp) for every weight type, all plain C++ compiled into this test. For the
// model families' ops: the combine with a sliding window's keys and a sink, YaRN's rope frequencies
// (backend/rope_math.hpp) against the CPU's rope, and MOE's routing (cuda/moe_route.cpp) against the CPU's.
// For the hybrid families: a pass's state runs (cuda/inputs.cpp) and their checks, and SSM_CONV's two
// kernels' loops (cuda/recurrent_math.hpp's window indices, in place too) against the CPU's convolution.
#include "test_util.h"

#include "../cuda/attn_math.hpp"
#include "../cuda/inputs.hpp"
#include "../cuda/moe_route.hpp"
#include "../cuda/quant_math.hpp"
#include "../cuda/recurrent_math.hpp"
#include "backend/rope_math.hpp"
#include "../cuda/weights.hpp"
#include "core/error.hpp"
#include "core/dtype.hpp"
#include "core/fp16.hpp"
#include "cpu/kernels.hpp"
#include "cpu/recurrent.hpp"
#include "cpu/threadpool.hpp"

#include <cmath>
#include <cstring>
#include <vector>

using namespace ember;

namespace {

// Splits are fixed ranges of absolute positions (split_keys each): over the keys [first, n_keys) they
// cover every key once, in order, within their own range; aligned (the tiled kernel) they start on the
// absolute 32-key grid. A tile's range (its tokens' earliest first key, latest end) holds each of its
// tokens' ranges, on the same grid: what makes a token's result independent of the batch.
void test_split_ranges(void **) {
    for (int32_t n_keys : {1, 2, 31, 32, 33, 100, 150, 1000, 4096, 4097})
        for (int32_t first : {0, 1, 31, 40, 99})
            for (int32_t sk : {32, 64, 96, 256})
                for (int align = 0; align < 2; ++align) {
                    if (first >= n_keys) continue;
                    const int32_t n_splits = cu::splits_for(n_keys, sk);
                    assert_int_equal(n_splits, (n_keys + sk - 1) / sk);
                    int32_t next = align ? first / 32 * 32 : first;
                    for (int32_t i = 0; i < n_splits; ++i) {
                        const cu::KeyRange r = cu::split_keys_range(first, n_keys, sk, i, align != 0);
                        if (r.begin >= r.end) continue;
                        assert_int_equal(r.begin, next);
                        assert_true(r.begin >= i * sk && r.end <= (i + 1) * sk);
                        if (align) assert_int_equal(r.begin % 32, 0);
                        const cu::KeyRange t = cu::split_keys_range(0, n_keys + 70, sk, i, align != 0);  // a tile's
                        assert_true(t.begin <= r.begin && t.end >= r.end);
                        if (align) assert_int_equal((r.begin - t.begin) % 32, 0);
                        next = r.end;
                    }
                    assert_int_equal(next, n_keys);
                }
    assert_int_equal(cu::splits_for(4096, cu::kAttnSplitKeys), 64);
    assert_int_equal(cu::splits_for(0, 256), 1);
}

// Partials computed the way the kernel does (online softmax over each range), combined, against a
// plain softmax in double; also over a window's keys [first, n_keys) (ATTENTION_EXT) and with a sink
// logit in the normaliser.
void test_combine(void **) {
    uint64_t st = 5;
    const int hd = 24;
    for (int32_t n_keys : {1, 5, 40, 333})
        for (int32_t split_keys : {1000000, 256, 64, 32})
        for (int32_t window : {0, 3, 37})
        for (int has_sink = 0; has_sink < 2; ++has_sink) {
            const int32_t first = cu::window_first(n_keys - 1, window);
            assert_int_equal(first, window > 0 && n_keys > window ? n_keys - window : 0);
            const float sink = test_randf(&st, -4, 8);
            std::vector<float> s(n_keys), v(size_t(n_keys) * hd);
            for (float &x : s) x = test_randf(&st, -12, 12);
            for (float &x : v) x = test_randf(&st, -1, 1);
            const int stride = hd + 2;
            const int32_t n_splits = cu::splits_for(n_keys, split_keys);
            std::vector<float> part(size_t(n_splits) * stride);
            int32_t next = first;  // the splits cover the window's keys once, in order
            for (int32_t i = 0; i < n_splits; ++i) {
                const cu::KeyRange r = cu::split_keys_range(first, n_keys, split_keys, i, false);
                if (r.begin < r.end) assert_int_equal(r.begin, next), next = r.end;
                float m = -INFINITY, l = 0, *acc = &part[size_t(i) * stride + 2];
                for (int d = 0; d < hd; ++d) acc[d] = 0;
                for (int32_t j = r.begin; j < r.end; ++j) {
                    const float mn = std::fmax(m, s[j]), corr = std::exp(m - mn), w = std::exp(s[j] - mn);
                    l = l * corr + w;
                    for (int d = 0; d < hd; ++d) acc[d] = acc[d] * corr + w * v[size_t(j) * hd + d];
                    m = mn;
                }
                part[size_t(i) * stride] = m, part[size_t(i) * stride + 1] = l;
            }
            assert_int_equal(next, n_keys);
            std::vector<float> out(hd);
            assert_true(cu::combine_partials(part.data(), n_splits, stride, hd, out.data(), [](float x) { return std::exp(x); },
                                             0, 1, has_sink ? &sink : nullptr));
            double mx = has_sink ? sink : -INFINITY;
            for (int32_t j = first; j < n_keys; ++j) mx = std::fmax(mx, s[j]);
            double L = has_sink ? std::exp(sink - mx) : 0.0;
            for (int32_t j = first; j < n_keys; ++j) L += std::exp(s[j] - mx);
            for (int d = 0; d < hd; ++d) {
                double o = 0;
                for (int32_t j = first; j < n_keys; ++j) o += std::exp(s[j] - mx) * v[size_t(j) * hd + d];
                if (std::fabs(out[d] - o / L) > 1e-5)
                    fail_msg("keys %d splits %d window %d sink %d dim %d: %.7g vs %.7g", n_keys, n_splits, window, has_sink,
                             d, out[d], o / L);
            }
        }
    // Every split empty: reported, nothing written.
    std::vector<float> part(4 * 6, 0.0f);
    for (int i = 0; i < 4; ++i) part[i * 6] = -INFINITY;
    float out[4] = {7, 7, 7, 7};
    assert_false(cu::combine_partials(part.data(), 4, 6, 4, out, [](float x) { return std::exp(x); }));
    assert_true(out[0] == 7.0f);
}

// rope_math.hpp's angles and scale (what k_rope_angles_yarn computes) against cpu::rope on pairs (1, 0),
// whose rotation is (cos, sin) times the scale: bit for bit, as both form them in double. Plain ROPE
// (defaults), Llama-3/LongRoPE-style factors, YaRN's ramp (gpt-oss: factor 32, 4096 original positions)
// and LongRoPE's attention factor.
void test_rope_yarn(void **) {
    const int n_rot = 32, half = n_rot / 2;
    std::vector<float> factors(half);
    for (int i = 0; i < half; ++i) factors[i] = 1.0f + 0.37f * float(i);
    struct Case {
        float theta, freq_scale;
        const float *ff;
        RopeYarn y;
    } cases[] = {
        {10000.0f, 1.0f, nullptr, {}},
        {500000.0f, 0.25f, factors.data(), {}},
        {150000.0f, 1.0f / 32, nullptr, {1.0f, 1.0f, 32.0f, 1.0f, 4096}},
        {10000.0f, 1.0f, factors.data(), {0.0f, 1.19f, 0.0f, 0.0f, 0}},
        {10000.0f, 0.5f, factors.data(), {1.0f, 0.9f, 32.0f, 1.0f, 2048}},
    };
    const int32_t pos[] = {0, 1, 7, 1000, 70000};
    for (const Case &c : cases) {
        cpu::RopeParams p;
        p.n_rot = n_rot, p.theta_base = c.theta, p.freq_scale = c.freq_scale, p.freq_factors = c.ff;
        p.ext_factor = c.y.ext_factor, p.attn_factor = c.y.attn_factor, p.beta_fast = c.y.beta_fast;
        p.beta_slow = c.y.beta_slow, p.n_ctx_orig = c.y.n_ctx_orig;
        std::vector<float> x(std::size(pos) * n_rot);
        for (size_t k = 0; k < x.size(); k += 2) x[k] = 1.0f, x[k + 1] = 0.0f;
        cpu::rope(x.data(), std::size(pos), 1, n_rot, pos, p);
        const YarnRamp ramp = c.y.ext_factor != 0 ? yarn_ramp(n_rot, c.theta, c.y) : YarnRamp{0, 0};
        const double mscale = yarn_mscale(c.freq_scale, c.y);
        for (size_t t = 0; t < std::size(pos); ++t)
            for (int i = 0; i < half; ++i) {
                const double a = pos[t] * yarn_freq(i, n_rot, c.theta, c.freq_scale, c.ff ? c.ff[i] : 1.0f, c.y, ramp);
                const float cs = static_cast<float>(std::cos(a) * mscale), sn = static_cast<float>(std::sin(a) * mscale);
                if (cs != x[t * n_rot + 2 * i] || sn != x[t * n_rot + 2 * i + 1])
                    fail_msg("theta %g pos %d pair %d: (%.9g, %.9g) vs the CPU's (%.9g, %.9g)", c.theta, pos[t], i, cs, sn,
                             x[t * n_rot + 2 * i], x[t * n_rot + 2 * i + 1]);
            }
    }
}

// moe_route.cpp's choices and gates are cpu::moe_route's (ties included: logits drawn from a few values),
// and its work rows group each expert's tokens in token order.
void test_moe_route(void **) {
    uint64_t st = 17;
    for (uint32_t gating : {0u, 1u})
        for (auto [n_expert, k] : {std::pair{8u, 2u}, std::pair{32u, 4u}, std::pair{5u, 5u}}) {
            const uint32_t n = 37;
            std::vector<float> logits(size_t{n} * n_expert);
            for (float &l : logits) l = std::floor(test_randf(&st, -3, 3));  // integers: many ties
            cpu::MoeParams p;
            p.n_expert = int(n_expert), p.n_used = int(k), p.gating = gating;
            std::vector<int32_t> sel(size_t{n} * k);
            std::vector<float> weight(sel.size());
            cpu::moe_route(p, logits.data(), n, sel.data(), weight.data());
            const cu::MoeRoute r = cu::moe_route(logits.data(), n, n_expert, k, gating);
            for (size_t s = 0; s < sel.size(); ++s) {
                const uint32_t row = uint32_t(r.pos[s]), e = uint32_t(sel[s]);
                assert_true(row >= r.first[e] && row < r.first[e] + r.count[e]);  // in its expert's rows
                assert_int_equal(r.token[row], int32_t(s / k));
                assert_true(r.gate[s] == weight[s]);
            }
            for (uint32_t e = 0; e < n_expert; ++e)
                for (uint32_t row = r.first[e] + 1; row < r.first[e] + r.count[e]; ++row)
                    assert_true(r.token[row - 1] < r.token[row]);
            assert_int_equal(r.first[n_expert - 1] + r.count[n_expert - 1], size_t{n} * k);
        }
}

// The kernels' Q4_0 codes and scale offsets read the CPU's cache rows back exactly, for rows whose
// blocks straddle heads at any multiple of 8 (the attention kernels' head offsets).
void test_q4_offsets(void **) {
    uint64_t st = 10;
    const int n = 160;
    std::vector<float> x(n);
    for (float &v : x) v = test_randf(&st, -3, 3);
    std::vector<uint8_t> row(dtype_row_bytes(DType::Q4_0, n));
    assert_int_equal(cu::kv_cache_row_bytes(2, n), row.size());
    cpu::store_kv_row(DType::Q4_0, x.data(), row.data(), n);
    std::vector<float> want(n);
    cpu::dequantize_row(DType::Q4_0, row.data(), want.data(), n);
    for (uint32_t j = 0; j < uint32_t(n); ++j) {
        uint16_t h;
        std::memcpy(&h, row.data() + cu::q4_scale_offset(j), 2);
        const int c = cu::q4_code(row.data(), j);
        assert_true(c >= 0 && c <= 15);
        const float got = fp16_to_fp32(h) * float(c - 8);
        if (got != want[j]) fail_msg("q4_0 element %u: %g vs %g", j, got, want[j]);
    }
}

// The kernels' Q8_0 element offsets read the CPU's cache rows (cpu::store_kv_row) back exactly.
void test_q8_offsets(void **) {
    assert_int_equal(cu::kv_cache_row_bytes(1, 96), 192);
    assert_int_equal(cu::kv_cache_row_bytes(8, 48), 0);   // not whole blocks
    assert_int_equal(cu::kv_cache_row_bytes(2, 48), 0);
    assert_int_equal(cu::kv_cache_row_bytes(0, 96), 0);   // F32: no cache type
    uint64_t st = 9;
    const int n = 96;
    std::vector<float> x(n);
    for (float &v : x) v = test_randf(&st, -3, 3);
    std::vector<uint8_t> row(dtype_row_bytes(DType::Q8_0, n));
    cpu::store_kv_row(DType::Q8_0, x.data(), row.data(), n);
    std::vector<float> want(n);
    cpu::dequantize_row(DType::Q8_0, row.data(), want.data(), n);
    for (uint32_t j = 0; j < uint32_t(n); ++j) {
        uint16_t h;
        std::memcpy(&h, row.data() + cu::q8_scale_offset(j), 2);
        const float got = fp16_to_fp32(h) * float(int8_t(row[cu::q8_code_offset(j)]));
        assert_true(got == want[j]);
    }
    assert_int_equal(cu::kv_cache_row_bytes(8, n), row.size());
    const int32_t table[3] = {5, 0, 9};
    assert_int_equal(cu::cache_row(table, 0, 16), 80);
    assert_int_equal(cu::cache_row(table, 17, 16), 1);
    assert_int_equal(cu::cache_row(table, 40, 16), 9 * 16 + 8);
    assert_int_equal(cu::cache_row(table, 20, 7), 9 * 7 + 6);
}

// Two sequences (decode of one, a prompt chunk of the other) sharing nothing, a third table shared by
// two tokens: slots, table offsets and the deduplicated tables; and the checks.
void test_step_inputs(void **) {
    const int32_t ta[3] = {4, 1, 7}, tb[2] = {0, 3};
    const int32_t tokens[4] = {10, 11, 12, 13}, pos[4] = {40, 17, 18, 19};
    const int32_t *tables[4] = {ta, tb, tb, tb};
    const int32_t rows_l[2] = {0, 3};
    ember_mod_batch b{};
    b.struct_size = sizeof b;
    b.n_tokens = 4, b.tokens = tokens, b.pos = pos, b.tables = tables, b.n_logits = 2, b.logits_rows = rows_l;
    cu::StepShape z;
    z.rows = 8, z.block_size = 16, z.n_blocks = 8, z.n_vocab = 100, z.n_batch = 8, z.n_logits = 2;
    std::vector<int32_t> io(4 * z.rows + z.n_logits, -1), tabs;
    assert_int_equal(cu::step_inputs(b, z, io.data(), tabs), 41);
    for (int t = 0; t < 4; ++t) {
        assert_int_equal(io[t], tokens[t]);
        assert_int_equal(io[8 + t], pos[t]);
        const int32_t *tab = tables[t];
        assert_int_equal(io[16 + t], tab[pos[t] / 16] * 16 + pos[t] % 16);
        // The uploaded table, read at the token's offset, is the token's table.
        for (int i = 0; i <= pos[t] / 16; ++i) assert_int_equal(tabs[size_t(io[24 + t] + i)], tab[i]);
    }
    assert_int_equal(tabs.size(), 3 + 2);  // each table once
    assert_int_equal(io[32], 0);
    assert_int_equal(io[33], 3);
    // Position 40 with a table whose block 2 is out of the pool; a bad token id; a bad logits row.
    const int32_t bad[3] = {4, 1, 8};
    tables[0] = bad;
    try {
        cu::step_inputs(b, z, io.data(), tabs);
        fail_msg("a block outside the pool was accepted");
    } catch (const Error &e) {
        assert_int_equal(e.status(), EMBER_ERR_INTERNAL);
    }
    tables[0] = ta;
    const int32_t bad_tok[4] = {10, 100, 12, 13};
    b.tokens = bad_tok;
    try {
        cu::step_inputs(b, z, io.data(), tabs);
        fail_msg("token 100 of 100 was accepted");
    } catch (const Error &) {
    }
    b.tokens = tokens;
    const int32_t bad_rows[2] = {0, 4};
    b.logits_rows = bad_rows;
    try {
        cu::step_inputs(b, z, io.data(), tabs);
        fail_msg("logits row 4 of 4 tokens was accepted");
    } catch (const Error &) {
    }
}

// With a window pool: each token's window slot and window table offset after the logits rows, the window
// tables uploaded beside the main ones; released entries (-1) before a token's own block pass, one at
// its own block or past the window pool does not.
void test_step_inputs_window(void **) {
    const int32_t ta[3] = {4, 1, 7}, wa[3] = {-1, 2, 0}, tb[2] = {0, 3}, wb[2] = {1, 3};
    const int32_t tokens[3] = {10, 11, 12}, pos[3] = {40, 17, 18};
    const int32_t *tables[3] = {ta, tb, tb}, *wtables[3] = {wa, wb, wb};
    const int32_t rows_l[1] = {2};
    ember_mod_batch b{};
    b.struct_size = sizeof b;
    b.n_tokens = 3, b.tokens = tokens, b.pos = pos, b.tables = tables, b.n_logits = 1, b.logits_rows = rows_l;
    b.window_tables = wtables;
    cu::StepShape z;
    z.rows = 8, z.block_size = 16, z.n_blocks = 8, z.n_vocab = 100, z.n_batch = 8, z.n_logits = 1, z.n_window_blocks = 4;
    const size_t words = cu::step_io_words(z.rows, z.n_logits, true);
    assert_int_equal(words, 6 * 8 + 1);
    std::vector<int32_t> io(words, -7), tabs;
    assert_int_equal(cu::step_inputs(b, z, io.data(), tabs), 41);
    const size_t ws = cu::step_io_window_slots(8, 1), wo = cu::step_io_window_offsets(8, 1);
    assert_int_equal(ws, 33);
    assert_int_equal(wo, 41);
    for (int t = 0; t < 3; ++t) {
        assert_int_equal(io[16 + t], tables[t][pos[t] / 16] * 16 + pos[t] % 16);
        assert_int_equal(io[ws + t], wtables[t][pos[t] / 16] * 16 + pos[t] % 16);
        for (int i = 0; i <= pos[t] / 16; ++i) {
            assert_int_equal(tabs[size_t(io[24 + t] + i)], tables[t][i]);
            assert_int_equal(tabs[size_t(io[wo + t] + i)], wtables[t][i]);
        }
    }
    assert_int_equal(tabs.size(), 2 * (3 + 2));
    assert_int_equal(io[32], 2);   // the logits row, where it was
    // The token's own window block released, or one past the window pool; no window tables at all.
    const int32_t own_released[3] = {-1, 2, -1}, outside[3] = {-1, 4, 0};
    for (const int32_t *bad : {own_released, outside}) {
        wtables[0] = bad;
        try {
            cu::step_inputs(b, z, io.data(), tabs);
            fail_msg("a window block outside the pool was accepted");
        } catch (const Error &e) {
            assert_int_equal(e.status(), EMBER_ERR_INTERNAL);
        }
    }
    wtables[0] = wa;
    b.window_tables = nullptr;
    try {
        cu::step_inputs(b, z, io.data(), tabs);
        fail_msg("a batch without window tables was accepted");
    } catch (const Error &e) {
        assert_int_equal(e.status(), EMBER_ERR_INTERNAL);
    }
}

// read_kv/write_kv's rows: every position of a main table; a window table's held positions only.
void test_kv_row_plan(void **) {
    const int32_t main[2] = {3, 1}, window[3] = {-1, -1, 2};
    const cu::KvRowPlan m = cu::kv_row_plan(main, 20, 16);
    assert_int_equal(m.rows.size(), 20);
    assert_int_equal(m.rows[0], 48);
    assert_int_equal(m.rows[19], 16 + 3);
    for (uint32_t p = 0; p < 20; ++p) assert_int_equal(m.pos[p], p);
    const cu::KvRowPlan w = cu::kv_row_plan(window, 40, 16);
    assert_int_equal(w.rows.size(), 8);   // positions 32..39
    for (uint32_t i = 0; i < 8; ++i) {
        assert_int_equal(w.pos[i], 32 + i);
        assert_int_equal(w.rows[i], 2 * 16 + int32_t(i));
    }
}

// Every weight type in the device layout (Q8_0/Q4_0 repacked, the rest as in the file), read with the
// kernels' own element decoder (cuda/quant_math.hpp's weight_at, compiled here for the CPU), gives the
// CPU's dequantized values exactly.
void test_weight_layouts(void **) {
    uint64_t st = 3;
    for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                       DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS,
                       DType::MXFP4}) {
        const int64_t n_in = 512, n_out = 5;
        std::vector<float> f(size_t(n_in * n_out));
        for (float &x : f) x = test_randf(&st, -1, 1);
        const size_t rb = dtype_row_bytes(type, n_in);
        std::vector<uint8_t> file(rb * n_out);
        for (int64_t o = 0; o < n_out; ++o) {
            const float *src = f.data() + o * n_in;
            uint8_t *row = file.data() + o * rb;
            if (type == DType::F32) std::memcpy(row, src, rb);
            else if (type == DType::F16 || type == DType::BF16)
                for (int64_t i = 0; i < n_in; ++i) {
                    const uint16_t h = type == DType::F16 ? fp32_to_fp16(src[i]) : fp32_to_bf16(src[i]);
                    std::memcpy(row + 2 * i, &h, 2);
                }
            else cpu::quantize_row(type, src, row, n_in);
        }
        ember_mod_tensor t{};
        t.type = uint32_t(type), t.n_dims = 2, t.ne[0] = n_in, t.ne[1] = n_out, t.data = file.data(), t.n_bytes = file.size();
        cu::check_weight_type(t, "w");
        std::vector<uint8_t> dev(cu::weight_device_bytes(t) + 256);
        // The "device" address: 256-aligned inside the host buffer, as cudaMalloc's.
        uint8_t *base = dev.data() + (256 - reinterpret_cast<uintptr_t>(dev.data()) % 256) % 256;
        const cu::DevWeight w = cu::weight_pack(t, base, base);
        assert_int_equal(w.n_in, n_in);
        assert_int_equal(w.n_out, n_out);
        assert_int_equal(reinterpret_cast<uintptr_t>(w.codes) % 16, 0);
        std::vector<float> want(static_cast<size_t>(n_in));
        for (int64_t o = 0; o < n_out; ++o) {
            cpu::dequantize_row(type, file.data() + o * rb, want.data(), n_in);
            for (int64_t i = 0; i < n_in; ++i) {
                const float got = cu::weight_at(w, o, i);
                if (got != want[size_t(i)])
                    fail_msg("%s [%lld][%lld]: %g vs %g", dtype_name(type), (long long)o, (long long)i, got, want[size_t(i)]);
            }
        }
    }
    // A type no kernel runs (Q8_1: only ever an activation format), and rows of a runnable type that
    // are not whole blocks, are refused by name.
    const struct { DType type; int64_t n_in; } refused[] = {{DType::Q8_1, 256}, {DType::IQ4_XS, 96}, {DType::MXFP4, 48}};
    for (const auto &r : refused) {
        ember_mod_tensor k{};
        k.type = uint32_t(r.type), k.n_dims = 2, k.ne[0] = r.n_in, k.ne[1] = 1;
        try {
            cu::check_weight_type(k, "blk.0.ffn_down");
            fail_msg("%s x %lld accepted", dtype_name(r.type), (long long)r.n_in);
        } catch (const Error &e) {
            assert_int_equal(e.status(), EMBER_ERR_UNSUPPORTED);
            assert_non_null(std::strstr(e.what(), dtype_name(r.type)));
        }
    }
}

// The tensor cores' tiles (tile_layout.hpp): the A fragments every lane reads from the device layout
// (tile_a_frag on the words at its place in the tile), put where the PTX ISA's m16n8k32 layout says they
// go, are the file's codes (Q4_0's centred: code - 8, Q6_K's code - 32) of the tile's 16 rows, and the
// scales (Q4_K: the rows' 16-byte heads; Q6_K: d and the 16 scales) theirs; the padding rows of a last
// group that is not whole are zero bytes.
void test_tile_fragments(void **) {
    uint64_t st = 77;
    for (DType type : {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K}) {
        const uint32_t ty = uint32_t(type);
        const int64_t n_in = 512, n_out = 21, nb = n_in / 32;  // two groups, the second 5 rows
        std::vector<float> wf(size_t(n_in * n_out));
        for (float &v : wf) v = test_randf(&st, -1, 1);
        const size_t rb = dtype_row_bytes(type, n_in);
        std::vector<uint8_t> file(rb * n_out);
        for (int64_t o = 0; o < n_out; ++o) cpu::quantize_row(type, wf.data() + o * n_in, file.data() + o * rb, n_in);
        ember_mod_tensor t{};
        t.type = ty, t.n_dims = 2, t.ne[0] = n_in, t.ne[1] = n_out, t.data = file.data(), t.n_bytes = file.size();
        std::vector<uint8_t> dev(cu::weight_device_bytes(t) + 256, 0);
        uint8_t *base = dev.data() + (256 - reinterpret_cast<uintptr_t>(dev.data()) % 256) % 256;
        const cu::DevWeight w = cu::weight_pack(t, base, base);
        const uint8_t *codes = static_cast<const uint8_t *>(w.codes);
        assert_int_equal(cu::tile_groups(n_out), 2);
        for (int64_t grp = 0; grp < 2; ++grp)
            for (int64_t b = 0; b < nb; ++b) {
                const uint8_t *tile = codes + cu::tile_start(ty, grp, nb, b);
                int a_mat[16][32];
                for (int lane = 0; lane < 32; ++lane) {
                    uint32_t words[4], a[4];
                    const int wb = cu::byte_codes(ty) ? 16 : 8;
                    std::memcpy(words, tile + lane * wb, size_t(wb));
                    cu::tile_a_frag(ty, words, a);
                    const int g = lane / 4, c = lane % 4;
                    for (int j = 0; j < 4; ++j) {
                        a_mat[g][4 * c + j] = static_cast<int8_t>(a[0] >> (8 * j));
                        a_mat[g + 8][4 * c + j] = static_cast<int8_t>(a[1] >> (8 * j));
                        a_mat[g][16 + 4 * c + j] = static_cast<int8_t>(a[2] >> (8 * j));
                        a_mat[g + 8][16 + 4 * c + j] = static_cast<int8_t>(a[3] >> (8 * j));
                    }
                }
                for (int rr = 0; rr < 16; ++rr) {
                    const int64_t r = grp * 16 + rr;
                    const uint8_t *row = file.data() + r * rb;
                    // The tile's record of the row's scales against the file's: Q8_0/Q4_0 the f16, Q4_K the
                    // 16-byte head, Q6_K d and the 16 scales.
                    const uint8_t *unit = codes + cu::unit_start(ty, grp, nb, b);
                    const uint8_t *blk = type == DType::Q4_K ? row + (b / 8) * 144
                                         : type == DType::Q6_K ? row + (b / 8) * 210 : row + b * (type == DType::Q8_0 ? 34 : 18);
                    struct { const uint8_t *got; size_t file_off, n; } heads[2] = {
                        {reinterpret_cast<const uint8_t *>(w.scales + (grp * nb + b) * 16 + cu::tile_scale_slot(rr)), 0, 2}, {nullptr, 0, 0}};
                    if (type == DType::Q4_K) heads[0] = {unit + rr * 16, 0, 16};
                    if (type == DType::Q6_K) heads[0] = {unit + 2 * rr, 208, 2}, heads[1] = {unit + 32 + 16 * rr, 192, 16};
                    static const uint8_t zeros[16] = {};
                    for (const auto &h : heads)
                        if (h.n && std::memcmp(h.got, r < n_out ? blk + h.file_off : zeros, h.n) != 0)
                            fail_msg("%s tile (%lld, %lld) row %d: scale differs", dtype_name(type), (long long)grp, (long long)b, rr);
                    for (int k = 0; k < 32; ++k) {
                        int want = type == DType::Q4_0 ? -8 : 0;  // padding: zero nibbles (and zero scales)
                        if (r < n_out && type == DType::Q8_0) want = static_cast<int8_t>(blk[2 + k]);
                        else if (r < n_out && type == DType::Q4_0) want = (k < 16 ? blk[2 + k] & 15 : blk[2 + k - 16] >> 4) - 8;
                        else if (r < n_out && type == DType::Q4_K) {
                            const int j = static_cast<int>(b % 8);
                            const uint8_t q = blk[16 + 32 * (j / 2) + k];
                            want = j % 2 ? q >> 4 : q & 15;
                        } else if (r < n_out) {  // Q6_K: element 32 (b % 8) + k of the super-block
                            const int e = static_cast<int>(b % 8) * 32 + k, h = e / 128, q = e % 128 / 32, l = e % 32;
                            const uint8_t lo = blk[64 * h + 32 * (q & 1) + l];
                            want = ((q < 2 ? lo & 15 : lo >> 4) | ((blk[128 + 32 * h + l] >> (2 * q)) & 3) << 4) - 32;
                        }
                        if (a_mat[rr][k] != want)
                            fail_msg("%s tile (%lld, %lld) row %d code %d: %d vs %d", dtype_name(type), (long long)grp,
                                     (long long)b, rr, k, a_mat[rr][k], want);
                    }
                }
            }
    }
}

// The matrix-vector kernels' 8-values-per-lane K-quant decoder: the same floats as the element decoder
// (kq_value, itself checked against cpu::dequantize_row in test_weight_layouts) for every lane of
// random super-blocks, so the fast kernels dequantize exactly as the CPU.
void test_kq_values8(void **) {
    uint64_t st = 91;
    for (DType type : {DType::Q4_K, DType::Q5_K, DType::Q6_K})
        for (int rep = 0; rep < 30; ++rep) {
            const int n = 512;
            std::vector<float> wf(n);
            for (float &v : wf) v = test_randf(&st, -2, 2) * (rep % 3 == 0 ? 40.0f : 1.0f);
            std::vector<uint8_t> file(dtype_row_bytes(type, n));
            cpu::quantize_row(type, wf.data(), file.data(), n);
            const uint32_t bb = cu::kq_block_bytes(uint32_t(type));
            for (int sb = 0; sb < n / 256; ++sb)
                for (int lane = 0; lane < 32; ++lane) {
                    float got[8];
                    cu::kq_values8(uint32_t(type), file.data() + sb * bb, lane, got);
                    for (int i = 0; i < 8; ++i) {
                        const float want = cu::kq_value(uint32_t(type), file.data() + sb * bb, lane * 8 + i);
                        if (std::memcmp(&got[i], &want, sizeof want) != 0)
                            fail_msg("%s block %d lane %d element %d: %.9g vs %.9g", dtype_name(type), sb, lane, i, got[i], want);
                    }
                }
        }
}

// Throws EMBER_ERR_INTERNAL with `text` in its message.
template <class F>
void expect_internal(F &&f, const char *text) {
    try {
        f();
        fail_msg("accepted; expected '%s'", text);
    } catch (const Error &e) {
        if (e.status() != EMBER_ERR_INTERNAL || !std::strstr(e.what(), text)) fail_msg("'%s'; expected '%s'", e.what(), text);
    }
}

// Three sequences in one pass (a new one's prompt chunk, one going on in place, a fork reading another
// slot): each token's run, the runs' tokens and slots, after the logits rows (window-less io); and what
// the CPU backend refuses: slots out of range, a slot's tokens apart or out of order, a run reading a
// slot the pass writes, a batch without state arrays.
void test_state_runs(void **) {
    const int32_t tab[2] = {0, 1};
    const int32_t tokens[6] = {1, 2, 3, 4, 5, 6}, pos[6] = {0, 1, 2, 9, 4, 5};
    const int32_t *tables[6] = {tab, tab, tab, tab, tab, tab};
    int32_t slots[6] = {5, 5, 5, 1, 2, 2}, src[6] = {-1, -1, -1, 1, 0, 0};
    const int32_t lrows[1] = {5};
    ember_mod_batch b{};
    b.struct_size = sizeof b;
    b.n_tokens = 6, b.tokens = tokens, b.pos = pos, b.tables = tables, b.n_logits = 1, b.logits_rows = lrows;
    b.state_slots = slots, b.state_src = src;
    cu::StepShape z;
    z.rows = 8, z.block_size = 16, z.n_blocks = 2, z.n_vocab = 10, z.n_batch = 8, z.n_logits = 1, z.n_state_slots = 6;
    const size_t words = cu::step_io_words(z.rows, z.n_logits, false, true);
    assert_int_equal(words, 4 * 8 + 1 + 6 * 8 + 1);
    std::vector<int32_t> io(words, -7), tabs;
    cu::step_inputs(b, z, io.data(), tabs);
    const int32_t *st = io.data() + cu::step_io_state(z.rows, z.n_logits, false);
    assert_int_equal(cu::step_io_state(z.rows, z.n_logits, false), 4 * 8 + 1);
    auto at = [&](size_t array, size_t i) { return st[array * z.rows + i]; };
    const int32_t run_of[6] = {0, 0, 0, 1, 2, 2}, t0[3] = {0, 3, 4}, t1[3] = {3, 4, 6}, from[3] = {-1, 1, 0}, slot[3] = {5, 1, 2};
    for (size_t t = 0; t < 6; ++t) assert_int_equal(at(cu::StateIo::kRunOf, t), run_of[t]);
    for (size_t r = 0; r < 3; ++r) {
        assert_int_equal(at(cu::StateIo::kT0, r), t0[r]);
        assert_int_equal(at(cu::StateIo::kT1, r), t1[r]);
        assert_int_equal(at(cu::StateIo::kFrom, r), from[r]);
        assert_int_equal(at(cu::StateIo::kSlot, r), slot[r]);
    }
    for (size_t t = 0; t < z.rows; ++t) assert_int_equal(at(cu::StateIo::kKeep, t), -1);  // no state kept per token
    assert_int_equal(st[cu::StateIo::words(z.rows) - 1], 3);
    assert_int_equal(io[4 * 8], 5);  // the logits row before the runs, untouched by them

    std::vector<int32_t> out(cu::StateIo::words(8));
    slots[3] = 6;
    expect_internal([&] { cu::state_runs(b, 6, 8, out.data()); }, "state slot 6 of 6");
    slots[3] = 1, src[3] = -2;
    expect_internal([&] { cu::state_runs(b, 6, 8, out.data()); }, "state slot -2");
    src[3] = 1, slots[3] = 5;  // slot 5's tokens 0-2, then token 3 at position 9: out of order
    expect_internal([&] { cu::state_runs(b, 6, 8, out.data()); }, "out of order");
    slots[3] = 1, slots[4] = 5;  // slot 5 again after slot 1's token
    expect_internal([&] { cu::state_runs(b, 6, 8, out.data()); }, "not consecutive");
    slots[4] = 2, src[4] = 1;    // a fork reading slot 1, which this pass writes
    expect_internal([&] { cu::state_runs(b, 6, 8, out.data()); }, "reads a state slot the same pass writes");
    src[4] = 0;
    assert_int_equal(cu::state_runs(b, 6, 8, out.data()), 3);
    b.state_src = nullptr;
    expect_internal([&] { cu::state_runs(b, 6, 8, out.data()); }, "needs the batch's state slots");
}

// SSM_CONV as recurrent.cu's two kernels compute it (outputs a thread per (token, channel) from the rows
// and the carried windows, then each run's new window, in place for a run going on in its own slot),
// with cuda/recurrent_math.hpp's indices, against cpu::ssm_conv: the same floats in the same order, so
// the same bits. Runs shorter, as long as and longer than the window, one reading another slot.
void test_ssm_conv_windows(void **) {
    const int64_t C = 5;
    uint64_t st = 3;
    auto rnd = [&] {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        return static_cast<float>(static_cast<int64_t>(st >> 40) % 2001 - 1000) / 500.0f;
    };
    cpu::ThreadPool pool(1);
    for (int K : {1, 2, 4, 7}) {
        const int64_t W = K - 1, T = 12, sf = W * C + 3;  // state floats a slot; the window at offset 3
        const uint32_t off = 3;
        // Runs [0,1) slot 0 in place, [1,4) slot 1 from slot 3, [4,12) slot 2 new (zeros).
        const int64_t t0[3] = {0, 1, 4}, t1[3] = {1, 4, 12};
        const int32_t from[3] = {0, 3, -1}, slot[3] = {0, 1, 2};
        std::vector<float> x(T * C), w(C * K), states(4 * sf);
        for (float &v : x) v = rnd();
        for (float &v : w) v = rnd();
        for (float &v : states) v = rnd();
        // The CPU's convolution.
        std::vector<float> want_states = states, want_y(T * C);
        std::vector<cpu::StateRun> runs(3);
        for (int r = 0; r < 3; ++r) {
            runs[r].t0 = uint32_t(t0[r]), runs[r].t1 = uint32_t(t1[r]), runs[r].state = want_states.data() + slot[r] * sf;
            runs[r].from = from[r] < 0 ? nullptr : want_states.data() + from[r] * sf;
        }
        cpu::ssm_conv(pool, x.data(), want_y.data(), C, K, w.data(), runs.data(), 3, off);
        // The kernels' loops.
        std::vector<float> y(T * C);
        for (int r = 0; r < 3; ++r)
            for (int64_t t = t0[r]; t < t1[r]; ++t)
                for (int64_t c = 0; c < C; ++c) {
                    const float *win = from[r] < 0 ? nullptr : states.data() + from[r] * sf + off;
                    float s = 0.0f;
                    for (int j = 0; j < K; ++j) {
                        const cu::ConvInput in = cu::conv_input(t, j, t0[r], K);
                        if (!in.row) assert_true(in.index >= 0 && in.index < W);
                        const float v = in.row ? x[size_t(in.index * C + c)] : win ? win[in.index * C + c] : 0.0f;
                        s += w[size_t(c * K + j)] * v;
                    }
                    y[size_t(t * C + c)] = s / (1.0f + std::exp(-s));
                }
        for (int r = 0; r < 3; ++r)
            for (int64_t c = 0; c < C; ++c) {
                const float *old = from[r] < 0 ? nullptr : states.data() + from[r] * sf + off;
                float *win = states.data() + slot[r] * sf + off;
                for (int64_t j = 0; j < W; ++j) {
                    const cu::ConvInput in = cu::conv_window_after(j, t0[r], t1[r], K);
                    if (!in.row) assert_true(in.index > j && in.index < W);  // in place: read before written
                    win[j * C + c] = in.row ? x[size_t(in.index * C + c)] : old ? old[in.index * C + c] : 0.0f;
                }
            }
        for (size_t i = 0; i < y.size(); ++i)
            if (std::memcmp(&y[i], &want_y[i], sizeof(float)) != 0) fail_msg("K %d output %zu: %.9g vs %.9g", K, i, y[i], want_y[i]);
        for (size_t i = 0; i < states.size(); ++i)
            if (states[i] != want_states[i]) fail_msg("K %d state %zu: %.9g vs %.9g", K, i, states[i], want_states[i]);
    }
}

} // namespace

int main() {
    const CMUnitTest tests[] = {cmocka_unit_test(test_split_ranges),
                                cmocka_unit_test(test_combine), cmocka_unit_test(test_q8_offsets), cmocka_unit_test(test_q4_offsets),
                                cmocka_unit_test(test_step_inputs), cmocka_unit_test(test_step_inputs_window), cmocka_unit_test(test_kv_row_plan), cmocka_unit_test(test_weight_layouts),
                                cmocka_unit_test(test_tile_fragments), cmocka_unit_test(test_kq_values8), cmocka_unit_test(test_rope_yarn),
                                cmocka_unit_test(test_moe_route), cmocka_unit_test(test_state_runs),
                                cmocka_unit_test(test_ssm_conv_windows)};
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
