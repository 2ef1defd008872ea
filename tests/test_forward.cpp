// test_forward.cpp — the whole decoder on the CPU backend against the double-precision reference
// forward pass (src/testing/reference_forward.cpp; test_families.cpp runs it over every family), on synthetic models with random weights that exercise what the shipped real models do
// not: qwen2's Q/K/V biases and NEOX rope, Llama-3 style rope_freqs, GQA, tied and separate outputs,
// and every weight type. Both the prefill (batched) and decode (one token at a time) paths are checked.
//
// The reference stores K and V rounded to f16, as the f16 KV cache does, and reads weights exactly as
// stored (dequantized), so what remains is float32 rounding inside the kernels, plus, for quantized
// weights, the 8-bit quantization of activations that the integer dot products use.
//
// At the end, the reference of the Gated DeltaNet hybrids on its own (pinned to llama.cpp's argmax).
#include "synthetic_model.hpp"
#include "test_util.h"

#include "core/error.hpp"
#include "core/fp16.hpp"
#include "cpu/kernels.hpp"
#include "gguf/gguf.hpp"
#include "model/model.hpp"
#include "testing/reference_forward.hpp"
#include "testing/synthetic.hpp"
#include "session/session.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unistd.h>
#include <thread>
#include <vector>

using namespace ember;

