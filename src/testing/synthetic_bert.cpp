#include "testing/synthetic_bert.hpp"

#include "core/error.hpp"
#include "core/fp16.hpp"
#include "cpu/kernels.hpp"
#include "gguf/gguf.hpp"
#include "tokenizer/tokenizer.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

namespace ember {

const std::vector<std::string> &synthetic_bert_words() {
    static const std::vector<std::string> words = {
        "the", "an", "of", "and", "to", "in", "is", "was", "it", "for", "on", "with", "as", "at", "by", "from",
        "hello", "world", "cat", "dog", "sat", "mat", "run", "walk", "tree", "river", "stone", "light", "dark",
        "city", "game", "player", "sword", "shield", "king", "queen", "castle", "dragon", "forest", "north",
        "south", "east", "west", "night", "day", "fire", "water", "earth", "wind", "book", "page", "note",
        "search", "query", "document", "answer", "question", "memory", "story", "lore", "map", "quest", "gold",
        "this", "that", "what", "where", "who", "how", "why", "find", "read", "write", "open", "close", "door"};
    return words;
}

namespace {

// n_out rows of n_in floats in `type` (the CPU backend's quantizers for the block types).
std::vector<uint8_t> encode_rows(const std::vector<float> &v, DType type, int64_t n_in, int64_t n_out) {
    const size_t row = dtype_row_bytes(type, static_cast<uint64_t>(n_in));
    std::vector<uint8_t> out(row * static_cast<size_t>(n_out));
    for (int64_t r = 0; r < n_out; ++r) {
        const float *src = v.data() + r * n_in;
        uint8_t *dst = out.data() + static_cast<size_t>(r) * row;
        if (type == DType::F32) std::memcpy(dst, src, row);
        else if (type == DType::F16)
            for (int64_t i = 0; i < n_in; ++i) reinterpret_cast<uint16_t *>(dst)[i] = fp32_to_fp16(src[i]);
        else cpu::quantize_row(type, src, dst, n_in);
    }
    return out;
}

} // namespace

std::vector<uint8_t> synthetic_bert_gguf(const BertSpec &s) {
    if (s.n_head == 0 || s.n_embd % s.n_head || s.n_embd % 32 || s.n_ff % 32)
        fail(EMBER_ERR_INVALID_ARGUMENT, "inconsistent synthetic BERT shape");
    std::mt19937_64 gen(s.seed);
    auto uniform = [&](float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(gen); };
    gguf::Writer w;
    const bool nomic = s.arch == "nomic-bert";
    if (!nomic && s.arch != "bert") fail(EMBER_ERR_INVALID_ARGUMENT, "synthetic BERT: unknown architecture '%s'", s.arch.c_str());
    const std::string a = s.arch + ".";
    w.add_string("general.architecture", s.arch);
    w.add_string("general.name", "synthetic " + s.arch);
    w.add_u32(a + "context_length", s.n_ctx);
    w.add_u32(a + "embedding_length", s.n_embd);
    w.add_u32(a + "block_count", s.n_layer);
    w.add_u32(a + "feed_forward_length", s.n_ff);
    w.add_u32(a + "attention.head_count", s.n_head);
    w.add_f32(a + "attention.layer_norm_epsilon", 1e-12f);
    w.add_bool(a + "attention.causal", false);
    w.add_u32(a + "pooling_type", s.pooling_type);
    if (nomic && s.rope_theta > 0) w.add_f32(a + "rope.freq_base", s.rope_theta);
    w.add_u32("tokenizer.ggml.token_type_count", 2);

    // The vocabulary, in the GGUF form of WordPiece: "▁" before a word's first piece, continuations bare.
    std::vector<std::string> toks;
    std::vector<int32_t> types;
    auto add = [&](const std::string &t, TokenType type) {
        if (std::find(toks.begin(), toks.end(), t) != toks.end()) fail(EMBER_ERR_INTERNAL, "synthetic BERT vocabulary: '%s' twice", t.c_str());
        toks.push_back(t);
        types.push_back(static_cast<int32_t>(type));
    };
    add("[PAD]", TokenType::CONTROL);
    for (int i = 1; i < 100; ++i) add("[unused" + std::to_string(i) + "]", TokenType::NORMAL);
    for (const char *c : {"[UNK]", "[CLS]", "[SEP]", "[MASK]"}) add(c, TokenType::CONTROL);
    const std::string ws = "\xE2\x96\x81";
    for (const char *p : {"!", ",", ".", "?", "'", "-", ":", ";", "(", ")"}) add(ws + p, TokenType::NORMAL);
    for (char c = '0'; c <= '9'; ++c) add(ws + c, TokenType::NORMAL), add(std::string(1, c), TokenType::NORMAL);
    for (char c = 'a'; c <= 'z'; ++c) add(ws + c, TokenType::NORMAL), add(std::string(1, c), TokenType::NORMAL);
    for (const std::string &word : synthetic_bert_words()) add(ws + word, TokenType::NORMAL);
    for (const char *suf : {"s", "ed", "ing", "er", "est", "ly", "ness", "ion"})
        if (std::strlen(suf) > 1) add(suf, TokenType::NORMAL);
    for (uint32_t i = 0; toks.size() < s.n_vocab; ++i) add(ws + "w" + std::to_string(i), TokenType::NORMAL);
    if (toks.size() != s.n_vocab) fail(EMBER_ERR_INVALID_ARGUMENT, "n_vocab %u is below the vocabulary's %zu words", s.n_vocab, toks.size());
    w.add_string("tokenizer.ggml.model", "bert");
    w.add_array_string("tokenizer.ggml.tokens", toks);
    w.add_array_i32("tokenizer.ggml.token_type", types);
    w.add_u32("tokenizer.ggml.unknown_token_id", 100);
    w.add_u32("tokenizer.ggml.cls_token_id", 101);
    w.add_u32("tokenizer.ggml.seperator_token_id", 102);
    w.add_u32("tokenizer.ggml.padding_token_id", 0);
    w.add_u32("tokenizer.ggml.mask_token_id", 103);

    const uint32_t d = s.n_embd;
    auto matrix = [&](const std::string &name, uint32_t n_in, uint32_t n_out, DType type, float range) {
        std::vector<float> v(static_cast<size_t>(n_in) * n_out);
        for (float &x : v) x = uniform(-range, range);
        const auto bytes = encode_rows(v, type, n_in, n_out);
        w.add_tensor(name, type, {n_in, n_out}, bytes.data(), bytes.size());
    };
    auto vector = [&](const std::string &name, uint32_t n, float lo, float hi) {
        std::vector<float> v(n);
        for (float &x : v) x = uniform(lo, hi);
        w.add_tensor(name, DType::F32, {n}, v.data(), v.size() * sizeof(float));
    };
    auto linear = [&](const std::string &name, uint32_t n_in, uint32_t n_out) {
        matrix(name + ".weight", n_in, n_out, s.type, 1.0f / std::sqrt(static_cast<float>(n_in)));
        vector(name + ".bias", n_out, -0.1f, 0.1f);
    };
    auto norm = [&](const std::string &name) {
        vector(name + ".weight", d, 0.8f, 1.2f);
        vector(name + ".bias", d, -0.1f, 0.1f);
    };
    matrix("token_embd.weight", d, s.n_vocab, s.type == DType::F32 ? DType::F32 : DType::F16, 1.0f);
    matrix("token_types.weight", d, 2, DType::F32, 0.5f);
    if (!nomic) matrix("position_embd.weight", d, s.n_ctx, DType::F32, 0.5f);
    norm("token_embd_norm");
    for (uint32_t il = 0; il < s.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        if (nomic) {
            const float r = 1.0f / std::sqrt(static_cast<float>(d));
            matrix(p + "attn_qkv.weight", d, 3 * d, s.type, r);
            matrix(p + "attn_output.weight", d, d, s.type, r);
            norm(p + "attn_output_norm");
            matrix(p + "ffn_gate.weight", d, s.n_ff, s.type, r);
            matrix(p + "ffn_up.weight", d, s.n_ff, s.type, r);
            matrix(p + "ffn_down.weight", s.n_ff, d, s.type, 1.0f / std::sqrt(static_cast<float>(s.n_ff)));
            norm(p + "layer_output_norm");
            continue;
        }
        linear(p + "attn_q", d, d);
        linear(p + "attn_k", d, d);
        linear(p + "attn_v", d, d);
        linear(p + "attn_output", d, d);
        norm(p + "attn_output_norm");
        linear(p + "ffn_up", d, s.n_ff);
        linear(p + "ffn_down", s.n_ff, d);
        norm(p + "layer_output_norm");
    }
    if (s.pooling_type == 4) {
        linear("cls", d, d);
        matrix("cls.output.weight", d, 1, DType::F32, 1.0f / std::sqrt(static_cast<float>(d)));
        vector("cls.output.bias", 1, -0.1f, 0.1f);
    }
    return w.to_bytes();
}

} // namespace ember
