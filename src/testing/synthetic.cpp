#include "testing/synthetic.hpp"

#include "core/error.hpp"
#include "core/fp16.hpp"
#include "cpu/kernels.hpp"
#include "gguf/gguf.hpp"
#include "testing/spm_vocab.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <map>
#include <random>
#include <thread>

namespace ember {

namespace {

class Rng {
public:
    explicit Rng(uint64_t seed) : gen_(seed) {}
    float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(gen_); }

private:
    std::mt19937_64 gen_;
};

// Which type a matrix gets. With a mix, by the matrix's role; then a type whose blocks do not divide the
// row length falls back the way llama.cpp's quantizer falls back: a K-quant to the legacy format of
// about its size (Q2_K, Q3_K -> Q4_0; Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0; IQ4_XS -> IQ4_NL), a
// 32-element format to F16.
//
// Q4_K_M, our recipe in the spirit of llama.cpp's: Q4_K for every matrix except
//  - the output matrix (the embedding matrix when the output is tied to it): Q6_K, since every logit
//    goes through it;
//  - attn_v and ffn_down in about half the layers — the even-numbered ones and the last, so the first
//    and last layers, whose errors carry furthest or reach the logits directly, are among them: Q6_K.
//    These two feed the residual stream directly and are the most sensitive in each layer.
// That is about 4.9 bits per weight at TinyLlama's shape, against Q4_0's 4.5.
enum class Role { Embedding, Output, AttnV, FfnDown, Other };

DType matrix_type(const SyntheticSpec &s, Role role, uint32_t layer, uint32_t n_in) {
    DType t = s.type;
    if (s.mix == WeightMix::Q4_K_M) {
        const bool more_bits = layer % 2 == 0 || layer + 1 == s.n_layer;
        const bool output = role == Role::Output || (role == Role::Embedding && s.tied_output);
        t = output || ((role == Role::AttnV || role == Role::FfnDown) && more_bits) ? DType::Q6_K : DType::Q4_K;
    }
    if (n_in % QK_K != 0) {
        if (t == DType::Q2_K || t == DType::Q3_K) t = DType::Q4_0;
        if (t == DType::Q4_K) t = DType::Q5_0;
        if (t == DType::Q5_K) t = DType::Q5_1;
        if (t == DType::Q6_K) t = DType::Q8_0;
        if (t == DType::IQ4_XS) t = DType::IQ4_NL;
    }
    if (n_in % dtype_info(t).block_size != 0) t = DType::F16;
    return t;
}

// Encodes n_out rows of n_in floats in `type`.
std::vector<uint8_t> encode(const std::vector<float> &w, DType type, int64_t n_in, int64_t n_out) {
    const size_t row_bytes = dtype_row_bytes(type, static_cast<uint64_t>(n_in));
    std::vector<uint8_t> out(row_bytes * static_cast<size_t>(n_out));
    if (type != DType::F32 && type != DType::F16 && type != DType::BF16 &&
        (dtype_info(type).block_size == 1 || !dtype_info(type).supported))
        fail(EMBER_ERR_UNSUPPORTED, "synthetic models cannot store %s", dtype_name(type));
    auto rows = [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const float *src = w.data() + r * n_in;
            uint8_t *dst = out.data() + static_cast<size_t>(r) * row_bytes;
            switch (type) {
            case DType::F32: std::memcpy(dst, src, row_bytes); break;
            case DType::F16:
                for (int64_t i = 0; i < n_in; ++i) reinterpret_cast<uint16_t *>(dst)[i] = fp32_to_fp16(src[i]);
                break;
            case DType::BF16:
                for (int64_t i = 0; i < n_in; ++i) reinterpret_cast<uint16_t *>(dst)[i] = fp32_to_bf16(src[i]);
                break;
            default: cpu::quantize_row(type, src, dst, n_in);
            }
        }
    };
    // Rows are independent, so large matrices (an 8B model's) are encoded by all cores: the bytes are the
    // same whatever the split.
    const int64_t n_threads = n_in * n_out >= (int64_t{1} << 22)
                                  ? std::max<int64_t>(1, std::min<int64_t>(std::thread::hardware_concurrency(), 32))
                                  : 1;
    std::vector<std::thread> pool;
    for (int64_t t = 1; t < n_threads; ++t)
        pool.emplace_back(rows, n_out * t / n_threads, n_out * (t + 1) / n_threads);
    rows(0, n_out / n_threads);
    for (auto &th : pool) th.join();
    return out;
}

} // namespace