namespace {

using Vec = std::vector<double>;
using ember::reference_logits;

// Largest |ours - reference| over the vocabulary.
double max_diff(const float *ours, const Vec &ref) {
    double m = 0;
    for (size_t i = 0; i < ref.size(); ++i) m = std::max(m, std::fabs(ours[i] - ref[i]));
    return m;
}

void check_model(const SyntheticSpec &spec, double bound, const char *what) {
    auto model = load_synthetic(spec);
    const std::vector<int32_t> tokens = {1, 7, 3, 12, 40, 5, 9, 22, 31, 2, 17};
    const auto ref = reference_logits(*model, tokens);

    SessionOptions o;
    o.n_ctx = 64;
    o.n_threads = 2;
    Session prefill(*model, o);
    prefill.feed(tokens.data(), tokens.size());
    const double d_prefill = max_diff(prefill.logits(), ref.back());

    o.n_threads = 1;
    Session decode(*model, o);
    double d_decode = 0;
    for (size_t t = 0; t < tokens.size(); ++t) {
        decode.feed(&tokens[t], 1);
        d_decode = std::max(d_decode, max_diff(decode.logits(), ref[t]));
    }
    double scale = 0;
    for (double v : ref.back()) scale = std::max(scale, std::fabs(v));
    std::printf("%-44s max|logit| %.3f  prefill err %.2e  decode err %.2e  (bound %.1e x max(1, max|logit|))\n", what, scale, d_prefill,
                d_decode, bound);
    assert_true(scale > 0.1);  // the model computes something non-trivial
    const double limit = bound * std::max(1.0, scale);
    assert_true(d_prefill <= limit);
    assert_true(d_decode <= limit);
}

// Bounds, relative to max(1, max|logit|): float weights leave only f32 rounding (~1e-6 relative over
// these short sums), so 1e-3 is generous. Q8_0/Q4_0 weights meet activations rounded to 8 bits per
// block of 32 (relative error up to 1/254 per element, partly cancelling over a row), through two
// layers: 2e-2.
void test_llama_f32_gqa_rope_freqs_tied(void **) {
    SyntheticSpec s;
    s.rope_freqs = true;
    check_model(s, 1e-3, "llama F32, GQA 4/2, rope_freqs, tied output");
}

void test_qwen2_f16_biases_neox(void **) {
    SyntheticSpec s;
    s.arch = "qwen2";
    s.qkv_bias = true;
    s.type = DType::F16;
    s.tied_output = false;
    s.n_head = 8;
    s.n_head_kv = 2;
    s.n_embd = 128;
    check_model(s, 1e-3, "qwen2 F16, biases, NEOX rope, GQA 8/2");
}

void test_llama_bf16_mha(void **) {
    SyntheticSpec s;
    s.type = DType::BF16;
    s.n_head_kv = 4;
    s.tied_output = false;
    s.rope_theta = 500000.0f;
    check_model(s, 1e-3, "llama BF16, MHA, theta 5e5");
}

void test_llama_q8_0(void **) {
    SyntheticSpec s;
    s.type = DType::Q8_0;
    check_model(s, 2e-2, "llama Q8_0");
}

// Qwen3: no biases, NEOX rope, per-head RMSNorm of q and k; the file says key_length 32 where 96 / 4 heads
// would give 24, so q is wider than the residual stream, as in Qwen3's real checkpoints.
void test_qwen3_f32_qk_norm(void **) {
    SyntheticSpec s;
    s.arch = "qwen3";
    s.qk_norm = true;
    s.head_dim = 32;
    s.n_embd = 96;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.tied_output = false;
    check_model(s, 1e-3, "qwen3 F32, q/k norm, head_dim 32 of embd 96");
}

void test_qwen3_q8_0(void **) {
    SyntheticSpec s;
    s.arch = "qwen3";
    s.qk_norm = true;
    s.type = DType::Q8_0;
    check_model(s, 2e-2, "qwen3 Q8_0, q/k norm");
}

void test_qwen2_q4_0(void **) {
    SyntheticSpec s;
    s.arch = "qwen2";
    s.qkv_bias = true;
    s.type = DType::Q4_0;
    s.tied_output = false;
    check_model(s, 2e-2, "qwen2 Q4_0");
}

// The K-quant mix: Q4_K, with Q6_K for the output matrix and for attn_v/ffn_down in layers 0 and 2
// (model/synthetic.cpp's recipe), so both K-quant kernels and the mix's bookkeeping run in one model.
// Rows must be whole 256-element super-blocks: n_embd 256, n_ff 512. The weights now carry 4-6 bits,
// but the reference reads them exactly as stored, so what remains is the same 8-bit activation
// quantization as for Q8_0/Q4_0, over one more layer: 2e-2.
void test_llama_q4_k_m(void **) {
    SyntheticSpec s;
    s.mix = WeightMix::Q4_K_M;
    s.n_embd = 256;
    s.n_ff = 512;
    s.n_layer = 3;
    s.tied_output = false;
    auto model = load_synthetic(s);
    const ModelDesc &d = model->desc();
    auto type = [&](const std::string &name) { return static_cast<int>(d.tensor(name)->type); };
    assert_int_equal(type("token_embd.weight"), static_cast<int>(DType::Q4_K));
    assert_int_equal(type("output.weight"), static_cast<int>(DType::Q6_K));
    for (uint32_t l = 0; l < d.hp.n_layer; ++l) {
        const DType more = l == 1 ? DType::Q4_K : DType::Q6_K;
        const std::string p = "blk." + std::to_string(l) + ".";
        assert_int_equal(type(p + "attn_v.weight"), static_cast<int>(more));
        assert_int_equal(type(p + "ffn_down.weight"), static_cast<int>(more));
        assert_int_equal(type(p + "attn_q.weight"), static_cast<int>(DType::Q4_K));
        assert_int_equal(type(p + "ffn_up.weight"), static_cast<int>(DType::Q4_K));
    }
    check_model(s, 2e-2, "llama Q4_K_M mix (Q4_K + Q6_K), 3 layers");
}

// Q5_K throughout (the other K-quant with mins, and its fifth bits), with qwen2's biases and NEOX rope.
void test_qwen2_q5_k(void **) {
    SyntheticSpec s;
    s.arch = "qwen2";
    s.qkv_bias = true;
    s.type = DType::Q5_K;
    s.n_embd = 256;
    s.n_head = 8;
    s.n_ff = 256;
    s.tied_output = false;
    check_model(s, 2e-2, "qwen2 Q5_K, GQA 8/2");
}

// The legacy formats; 64 and 96 are not whole K-quant super-blocks, so a K-quant type here would fall
// back to these anyway.
void test_llama_q4_1(void **) {
    SyntheticSpec s;
    s.type = DType::Q4_1;
    check_model(s, 2e-2, "llama Q4_1");
}

void test_qwen2_q5_0(void **) {
    SyntheticSpec s;
    s.arch = "qwen2";
    s.qkv_bias = true;
    s.type = DType::Q5_0;
    s.tied_output = false;
    check_model(s, 2e-2, "qwen2 Q5_0");
}

void test_llama_q5_1(void **) {
    SyntheticSpec s;
    s.type = DType::Q5_1;
    s.n_head_kv = 4;
    check_model(s, 2e-2, "llama Q5_1, MHA");
}

void test_missing_bias_is_an_error(void **) {
    // qwen2 requires Q/K/V biases: a file without them must be refused, naming the tensor.
    SyntheticSpec s;
    s.arch = "qwen2";
    s.qkv_bias = false;
    try {
        load_synthetic(s);
        fail_msg("a qwen2 file without Q/K/V biases loaded");
    } catch (const ember::Error &e) {
        assert_int_equal(e.status(), EMBER_ERR_INVALID_MODEL);
        assert_non_null(std::strstr(e.what(), "attn_q.bias"));
    }
}

} // namespace

