#include "model/synthetic.hpp"

#include "core/error.hpp"
#include "core/fp16.hpp"
#include "cpu/kernels.hpp"
#include "gguf/gguf.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

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
// about its size (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0), a 32-element format to F16.
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
        if (t == DType::Q4_K) t = DType::Q5_0;
        if (t == DType::Q5_K) t = DType::Q5_1;
        if (t == DType::Q6_K) t = DType::Q8_0;
    }
    if (n_in % dtype_info(t).block_size != 0) t = DType::F16;
    return t;
}

// Encodes n_out rows of n_in floats in `type`.
std::vector<uint8_t> encode(const std::vector<float> &w, DType type, int64_t n_in, int64_t n_out) {
    const size_t row_bytes = dtype_row_bytes(type, static_cast<uint64_t>(n_in));
    std::vector<uint8_t> out(row_bytes * static_cast<size_t>(n_out));
    for (int64_t r = 0; r < n_out; ++r) {
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
        default:
            if (dtype_info(type).block_size == 1 || !dtype_info(type).supported)
                fail(EMBER_ERR_UNSUPPORTED, "synthetic models cannot store %s", dtype_name(type));
            cpu::quantize_row(type, src, dst, n_in);
        }
    }
    return out;
}

} // namespace

std::vector<uint8_t> synthetic_model_gguf(const SyntheticSpec &s) {
    if (s.n_vocab < 8 || s.n_head == 0 || s.n_head_kv == 0 || (!s.head_dim && s.n_embd % s.n_head) ||
        s.n_head % s.n_head_kv)
        fail(EMBER_ERR_INVALID_ARGUMENT, "inconsistent synthetic model shape");
    Rng rng(s.seed);
    gguf::Writer w;
    const std::string a = s.arch + ".";
    const uint32_t head_dim = s.head_dim ? s.head_dim : s.n_embd / s.n_head;
    w.add_string("general.architecture", s.arch);
    w.add_string("general.name", "synthetic " + s.arch);
    w.add_u32(a + "context_length", s.n_ctx);
    w.add_u32(a + "embedding_length", s.n_embd);
    w.add_u32(a + "block_count", s.n_layer);
    w.add_u32(a + "feed_forward_length", s.n_ff);
    w.add_u32(a + "attention.head_count", s.n_head);
    w.add_u32(a + "attention.head_count_kv", s.n_head_kv);
    w.add_f32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
    w.add_f32(a + "rope.freq_base", s.rope_theta);
    w.add_u32(a + "rope.dimension_count", head_dim);
    if (s.head_dim) w.add_u32(a + "attention.key_length", head_dim), w.add_u32(a + "attention.value_length", head_dim);

    // Vocabulary: <unk>, <s>, </s>; the 256 byte tokens <0x00>..<0xFF> when there is room (any text then
    // tokenizes, as with real SentencePiece vocabularies, and other runtimes accept the file); then "▁",
    // single letters and numbered pieces up to n_vocab.
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    std::vector<int32_t> types = {2, 3, 3};
    if (s.n_vocab >= 3 + 256 + 32) {
        for (int b = 0; b < 256; ++b) {
            char name[8];
            std::snprintf(name, sizeof name, "<0x%02X>", b);
            tokens.push_back(name);
            types.push_back(6);
        }
    }
    for (uint32_t i = 0; tokens.size() < s.n_vocab; ++i) {
        std::string t = i == 0 ? "\xe2\x96\x81" : std::string(1, static_cast<char>('a' + (i - 1) % 26));
        if (i > 26) t = "\xe2\x96\x81" + t + std::to_string(i);
        tokens.push_back(t);
        types.push_back(1);
    }
    std::vector<float> scores(tokens.size());
    for (size_t i = 0; i < scores.size(); ++i) scores[i] = -static_cast<float>(i);
    w.add_string("tokenizer.ggml.model", "llama");
    w.add_array_string("tokenizer.ggml.tokens", tokens);
    w.add_array_f32("tokenizer.ggml.scores", scores);
    w.add_array_i32("tokenizer.ggml.token_type", types);
    w.add_u32("tokenizer.ggml.unknown_token_id", 0);
    w.add_u32("tokenizer.ggml.bos_token_id", 1);
    w.add_u32("tokenizer.ggml.eos_token_id", 2);

    auto matrix = [&](const std::string &name, uint32_t n_in, uint32_t n_out, Role role = Role::Other, uint32_t layer = 0) {
        std::vector<float> v(static_cast<size_t>(n_in) * n_out);
        const float r = 1.0f / std::sqrt(static_cast<float>(n_in));
        for (float &x : v) x = rng.uniform(-r, r);
        const DType type = matrix_type(s, role, layer, n_in);
        const auto bytes = encode(v, type, n_in, n_out);
        w.add_tensor(name, type, {n_in, n_out}, bytes.data(), bytes.size());
    };
    auto vector = [&](const std::string &name, uint32_t n, float lo, float hi) {
        std::vector<float> v(n);
        for (float &x : v) x = rng.uniform(lo, hi);
        w.add_tensor(name, DType::F32, {n}, v.data(), v.size() * sizeof(float));
    };
    const uint32_t nq = s.n_head * head_dim, nkv = s.n_head_kv * head_dim;
    {
        // The embedding rows need O(1) entries (they are the residual stream's start).
        std::vector<float> v(static_cast<size_t>(s.n_embd) * s.n_vocab);
        for (float &x : v) x = rng.uniform(-1.0f, 1.0f);
        const DType type = matrix_type(s, Role::Embedding, 0, s.n_embd);
        const auto bytes = encode(v, type, s.n_embd, s.n_vocab);
        w.add_tensor("token_embd.weight", type, {s.n_embd, s.n_vocab}, bytes.data(), bytes.size());
    }
    vector("output_norm.weight", s.n_embd, 0.8f, 1.2f);
    if (!s.tied_output) matrix("output.weight", s.n_embd, s.n_vocab, Role::Output);
    if (s.rope_freqs) vector("rope_freqs.weight", head_dim / 2, 1.0f, 4.0f);
    for (uint32_t l = 0; l < s.n_layer; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        vector(p + "attn_norm.weight", s.n_embd, 0.8f, 1.2f);
        matrix(p + "attn_q.weight", s.n_embd, nq);
        matrix(p + "attn_k.weight", s.n_embd, nkv);
        matrix(p + "attn_v.weight", s.n_embd, nkv, Role::AttnV, l);
        if (s.qkv_bias) {
            vector(p + "attn_q.bias", nq, -0.5f, 0.5f);
            vector(p + "attn_k.bias", nkv, -0.5f, 0.5f);
            vector(p + "attn_v.bias", nkv, -0.5f, 0.5f);
        }
        if (s.qk_norm) {
            vector(p + "attn_q_norm.weight", head_dim, 0.8f, 1.2f);
            vector(p + "attn_k_norm.weight", head_dim, 0.8f, 1.2f);
        }
        matrix(p + "attn_output.weight", nq, s.n_embd);
        vector(p + "ffn_norm.weight", s.n_embd, 0.8f, 1.2f);
        matrix(p + "ffn_gate.weight", s.n_embd, s.n_ff);
        matrix(p + "ffn_up.weight", s.n_embd, s.n_ff);
        matrix(p + "ffn_down.weight", s.n_ff, s.n_embd, Role::FfnDown, l);
    }
    return w.to_bytes();
}

} // namespace ember
