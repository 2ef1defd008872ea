// llama2c_to_gguf.cpp — ember-convert-llama2c: a llama2.c checkpoint (the legacy "v0" .bin of Karpathy's
// tinyllamas, e.g. stories15M.bin) to an F32 GGUF of architecture llama.
//
// The .bin is 7 int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len; a negative
// vocab_size means the output matrix is stored separately) and then f32 arrays in this order: token
// embeddings, attention norms, wq, wk, wv, wo, FFN norms, w1 (gate), w2 (down), w3 (up), the final norm,
// the RoPE tables (skipped: GGUF's llama computes them), and the output matrix if not shared. Matrices
// are PyTorch (out, in) row-major, which is GGUF's layout with ne = {in, out}. llama2.c rotates the pairs
// (2i, 2i+1) of each head, as GGUF's llama does, so no row permutation is needed.
//
// The .bin has no usable tokenizer, so the tokenizer.* metadata is copied from a GGUF with the same
// vocabulary (e.g. stories15M-q8_0.gguf).
//
// usage: ember-convert-llama2c MODEL.bin VOCAB.gguf OUT.gguf
#include "core/error.hpp"
#include "core/mapped_file.hpp"
#include "gguf/gguf.hpp"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace ember;

namespace {

// Copies one metadata value of the vocabulary file (the types tokenizer metadata uses).
void copy_kv(gguf::Writer &w, const gguf::KV &kv) {
    const std::string key(kv.key);
    const gguf::Value &v = kv.value;
    switch (v.type) {
    case gguf::ValueType::STRING: w.add_string(key, std::string(v.str)); return;
    case gguf::ValueType::U32: w.add_u32(key, static_cast<uint32_t>(v.u)); return;
    case gguf::ValueType::I32: w.add_i32(key, static_cast<int32_t>(v.i)); return;
    case gguf::ValueType::F32: w.add_f32(key, static_cast<float>(v.f)); return;
    case gguf::ValueType::BOOL: w.add_bool(key, v.u != 0); return;
    case gguf::ValueType::ARRAY:
        if (v.elem_type == gguf::ValueType::STRING) {
            std::vector<std::string> s(v.strs.begin(), v.strs.end());
            w.add_array_string(key, s);
            return;
        }
        if (v.elem_type == gguf::ValueType::F32) {
            std::vector<float> f(v.count);
            for (uint64_t i = 0; i < v.count; ++i) f[i] = static_cast<float>(v.array_float(i));
            w.add_array_f32(key, f);
            return;
        }
        if (v.elem_type == gguf::ValueType::I32) {
            std::vector<int32_t> a(v.count);
            for (uint64_t i = 0; i < v.count; ++i) a[i] = static_cast<int32_t>(v.array_int(i));
            w.add_array_i32(key, a);
            return;
        }
        break;
    default: break;
    }
    fail(EMBER_ERR_UNSUPPORTED, "cannot copy metadata '%s' of type %s", key.c_str(), gguf::value_type_name(v.type));
}

int run(const std::string &bin_path, const std::string &vocab_path, const std::string &out_path) {
    MappedFile bin(bin_path);
    int32_t cfg[7];
    if (bin.size() < sizeof cfg) fail(EMBER_ERR_INVALID_MODEL, "'%s' is too short for a llama2.c header", bin_path.c_str());
    std::memcpy(cfg, bin.data(), sizeof cfg);
    const int64_t dim = cfg[0], hidden = cfg[1], n_layers = cfg[2], n_heads = cfg[3], n_kv_heads = cfg[4];
    const bool shared = cfg[5] > 0;
    const int64_t vocab = shared ? cfg[5] : -int64_t{cfg[5]}, seq_len = cfg[6];
    if (dim <= 0 || hidden <= 0 || n_layers <= 0 || n_heads <= 0 || n_kv_heads <= 0 || vocab <= 0 || seq_len <= 0 ||
        dim % n_heads != 0 || n_heads % n_kv_heads != 0)
        fail(EMBER_ERR_INVALID_MODEL, "'%s': implausible llama2.c header", bin_path.c_str());
    const int64_t head = dim / n_heads, kv_dim = n_kv_heads * head;
    const int64_t floats = vocab * dim + n_layers * (2 * dim + dim * dim * 2 + dim * kv_dim * 2 + 3 * dim * hidden) + dim +
                           seq_len * head + (shared ? 0 : vocab * dim);
    if (bin.size() != sizeof cfg + static_cast<size_t>(floats) * sizeof(float))
        fail(EMBER_ERR_INVALID_MODEL, "'%s' has %zu bytes; this header implies %zu", bin_path.c_str(), bin.size(),
             sizeof cfg + static_cast<size_t>(floats) * sizeof(float));

    MappedFile vocab_file(vocab_path);
    const gguf::File vf = gguf::File::parse(vocab_file.data(), vocab_file.size());
    const gguf::Value *tokens = vf.get_array("tokenizer.ggml.tokens");
    if (!tokens || static_cast<int64_t>(tokens->count) != vocab)
        fail(EMBER_ERR_INVALID_MODEL, "'%s' has no vocabulary of %lld tokens", vocab_path.c_str(), (long long)vocab);

    gguf::Writer w;
    w.add_string("general.architecture", "llama");
    w.add_string("general.name", "llama2.c " + bin_path.substr(bin_path.find_last_of('/') + 1));
    w.add_u32("llama.context_length", static_cast<uint32_t>(seq_len));
    w.add_u32("llama.embedding_length", static_cast<uint32_t>(dim));
    w.add_u32("llama.feed_forward_length", static_cast<uint32_t>(hidden));
    w.add_u32("llama.block_count", static_cast<uint32_t>(n_layers));
    w.add_u32("llama.attention.head_count", static_cast<uint32_t>(n_heads));
    w.add_u32("llama.attention.head_count_kv", static_cast<uint32_t>(n_kv_heads));
    w.add_u32("llama.rope.dimension_count", static_cast<uint32_t>(head));
    w.add_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);   // llama2.c's run.c
    for (const gguf::KV &kv : vf.kvs())
        if (kv.key.substr(0, 10) == "tokenizer.") copy_kv(w, kv);