// A speculative draft runs on its target's worker threads (SessionOptions::share_threads_with). Sessions
// that share a pool may still be fed from different threads at once: their runs take turns, and each
// gets the logits it gets alone, bit for bit.
void test_sessions_sharing_threads(void **) {
    SyntheticSpec spec;
    spec.type = DType::Q8_0;
    spec.n_embd = 256;   // big enough that the matmuls go to the pool (matmul.cpp's kMinParallelMacs)
    spec.n_ff = 512;
    spec.n_vocab = 512;
    auto model = load_synthetic(spec);
    const std::vector<int32_t> a_tokens = {1, 7, 3, 12, 40, 5, 9, 22}, b_tokens = {1, 30, 31, 2, 17, 4, 8, 60};
    SessionOptions o;
    o.n_ctx = 64;
    o.n_threads = 2;
    auto solo = [&](const std::vector<int32_t> &t) {
        Session s(*model, o);
        s.feed(t.data(), t.size());
        return std::vector<float>(s.logits(), s.logits() + s.n_vocab());
    };
    const std::vector<float> a_ref = solo(a_tokens), b_ref = solo(b_tokens);
    Session a(*model, o);
    SessionOptions ob = o;
    ob.share_threads_with = &a;
    Session b(*model, ob);
    std::atomic<int> mismatches{0};
    auto run = [&](Session &s, const std::vector<int32_t> &t, const std::vector<float> &ref) {
        for (int round = 0; round < 50; ++round) {
            s.truncate(0);
            for (int32_t tok : t) s.feed(&tok, 1);   // many small runs, so the two threads interleave
            if (std::memcmp(s.logits(), ref.data(), ref.size() * sizeof(float)) != 0) ++mismatches;
        }
    };
    std::thread other([&] { run(b, b_tokens, b_ref); });
    run(a, a_tokens, a_ref);
    other.join();
    assert_int_equal(mismatches.load(), 0);
}

// The fp64 reference of the Gated DeltaNet hybrids (qwen35, qwen35moe, qwen3next), on its own: these
// tests read the synthetic files directly (gguf::File), so they hold whether or not Ember runs the
// families. llama.cpp is the oracle: bench/compare_logits.mjs --reference-only found its logits on these
// F32 files within ~1e-4 relative of the reference's at every position (f32 rounding with f16 K/V, as
// for every other family), and its argmax at each of the 11 teacher-forced positions is pinned here
// (node-llama-cpp 3.22.1's llama.cpp, CPU). A change to the reference or to the synthetic writer that
// moves any of them must be checked against llama.cpp again.
std::vector<std::vector<double>> hybrid_reference(const SyntheticSpec &spec, const std::vector<int32_t> &tokens) {
    const std::vector<uint8_t> bytes = synthetic_model_gguf(spec);
    const gguf::File g = gguf::File::parse(bytes.data(), bytes.size());
    return reference_logits(g, tokens);
}

size_t argmax_of(const Vec &v) { return static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin()); }

void test_hybrid_reference_llamacpp_argmax(void **) {
    const std::vector<int32_t> tokens = {1, 7, 3, 12, 40, 5, 9, 22, 31, 2, 17};
    const std::map<std::string, std::vector<size_t>> llamacpp = {
        {"qwen35", {214, 288, 311, 233, 28, 121, 100, 263, 150, 282, 125}},
        {"qwen35moe", {21, 288, 198, 141, 146, 112, 7, 17, 306, 149, 163}},
        {"qwen3next", {26, 66, 187, 252, 28, 286, 98, 61, 151, 240, 45}},
        // The short-convolution and Mamba-2 hybrids (their files are untied: a tied random output echoes the
        // current token).
        {"lfm2", {157, 295, 198, 199, 139, 83, 293, 268, 181, 127, 5}},
        {"lfm2moe", {296, 96, 271, 263, 285, 275, 36, 112, 14, 29, 14}},
        {"granitehybrid", {214, 288, 144, 12, 120, 286, 100, 45, 181, 282, 227}},
    };
    for (const auto &[family, want] : llamacpp) {
        const auto ref = hybrid_reference(synthetic_family(family), tokens);
        double max_logit = 0, min_margin = 1e300;
        for (size_t t = 0; t < tokens.size(); ++t) {
            const size_t best = argmax_of(ref[t]);
            double second = -1e300;
            for (size_t i = 0; i < ref[t].size(); ++i) {
                assert_true(std::isfinite(ref[t][i]));
                max_logit = std::max(max_logit, std::fabs(ref[t][i]));
                if (i != best) second = std::max(second, ref[t][i]);
            }
            min_margin = std::min(min_margin, ref[t][best] - second);
            if (best != want[t]) fail_msg("%s position %zu: reference argmax %zu, llama.cpp's %zu", family.c_str(), t, best, want[t]);
        }
        std::printf("%-9s reference: argmax = llama.cpp's at 11/11 positions, max|logit| %.1f, smallest top-2 margin %.2f\n",
                    family.c_str(), max_logit, min_margin);
        assert_true(max_logit > 5);      // decisive logits, as the synthetic families' std ~15 intends
        assert_true(min_margin > 1e-3);  // no position is a tie that rounding could flip
    }
}