std::vector<uint8_t> synthetic_model_gguf(const SyntheticSpec &s) {
    if (s.n_vocab < 8 || s.n_head == 0 || s.n_head_kv == 0 || (!s.head_dim && s.n_embd % s.n_head) ||
        s.n_head % s.n_head_kv)
        fail(EMBER_ERR_INVALID_ARGUMENT, "inconsistent synthetic model shape");
    const bool hybrid = s.full_attn_interval > 0;
    if (hybrid && (!s.ssm_groups || !s.ssm_heads || !s.ssm_state || !s.ssm_conv || s.ssm_heads % s.ssm_groups ||
                   (!s.recurrent_layers.empty() && s.recurrent_layers.size() != s.n_layer + s.n_nextn)))
        fail(EMBER_ERR_INVALID_ARGUMENT, "inconsistent synthetic DeltaNet shape");
    // LFM2 and Granite 4: recurrent layers named by recurrent_layers, head_count_kv per layer.
    const bool per_layer_kv = s.shortconv > 0 || s.mamba2;
    if (per_layer_kv && s.recurrent_layers.size() != s.n_layer)
        fail(EMBER_ERR_INVALID_ARGUMENT, "inconsistent synthetic hybrid layers");
    // Whether layer l is a DeltaNet layer (see SyntheticSpec::recurrent_layers).
    auto recurrent = [&](uint32_t l) {
        if (per_layer_kv) return l < s.n_layer && bool(s.recurrent_layers[l]);
        if (!hybrid || l >= s.n_layer) return false;   // MTP blocks are attention blocks
        return s.recurrent_layers.empty() ? (l + 1) % s.full_attn_interval != 0 : bool(s.recurrent_layers[l]);
    };
    Rng rng(s.seed);
    gguf::Writer w;
    const std::string a = s.arch + ".";
    const uint32_t head_dim = s.head_dim ? s.head_dim : s.n_embd / s.n_head;
    w.add_string("general.architecture", s.arch);
    w.add_string("general.name", "synthetic " + s.arch);
    w.add_u32(a + "context_length", s.n_ctx);
    w.add_u32(a + "embedding_length", s.n_embd);
    w.add_u32(a + "block_count", s.n_layer + s.n_nextn);
    if (s.n_nextn) w.add_u32(a + "nextn_predict_layers", s.n_nextn);
    w.add_u32(a + "feed_forward_length", s.n_ff);
    w.add_u32(a + "attention.head_count", s.n_head);
    if (per_layer_kv) {
        std::vector<int32_t> kv(s.n_layer);
        for (uint32_t l = 0; l < s.n_layer; ++l) kv[l] = recurrent(l) ? 0 : static_cast<int32_t>(s.n_head_kv);
        w.add_array_i32(a + "attention.head_count_kv", kv);
    } else {
        w.add_u32(a + "attention.head_count_kv", s.n_head_kv);
    }
    if (s.shortconv) w.add_u32(a + "shortconv.l_cache", s.shortconv);
    if (s.arch == "lfm2moe") w.add_u32(a + "expert_gating_func", 2);   // sigmoid
    if (s.n_dense_lead) w.add_u32(a + "leading_dense_block_count", s.n_dense_lead);
    if (s.moe_layer_step) w.add_u32(a + "interleave_moe_layer_step", s.moe_layer_step);
    if (s.no_rope) w.add_bool(a + "rope.scaling.finetuned", false);
    if (s.mamba2) {
        w.add_u32(a + "ssm.conv_kernel", s.ssm_conv);
        w.add_u32(a + "ssm.inner_size", s.ssm_inner);
        w.add_u32(a + "ssm.state_size", s.ssm_state);
        w.add_u32(a + "ssm.time_step_rank", s.ssm_heads);
        w.add_u32(a + "ssm.group_count", s.ssm_groups);
    }
    w.add_f32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
    w.add_f32(a + "rope.freq_base", s.rope_theta);
    const uint32_t n_rot = s.n_rot ? s.n_rot : head_dim;
    w.add_u32(a + "rope.dimension_count", n_rot);
    if (s.head_dim) w.add_u32(a + "attention.key_length", head_dim), w.add_u32(a + "attention.value_length", head_dim);
    if (s.n_expert) {
        w.add_u32(a + "expert_count", s.n_expert);
        w.add_u32(a + "expert_used_count", s.n_expert_used);
        if (s.n_ff_exp) w.add_u32(a + "expert_feed_forward_length", s.n_ff_exp);
        if (s.n_ff_shexp) w.add_u32(a + "expert_shared_feed_forward_length", s.n_ff_shexp);
    }
    if (hybrid) {
        w.add_u32(a + "full_attention_interval", s.full_attn_interval);
        if (!s.recurrent_layers.empty()) w.add_array_bool(a + "attention.recurrent_layers", s.recurrent_layers);
        w.add_u32(a + "ssm.conv_kernel", s.ssm_conv);
        w.add_u32(a + "ssm.inner_size", s.ssm_heads * s.ssm_state);
        w.add_u32(a + "ssm.state_size", s.ssm_state);
        w.add_u32(a + "ssm.time_step_rank", s.ssm_heads);
        w.add_u32(a + "ssm.group_count", s.ssm_groups);
    }
    if (!s.rope_sections.empty()) w.add_array_i32(a + "rope.dimension_sections", s.rope_sections);
    if (s.window) w.add_u32(a + "attention.sliding_window", s.window);
    if (s.swa_pattern) w.add_u32(a + "attention.sliding_window_pattern", s.swa_pattern);
    if (!s.swa_layers.empty()) w.add_array_bool(a + "attention.sliding_window_pattern", s.swa_layers);
    const bool gemma4 = s.arch == "gemma4";
    // Whether layer l is a window layer of a per-layer pattern, and its head size.
    auto window_layer = [&](uint32_t l) { return l < s.swa_layers.size() && s.swa_layers[l]; };
    auto layer_head_dim = [&](uint32_t l) { return window_layer(l) && s.head_dim_swa ? s.head_dim_swa : head_dim; };
    if (gemma4) {
        const uint32_t hd_swa = s.head_dim_swa ? s.head_dim_swa : head_dim;
        w.add_u32(a + "attention.key_length_swa", hd_swa), w.add_u32(a + "attention.value_length_swa", hd_swa);
        w.add_u32(a + "rope.dimension_count_swa", hd_swa);
        w.add_u32(a + "attention.shared_kv_layers", s.shared_kv_layers);
        w.add_u32(a + "embedding_length_per_layer_input", s.n_embd_per_layer);
    }
    if (s.rope_theta_swa > 0) w.add_f32(a + "rope.freq_base_swa", s.rope_theta_swa);
    if (s.attn_softcap > 0) w.add_f32(a + "attn_logit_softcapping", s.attn_softcap);
    if (s.final_softcap > 0) w.add_f32(a + "final_logit_softcapping", s.final_softcap);
    if (s.rope_scaling == "linear" || s.rope_scaling == "yarn") {
        w.add_string(a + "rope.scaling.type", s.rope_scaling);
        w.add_f32(a + "rope.scaling.factor", s.rope_factor);
        if (s.rope_orig_ctx) w.add_u32(a + "rope.scaling.original_context_length", s.rope_orig_ctx);
    }
    // LongRoPE's switch point from the short factors to the long ones (Phi-3's converters write it).
    if (s.rope_scaling == "longrope" && s.rope_orig_ctx)
        w.add_u32(a + "rope.scaling.original_context_length", s.rope_orig_ctx);
    if (s.rope_attn_factor > 0) w.add_f32(a + "rope.scaling.attn_factor", s.rope_attn_factor);
    if (s.embedding_scale > 0) w.add_f32(a + "embedding_scale", s.embedding_scale);
    if (s.residual_scale > 0) w.add_f32(a + "residual_scale", s.residual_scale);
    if (s.attention_scale > 0) w.add_f32(a + "attention.scale", s.attention_scale);
    if (s.logit_scale > 0) w.add_f32(a + "logit_scale", s.logit_scale);
    for (const auto &[key, v] : s.extra_f32) w.add_f32(a + key, v);
    for (const auto &[key, v] : s.extra_u32) w.add_u32(a + key, v);
    if (s.pooling_type) w.add_u32(a + "pooling_type", s.pooling_type);
    if (s.dense_features) {
        w.add_u32(a + "dense_2_feat_in", s.n_embd), w.add_u32(a + "dense_2_feat_out", s.dense_features);
        w.add_u32(a + "dense_3_feat_in", s.dense_features), w.add_u32(a + "dense_3_feat_out", s.n_embd);
    }

    // Vocabulary: <unk>, <s>, </s>; the 256 byte tokens when there is room; the control tokens; then "▁",
    // single letters and numbered pieces up to n_vocab.
    SpmVocab vocab;
    if (s.n_vocab >= 3 + 256 + 32) vocab.add_byte_tokens();
    for (const std::string &c : s.control_tokens) vocab.add(c, TokenType::CONTROL);
    for (uint32_t i = 0; vocab.tokens.size() < s.n_vocab; ++i) {
        std::string t = i == 0 ? "\xe2\x96\x81" : std::string(1, static_cast<char>('a' + (i - 1) % 26));
        if (i > 26) t = "\xe2\x96\x81" + t + std::to_string(i);
        vocab.add(t);
    }
    vocab.write(w);

    // A matrix (or, with n_expert, a stack of n_expert matrices: a 3-D tensor) of weights uniform in
    // +-gain/sqrt(n_in).
    std::map<std::string, std::vector<uint8_t>> first_layer;  // repeat_layers: by name past "blk.N.", type and shape
    auto matrix = [&](const std::string &name, uint32_t n_in, uint32_t n_out, Role role = Role::Other, uint32_t layer = 0,
                      uint32_t n_expert = 0, float gain = 1.0f) {
        const uint32_t n_mat = n_expert ? n_expert : 1;
        const DType type = matrix_type(s, role, layer, n_in);
        const size_t dot = name.find('.', 4);
        const std::string key = name.compare(0, 4, "blk.") == 0 && dot != std::string::npos
                                    ? name.substr(dot) + dtype_name(type) + "/" + std::to_string(n_in) + "x" + std::to_string(n_out)
                                    : std::string();
        std::vector<uint8_t> &bytes = first_layer[key];
        if (!s.repeat_layers || key.empty() || bytes.empty()) {
            std::vector<float> v(static_cast<size_t>(n_in) * n_out * n_mat);
            const float r = gain / std::sqrt(static_cast<float>(n_in));
            for (float &x : v) x = rng.uniform(-r, r);
            bytes = encode(v, type, n_in, static_cast<int64_t>(n_out) * n_mat);
        }
        if (n_expert)
            w.add_tensor(name, type, {n_in, n_out, n_expert}, bytes.data(), bytes.size());
        else
            w.add_tensor(name, type, {n_in, n_out}, bytes.data(), bytes.size());
    };
    auto vector = [&](const std::string &name, uint32_t n, float lo, float hi, uint32_t n2 = 0) {
        std::vector<float> v(static_cast<size_t>(n) * (n2 ? n2 : 1));
        for (float &x : v) x = rng.uniform(lo, hi);
        if (n2)
            w.add_tensor(name, DType::F32, {n, n2}, v.data(), v.size() * sizeof(float));
        else
            w.add_tensor(name, DType::F32, {n}, v.data(), v.size() * sizeof(float));
    };
    // Logits are sums over n_embd of a normed row (rms ~1) times output weights uniform in +-r: their
    // standard deviation is r sqrt(n_embd / 3).
    const float out_range = s.logit_std > 0 ? s.logit_std * std::sqrt(3.0f / static_cast<float>(s.n_embd)) : 0.0f;
    {
        // The embedding rows need O(1) entries (they are the residual stream's start), or, tied to the
        // output, the range that makes the logits decisive.
        std::vector<float> v(static_cast<size_t>(s.n_embd) * s.n_vocab);
        const float r = s.tied_output && out_range > 0 ? out_range : 1.0f;
        for (float &x : v) x = rng.uniform(-r, r);
        const DType type = matrix_type(s, Role::Embedding, 0, s.n_embd);
        const auto bytes = encode(v, type, s.n_embd, s.n_vocab);
        w.add_tensor("token_embd.weight", type, {s.n_embd, s.n_vocab}, bytes.data(), bytes.size());
    }
    vector(s.shortconv ? "token_embd_norm.weight" : "output_norm.weight", s.n_embd, 0.8f, 1.2f);
    if (!s.tied_output)
        matrix("output.weight", s.n_embd, s.n_vocab, Role::Output, 0, 0,
               out_range > 0 ? out_range * std::sqrt(static_cast<float>(s.n_embd)) : 1.0f);
    if (s.rope_freqs) vector("rope_freqs.weight", n_rot / 2, 1.0f, 4.0f);
    if (s.dense_features) {
        matrix("dense_2.weight", s.n_embd, s.dense_features);
        matrix("dense_3.weight", s.dense_features, s.n_embd);
    }
    if (s.n_embd_per_layer) {
        // The per-layer embeddings: O(1) entries, as the token embeddings'.
        const uint32_t n_pl = s.n_embd_per_layer * s.n_layer;
        matrix("per_layer_token_embd.weight", n_pl, s.n_vocab, Role::Other, 0, 0, std::sqrt(static_cast<float>(n_pl)));
        matrix("per_layer_model_proj.weight", s.n_embd, n_pl);
        vector("per_layer_proj_norm.weight", s.n_embd_per_layer, 0.8f, 1.2f);
    }
    if (s.rope_scaling == "longrope") {
        vector("rope_factors_short.weight", n_rot / 2, 1.0f, 3.0f);
        vector("rope_factors_long.weight", n_rot / 2, 1.0f, 30.0f);
    }
    // An attention layer's tensors.
    auto attention = [&](const std::string &p, uint32_t l) {
        const uint32_t head_dim = layer_head_dim(l), nq = s.n_head * head_dim, nkv = s.n_head_kv * head_dim;
        if (gemma4) {   // no K/V of their own in the last shared_kv_layers layers
            matrix(p + "attn_q.weight", s.n_embd, nq);
            vector(p + "attn_q_norm.weight", head_dim, 0.8f, 1.2f);
            if (l + s.shared_kv_layers < s.n_layer) {
                matrix(p + "attn_k.weight", s.n_embd, nkv);
                matrix(p + "attn_v.weight", s.n_embd, nkv, Role::AttnV, l);
                vector(p + "attn_k_norm.weight", head_dim, 0.8f, 1.2f);
            }
            matrix(p + "attn_output.weight", nq, s.n_embd);
            return;
        }
        if (s.fused) {
            matrix(p + "attn_qkv.weight", s.n_embd, nq + 2 * nkv, Role::AttnV, l);
        } else {
            matrix(p + "attn_q.weight", s.n_embd, hybrid ? 2 * nq : nq);   // Qwen3.5 hybrids: each head's gate rows follow its query rows
            matrix(p + "attn_k.weight", s.n_embd, nkv);
            matrix(p + "attn_v.weight", s.n_embd, nkv, Role::AttnV, l);
        }
        if (s.qkv_bias) {
            vector(p + "attn_q.bias", nq, -0.5f, 0.5f);
            vector(p + "attn_k.bias", nkv, -0.5f, 0.5f);
            vector(p + "attn_v.bias", nkv, -0.5f, 0.5f);
        }
        if (s.qk_norm) {
            vector(p + "attn_q_norm.weight", s.qk_norm_full ? nq : head_dim, 0.8f, 1.2f);
            vector(p + "attn_k_norm.weight", s.qk_norm_full ? nkv : head_dim, 0.8f, 1.2f);
        }
        if (s.sinks) vector(p + "attn_sinks.weight", s.n_head, -1.0f, 2.0f);
        matrix(p + "attn_output.weight", nq, s.n_embd);
        if (s.out_bias) vector(p + "attn_output.bias", s.n_embd, -0.5f, 0.5f);
    };
    // A Gated DeltaNet layer's tensors. Ranges chosen so that the recurrence neither explodes nor fades:
    // per-token decay exp(-A softplus(alpha + dt_bias)) with A = exp(A_log), A_log in [-2, 0] (so about
    // 0.4 to 0.95), update strength beta = sigmoid(...) around 1/2, the convolution's inputs O(1) (gain 2)
    // and its taps in +-0.5.
    auto delta_net = [&](const std::string &p, uint32_t l) {
        const uint32_t key_dim = s.ssm_groups * s.ssm_state, value_dim = s.ssm_heads * s.ssm_state;
        const uint32_t conv_dim = 2 * key_dim + value_dim;
        if (s.ssm_fused_in) {
            matrix(p + "ssm_in.weight", s.n_embd, conv_dim + value_dim, Role::AttnV, l, 0, 2.0f);
        } else {
            matrix(p + "attn_qkv.weight", s.n_embd, conv_dim, Role::AttnV, l, 0, 2.0f);
            matrix(p + "attn_gate.weight", s.n_embd, value_dim, Role::Other, l);
        }
        if (s.ssm_ba) {
            matrix(p + "ssm_ba.weight", s.n_embd, 2 * s.ssm_heads, Role::Other, l);
        } else {
            matrix(p + "ssm_beta.weight", s.n_embd, s.ssm_heads, Role::Other, l);
            matrix(p + "ssm_alpha.weight", s.n_embd, s.ssm_heads, Role::Other, l);
        }
        vector(p + "ssm_conv1d.weight", s.ssm_conv, -0.5f, 0.5f, conv_dim);
        vector(p + "ssm_dt.bias", s.ssm_heads, -0.5f, 0.5f);
        std::vector<float> a(s.ssm_heads);
        for (float &v : a) v = -std::exp(rng.uniform(-2.0f, 0.0f));
        w.add_tensor(p + "ssm_a", DType::F32, {s.ssm_heads}, a.data(), a.size() * sizeof(float));
        vector(p + "ssm_norm.weight", s.ssm_state, 0.8f, 1.2f);
        matrix(p + "ssm_out.weight", value_dim, s.n_embd, Role::Other, l);
    };
    // LFM2's short-convolution block: in_proj (B, C and x rows), a convolution of `shortconv` taps, out_proj.
    auto short_conv = [&](const std::string &p, uint32_t l) {
        matrix(p + "shortconv.in_proj.weight", s.n_embd, 3 * s.n_embd, Role::AttnV, l, 0, 2.0f);
        vector(p + "shortconv.conv.weight", s.shortconv, -0.5f, 0.5f, s.n_embd);
        matrix(p + "shortconv.out_proj.weight", s.n_embd, s.n_embd, Role::Other, l);
    };
    // A Mamba-2 layer (Granite 4): ssm_in gives z, x B C and dt; the convolution (with bias) and SiLU; the
    // scan with A = -exp(A_log), A_log in [-2, 1], D around 1 and dt bias in [-2, 0] (softplus 0.1..0.7);
    // the gated group norm; ssm_out.
    auto mamba2 = [&](const std::string &p, uint32_t l) {
        const uint32_t conv_dim = s.ssm_inner + 2 * s.ssm_groups * s.ssm_state;
        matrix(p + "ssm_in.weight", s.n_embd, s.ssm_inner + conv_dim + s.ssm_heads, Role::AttnV, l, 0, 2.0f);
        vector(p + "ssm_conv1d.weight", s.ssm_conv, -0.5f, 0.5f, conv_dim);
        vector(p + "ssm_conv1d.bias", conv_dim, -0.2f, 0.2f);
        vector(p + "ssm_dt.bias", s.ssm_heads, -2.0f, 0.0f);
        std::vector<float> a(s.ssm_heads);
        for (float &v : a) v = -std::exp(rng.uniform(-2.0f, 1.0f));
        w.add_tensor(p + "ssm_a", DType::F32, {1, s.ssm_heads}, a.data(), a.size() * sizeof(float));
        vector(p + "ssm_d", 1, 0.5f, 1.5f, s.ssm_heads);
        vector(p + "ssm_norm.weight", s.ssm_inner / s.ssm_groups, 0.8f, 1.2f, s.ssm_groups);
        matrix(p + "ssm_out.weight", s.ssm_inner, s.n_embd, Role::Other, l);
    };
    for (uint32_t l = 0; l < s.n_layer + s.n_nextn; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        if (s.pre_norms) vector(p + "attn_norm.weight", s.n_embd, 0.8f, 1.2f);
        if (recurrent(l) && s.shortconv)
            short_conv(p, l);
        else if (recurrent(l) && s.mamba2)
            mamba2(p, l);
        else if (recurrent(l))
            delta_net(p, l);
        else
            attention(p, l);
        if (s.post_norms) vector(p + "post_attention_norm.weight", s.n_embd, 0.8f, 1.2f);
        if (s.pre_norms) vector(p + (s.oss_norm_names ? "post_attention_norm.weight" : "ffn_norm.weight"), s.n_embd, 0.8f, 1.2f);
        if (s.gemma4_moe) {
            // Gemma 4's MoE layers: the dense FFN (ffn_norm, post_ffw_norm_1) beside the experts
            // (pre_ffw_norm_2, post_ffw_norm_2), the router reading a norm of x times its scale.
            matrix(p + "ffn_gate.weight", s.n_embd, s.n_ff);
            matrix(p + "ffn_up.weight", s.n_embd, s.n_ff);
            matrix(p + "ffn_down.weight", s.n_ff, s.n_embd, Role::FfnDown, l);
            vector(p + "post_ffw_norm_1.weight", s.n_embd, 0.8f, 1.2f);
            vector(p + "pre_ffw_norm_2.weight", s.n_embd, 0.8f, 1.2f);
            vector(p + "post_ffw_norm_2.weight", s.n_embd, 0.8f, 1.2f);
            vector(p + "ffn_gate_inp.scale", s.n_embd, 0.5f, 1.5f);
        }
        if (s.n_expert && l >= s.n_dense_lead && (s.moe_layer_step == 0 || (l + 1) % s.moe_layer_step == 0)) {
            const uint32_t ne = s.n_expert, nff = s.n_ff_exp ? s.n_ff_exp : s.n_ff;
            // The router stays F32, as llama.cpp's quantizer leaves ffn_gate_inp; its logits spread wide
            // (std ~4, as trained routers' are decisive) so that the rounding of quantized activations
            // before it rarely reorders the experts (a reordering is a jump, not a rounding error).
            std::vector<float> router(static_cast<size_t>(s.n_embd) * ne);
            const float rr = 8.0f / std::sqrt(static_cast<float>(s.n_embd));
            for (float &x : router) x = rng.uniform(-rr, rr);
            w.add_tensor(p + "ffn_gate_inp.weight", DType::F32, {s.n_embd, ne}, router.data(), router.size() * sizeof(float));
            matrix(p + "ffn_gate_exps.weight", s.n_embd, nff, Role::Other, l, ne);
            matrix(p + "ffn_up_exps.weight", s.n_embd, nff, Role::Other, l, ne);
            matrix(p + "ffn_down_exps.weight", nff, s.n_embd, Role::FfnDown, l, ne);
            if (s.n_dense_lead) vector(p + "exp_probs_b.bias", ne, -0.3f, 0.3f);   // LFM2-MoE's selection bias
            if (s.expert_bias) {
                vector(p + "ffn_gate_inp.bias", ne, -0.5f, 0.5f);
                vector(p + "ffn_gate_exps.bias", nff, -0.5f, 0.5f, ne);
                vector(p + "ffn_up_exps.bias", nff, -0.5f, 0.5f, ne);
                vector(p + "ffn_down_exps.bias", s.n_embd, -0.5f, 0.5f, ne);
            }
            if (s.n_ff_shexp) {
                // The shared expert's gate (one row: sigmoid of its product with the normed input), spread
                // so that it ranges over most of (0, 1).
                if (!s.mamba2 && !s.moe_layer_step)   // Granite 4's and Llama 4's shared experts have no gate
                    vector(p + "ffn_gate_inp_shexp.weight", s.n_embd, -2.0f / std::sqrt(static_cast<float>(s.n_embd)),
                           2.0f / std::sqrt(static_cast<float>(s.n_embd)));
                matrix(p + "ffn_gate_shexp.weight", s.n_embd, s.n_ff_shexp, Role::Other, l);
                matrix(p + "ffn_up_shexp.weight", s.n_embd, s.n_ff_shexp, Role::Other, l);
                matrix(p + "ffn_down_shexp.weight", s.n_ff_shexp, s.n_embd, Role::FfnDown, l);
            }
        } else if (s.fused) {
            matrix(p + "ffn_up.weight", s.n_embd, 2 * s.n_ff);
            matrix(p + "ffn_down.weight", s.n_ff, s.n_embd, Role::FfnDown, l);
        } else {
            matrix(p + "ffn_gate.weight", s.n_embd, s.n_ff);
            matrix(p + "ffn_up.weight", s.n_embd, s.n_ff);
            matrix(p + "ffn_down.weight", s.n_ff, s.n_embd, Role::FfnDown, l);
        }
        if (s.post_norms) vector(p + "post_ffw_norm.weight", s.n_embd, 0.8f, 1.2f);
        if (s.n_embd_per_layer) {
            matrix(p + "inp_gate.weight", s.n_embd, s.n_embd_per_layer, Role::Other, l);
            matrix(p + "proj.weight", s.n_embd_per_layer, s.n_embd, Role::Other, l);
            vector(p + "post_norm.weight", s.n_embd, 0.8f, 1.2f);
        }
        if (s.layer_scale) vector(p + "layer_output_scale.weight", 1, 0.9f, 1.1f);
        if (l >= s.n_layer) {   // an MTP block's own parts
            matrix(p + "nextn.eh_proj.weight", 2 * s.n_embd, s.n_embd, Role::Other, l);
            vector(p + "nextn.enorm.weight", s.n_embd, 0.8f, 1.2f);
            vector(p + "nextn.hnorm.weight", s.n_embd, 0.8f, 1.2f);
            vector(p + "nextn.shared_head_norm.weight", s.n_embd, 0.8f, 1.2f);
        }
    }
    return w.to_bytes();
}