    const float *p = reinterpret_cast<const float *>(bin.data() + sizeof cfg);
    auto take = [&](int64_t n) { const float *at = p; p += n; return at; };
    auto tensor = [&](const std::string &name, const float *data, std::vector<int64_t> dims) {
        int64_t n = 1;
        for (int64_t d : dims) n *= d;
        w.add_tensor(name, DType::F32, dims, data, static_cast<size_t>(n) * sizeof(float));
    };
    const float *emb = take(vocab * dim);
    const float *att_norm = take(n_layers * dim);
    const float *wq = take(n_layers * dim * dim), *wk = take(n_layers * dim * kv_dim), *wv = take(n_layers * dim * kv_dim);
    const float *wo = take(n_layers * dim * dim);
    const float *ffn_norm = take(n_layers * dim);
    const float *w1 = take(n_layers * dim * hidden), *w2 = take(n_layers * hidden * dim), *w3 = take(n_layers * dim * hidden);
    const float *out_norm = take(dim);
    take(seq_len * head);   // freq_cis_real and freq_cis_imag, seq_len * head / 2 each
    const float *wcls = shared ? emb : take(vocab * dim);

    tensor("token_embd.weight", emb, {dim, vocab});
    for (int64_t l = 0; l < n_layers; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        tensor(b + "attn_norm.weight", att_norm + l * dim, {dim});
        tensor(b + "attn_q.weight", wq + l * dim * dim, {dim, dim});
        tensor(b + "attn_k.weight", wk + l * dim * kv_dim, {dim, kv_dim});
        tensor(b + "attn_v.weight", wv + l * dim * kv_dim, {dim, kv_dim});
        tensor(b + "attn_output.weight", wo + l * dim * dim, {dim, dim});
        tensor(b + "ffn_norm.weight", ffn_norm + l * dim, {dim});
        tensor(b + "ffn_gate.weight", w1 + l * dim * hidden, {dim, hidden});
        tensor(b + "ffn_down.weight", w2 + l * hidden * dim, {hidden, dim});
        tensor(b + "ffn_up.weight", w3 + l * dim * hidden, {dim, hidden});
    }
    tensor("output_norm.weight", out_norm, {dim});
    tensor("output.weight", wcls, {dim, vocab});
    w.write_file(out_path);
    std::printf("{\"out\":\"%s\",\"layers\":%lld,\"dim\":%lld,\"vocab\":%lld,\"type\":\"F32\"}\n", out_path.c_str(),
                (long long)n_layers, (long long)dim, (long long)vocab);
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: ember-convert-llama2c MODEL.bin VOCAB.gguf OUT.gguf\n");
        return 2;
    }
    try {
        return run(argv[1], argv[2], argv[3]);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "ember-convert-llama2c: %s\n", e.what());
        return 1;
    }
}