// The reference's causality and its recurrence: the logits of a prefix are those of the whole sequence's
// first positions, bit for bit (the DeltaNet state and the attention see no later token); with every
// layer a DeltaNet layer (no attention at all), the first token still moves the last position's logits
// (only the recurrent state can carry it), and the state neither explodes nor fades: the logits of a
// 64-token run stay finite and as spread at the end as at the start.
void test_hybrid_reference_causal_and_recurrent(void **) {
    std::vector<int32_t> tokens(64);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 37 + 11) % 300);
    for (const char *family : {"qwen35", "qwen35moe", "qwen3next"}) {
        const SyntheticSpec spec = synthetic_family(family);
        const std::vector<int32_t> head(tokens.begin(), tokens.begin() + 12), prefix(head.begin(), head.begin() + 5);
        const auto whole = hybrid_reference(spec, head), part = hybrid_reference(spec, prefix);
        for (size_t t = 0; t < prefix.size(); ++t)
            for (size_t i = 0; i < whole[t].size(); ++i) assert_true(part[t][i] == whole[t][i]);

        SyntheticSpec recurrent = spec;
        recurrent.recurrent_layers.assign(recurrent.n_layer, true);   // no layer is an attention layer
        recurrent.recurrent_layers.resize(recurrent.n_layer + recurrent.n_nextn, false);   // (MTP blocks are)
        std::vector<int32_t> other = tokens;
        other[0] = 250;
        const auto a = hybrid_reference(recurrent, tokens), b = hybrid_reference(recurrent, other);
        auto spread = [](const Vec &v) {
            double m = 0, ss = 0;
            for (double e : v) m += e / v.size();
            for (double e : v) ss += (e - m) * (e - m) / v.size();
            return std::sqrt(ss);
        };
        double moved = 0;
        for (size_t i = 0; i < a.back().size(); ++i) {
            assert_true(std::isfinite(a.back()[i]));
            moved = std::max(moved, std::fabs(a.back()[i] - b.back()[i]));
        }
        const double first = spread(a[1]), last = spread(a.back());
        std::printf("%-9s all-DeltaNet: token 0 moves position 63's logits by up to %.3g; logit spread %.2f at "
                    "position 1, %.2f at 63\n", family, moved, first, last);
        assert_true(moved > 1e-3);
        assert_true(last > first / 4 && last < first * 4);
    }
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_f32_gqa_rope_freqs_tied),
        cmocka_unit_test(test_qwen2_f16_biases_neox),
        cmocka_unit_test(test_llama_bf16_mha),
        cmocka_unit_test(test_llama_q8_0),
        cmocka_unit_test(test_qwen2_q4_0),
        cmocka_unit_test(test_qwen3_f32_qk_norm),
        cmocka_unit_test(test_qwen3_q8_0),
        cmocka_unit_test(test_llama_q4_k_m),
        cmocka_unit_test(test_qwen2_q5_k),
        cmocka_unit_test(test_llama_q4_1),
        cmocka_unit_test(test_qwen2_q5_0),
        cmocka_unit_test(test_llama_q5_1),
        cmocka_unit_test(test_missing_bias_is_an_error),
        cmocka_unit_test(test_sessions_sharing_threads),
        cmocka_unit_test(test_hybrid_reference_llamacpp_argmax),
        cmocka_unit_test(test_hybrid_reference_causal_and_recurrent),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