const std::vector<std::string> &synthetic_families() {
    static const std::vector<std::string> names = {"llama",  "mixtral", "qwen2",   "qwen3",  "qwen3moe",
                                                   "gemma2", "gemma3",  "phi3",    "granite", "olmo2",
                                                   "gpt-oss", "qwen35", "qwen35moe", "qwen3next",
                                                   "olmo3-yarn", "qwen3-yarn", "smollm3", "mistral3",
                                                   "gemma4", "gemma4moe", "gemma3-p2", "gemma3-layers",
                                                   "gemma3-global", "lfm2", "lfm2moe", "granitehybrid",
                                                   "llama4", "llama4-chunked"};
    return names;
}

SyntheticSpec synthetic_family(const std::string &arch) {
    SyntheticSpec s;
    s.arch = arch;
    s.n_vocab = 320;   // the byte tokens fit: any text tokenizes (other runtimes read the file too)
    s.n_embd = 256;
    s.n_ff = 256;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_layer = 2;
    s.tied_output = false;
    s.logit_std = 15.0f;
    if (arch == "mixtral") {
        s.arch = "llama";
        s.n_expert = 8, s.n_expert_used = 2;
    } else if (arch == "qwen2") {
        s.qkv_bias = true;
    } else if (arch == "qwen3-yarn") {
        // Qwen3 with YaRN x4 and the attention factor the configuration states (the default's value,
        // 1 + 0.1 ln 4, written explicitly): the factor replaces YaRN's own magnitude.
        s.arch = "qwen3";
        s.qk_norm = true;
        s.head_dim = 128;
        s.rope_theta = 1000000.0f;
        s.rope_scaling = "yarn", s.rope_factor = 4.0f, s.rope_orig_ctx = 4096;
        s.extra_f32 = {{"rope.scaling.yarn_attn_factor", 1.0f + 0.1f * std::log(4.0f)}};
    } else if (arch == "olmo3-yarn") {
        // OLMo 3 (written as olmo2) with YaRN x8: three window layers, which rope unscaled, then a global
        // one, which ropes with YaRN.
        s.arch = "olmo2";
        s.pre_norms = false, s.post_norms = true, s.qk_norm = true, s.qk_norm_full = true;
        s.n_layer = 4;
        s.window = 4;
        s.rope_theta = 500000.0f;
        s.rope_scaling = "yarn", s.rope_factor = 8.0f, s.rope_orig_ctx = 4096;
    } else if (arch == "mistral3") {
        // Mistral 3: YaRN x16 over an original context of 8 with its own betas and log multiplier 1 (so
        // the magnitude is 1), the attention temperature 0.1 (biting from position 8), attn_output bias.
        s.rope_theta = 1000000.0f;
        s.rope_scaling = "yarn", s.rope_factor = 16.0f, s.rope_orig_ctx = 8;
        s.out_bias = true;
        s.extra_f32 = {{"rope.scaling.yarn_beta_fast", 16.0f}, {"rope.scaling.yarn_beta_slow", 2.0f},
                       {"rope.scaling.yarn_log_multiplier", 1.0f}, {"attention.temperature_scale", 0.1f}};
    } else if (arch == "smollm3") {
        // SmolLM3: Llama's layers with no rope in every fourth (layer 3 here). (The checkpoints tie the
        // output to the embedding; a separate output here keeps the greedy text from echoing its input.)
        s.n_layer = 4;
        s.rope_theta = 5000000.0f;
    } else if (arch == "qwen3" || arch == "qwen3moe") {
        s.qk_norm = true;
        s.head_dim = 128;   // q wider than the residual stream, as in Qwen3's checkpoints
        if (arch == "qwen3moe") s.n_expert = 8, s.n_expert_used = 2, s.n_ff_exp = 256, s.n_ff = 512;
    } else if (arch == "gemma3-p2" || arch == "gemma3-layers" || arch == "gemma3-global") {
        // Gemma 3's other window layouts: a pattern of period 2 (a number), one flag per layer, and no
        // attention.sliding_window at all (every layer global).
        s = synthetic_family("gemma3");
        if (arch == "gemma3-p2") s.swa_pattern = 2;
        if (arch == "gemma3-layers") s.swa_layers = {true, false, false, true, true, false};
        if (arch == "gemma3-global") s.window = 0;
    } else if (arch == "gemma-embedding") {
        // EmbeddingGemma's layout on gemma3's small shape: no rope scaling, a window wide enough for the
        // tests' texts (a bidirectional window is symmetric: texts up to 65 tokens), mean pooling, and the
        // dense projections.
        s = synthetic_family("gemma3");
        s.arch = arch;
        s.rope_scaling.clear(), s.rope_factor = 1.0f;
        s.window = 128;
        s.logit_std = 0;
        s.pooling_type = 1;
        s.dense_features = 512;
    } else if (arch == "gemma2" || arch == "gemma3") {
        s.post_norms = true;
        s.tied_output = true;
        s.window = 4;
        if (arch == "gemma2") {
            s.attn_softcap = 2.0f;     // small enough to bite on these scores
            s.final_softcap = 20.0f;
        } else {
            s.qk_norm = true;
            s.n_layer = 6;             // five window layers, then a global one
            s.rope_theta = 1000000.0f;
            s.rope_scaling = "linear", s.rope_factor = 8.0f;
        }
    } else if (arch == "phi3") {
        s.fused = true;
        s.head_dim = 64;
        s.control_tokens = {"<|endoftext|>", "<|end|>", "<|user|>", "<|assistant|>", "<|system|>"};
        s.n_rot = 48;                  // partial rotary, as Phi-4-mini's 96 of 128
        s.rope_scaling = "longrope";
        s.rope_attn_factor = 1.19f;
    } else if (arch == "granite") {
        s.embedding_scale = 12.0f, s.residual_scale = 0.22f, s.attention_scale = 0.0125f, s.logit_scale = 0.5f;
        s.tied_output = true;
    } else if (arch == "olmo2") {
        s.pre_norms = false, s.post_norms = true, s.qk_norm = true, s.qk_norm_full = true;
    } else if (arch == "gpt-oss") {
        s.head_dim = 64;
        s.qkv_bias = true, s.out_bias = true, s.sinks = true, s.oss_norm_names = true;
        s.window = 4;
        s.rope_theta = 150000.0f;
        s.rope_scaling = "yarn", s.rope_factor = 32.0f, s.rope_orig_ctx = 4096;
        s.n_expert = 8, s.n_expert_used = 4, s.n_ff_exp = 256, s.expert_bias = true;
    } else if (arch == "qwen35" || arch == "qwen35moe" || arch == "qwen3next") {
        // Qwen3.5 / Qwen3.6 (dense and MoE) and Qwen3-Next: three Gated DeltaNet layers, then one gated
        // attention layer (layers 3 and 7; qwen35moe: see below), as the real checkpoints' layout; attention with q/k norms,
        // head width 64 and partial rotary (16 of 64; Qwen3.5's rope sections, which for text reduce to
        // plain NEOX rope); DeltaNet with 2 key heads and 4 value heads of width 64.
        s.n_layer = 8;
        s.full_attn_interval = 4;
        s.head_dim = 64;
        s.n_rot = 16;
        s.qk_norm = true;
        s.oss_norm_names = true;
        s.ssm_groups = 2, s.ssm_heads = 4, s.ssm_state = 64, s.ssm_conv = 4;
        if (arch != "qwen3next") s.rope_sections = {3, 3, 2, 0};
        s.ssm_ba = s.ssm_fused_in = arch == "qwen3next";   // the older files' layout: the harder one to read
        if (arch != "qwen35") s.n_expert = 8, s.n_expert_used = 2, s.n_ff_exp = 256, s.n_ff_shexp = 256, s.n_ff = 512;
        // qwen35moe also writes attention.recurrent_layers, as newer converters do, and with attention in
        // layers 1 and 7 instead: it decides where present, and a reader that took the interval instead
        // gets other logits.
        if (arch == "qwen35moe") s.recurrent_layers = {true, false, true, true, true, true, true, false};
        if (arch == "qwen35") s.n_nextn = 1;
    } else if (arch == "gemma4" || arch == "gemma4moe") {
        // Window and global layers alternating (the real ones: five to one), head sizes 32 and 64, rope
        // bases 1e4 and 1e6 (the global one divided by rope_freqs), softcapped logits.
        // A separate output matrix (the real ones are tied, as gemma2's and gemma3's synthetic files are):
        // then a greedy continuation is not the prompt's last token repeated.
        s.arch = "gemma4";
        s.post_norms = true, s.layer_scale = true;
        s.window = 4;
        s.head_dim = 64, s.head_dim_swa = 32;
        s.rope_theta = 1000000.0f, s.rope_theta_swa = 10000.0f, s.rope_freqs = true;
        s.final_softcap = 30.0f;
        if (arch == "gemma4") {
            s.n_layer = 6;
            s.swa_layers = {true, false, true, false, true, false};
            s.shared_kv_layers = 2;     // layers 4 and 5 read layers 2 and 3
            s.n_embd_per_layer = 32;
        } else {
            s.n_layer = 4;
            s.swa_layers = {true, true, true, false};
            s.gemma4_moe = true;
            s.n_expert = 8, s.n_expert_used = 2, s.n_ff_exp = 256;
        }
    } else if (arch == "lfm2" || arch == "lfm2moe") {
        // LFM2: short-convolution blocks of 3 taps with GQA attention in layers 2 and 5 (LFM2-1.2B's ratio,
        // 10 of 16 layers convolutions), per-head q/k norms, NEOX rope; LFM2-MoE: experts from layer 1 on.
        s.n_layer = 6;
        s.shortconv = 3;
        s.recurrent_layers = {true, true, false, true, true, false};
        s.head_dim = 64;
        s.qk_norm = true;
        // (untied output, which the loaders take: with the tied embedding's range the logits of a random
        // model echo the current token, and argmax tests would check nothing)
        if (arch == "lfm2moe") s.n_expert = 8, s.n_expert_used = 2, s.n_ff_exp = 256, s.n_dense_lead = 1;
    } else if (arch == "granitehybrid") {
        // Granite 4 (H): Mamba-2 layers (8 heads of 64 over an inner width of 2 n_embd, 2 groups of B and C
        // of 64, convolution of 4) with attention in layers 2 and 5, Granite's multipliers, no rope (as the
        // H models), experts with an ungated shared expert.
        s.n_layer = 6;
        s.mamba2 = true;
        s.recurrent_layers = {true, true, false, true, true, false};
        s.ssm_inner = 512, s.ssm_heads = 8, s.ssm_groups = 2, s.ssm_state = 64, s.ssm_conv = 4;
        s.head_dim = 64;
        s.no_rope = true;
        s.embedding_scale = 12.0f, s.residual_scale = 0.22f, s.attention_scale = 0.0125f, s.logit_scale = 0.5f;
        s.n_expert = 8, s.n_expert_used = 2, s.n_ff_shexp = 256;
    } else if (arch == "llama4" || arch == "llama4-chunked") {
        // Llama 4: Scout's layout in 4 layers (three chunked roped layers, then a global one without rope;
        // experts every second layer, each expert's input scaled by its router sigmoid, the shared expert
        // as wide as the experts), Llama-3 rope factors, 4 experts of which 1 is used (as Scout's 1 of
        // 16). Seed 4: with seed 1 llama.cpp's and the fp64 pass's greedy texts part at a near-tie (logits
        // 0.3 apart in 36) within 32 tokens of the Q4_K_M file, as random models' texts now and then do.
        s.arch = "llama4";
        s.seed = 4;
        s.n_layer = 4;
        s.rope_theta = 500000.0f, s.rope_freqs = true;
        s.n_expert = 4, s.n_expert_used = 1, s.n_ff_exp = 256, s.n_ff_shexp = 256, s.moe_layer_step = 2;
        if (arch == "llama4-chunked") s.extra_u32 = {{"attention.chunk_size", 4}, {"attention.temperature_length", 6}};
    } else if (arch != "llama") {
        fail(EMBER_ERR_INVALID_ARGUMENT, "synthetic_family: unknown family '%s'", arch.c_str());
    }
    return s;
}

} // namespace ember
