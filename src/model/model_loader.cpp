// model_loader.cpp — GGUF file → Model: metadata to hyper-parameters, tensor names to weights, and
// every shape checked against the hyper-parameters before a backend sees it.
#include "model/model.hpp"

#include "core/error.hpp"
#include "model/arch.hpp"

#include <sys/mman.h>

#include <cmath>
#include <string_view>

namespace ember {

namespace {

uint32_t get_u32(const gguf::File &f, const std::string &key, std::optional<uint32_t> fallback) {
    auto v = f.get_int(key);
    if (!v) {
        if (fallback) return *fallback;
        fail(EMBER_ERR_INVALID_MODEL, "required metadata key '%s' is missing", key.c_str());
    }
    if (*v < 0 || *v > 0x7fffffff)
        fail(EMBER_ERR_INVALID_MODEL, "metadata '%s' = %lld is out of range", key.c_str(), (long long)*v);
    return static_cast<uint32_t>(*v);
}

float get_f32(const gguf::File &f, const std::string &key, float fallback) {
    auto v = f.get_float(key);
    if (!v) return fallback;
    if (!std::isfinite(*v)) fail(EMBER_ERR_INVALID_MODEL, "metadata '%s' is not finite", key.c_str());
    return static_cast<float>(*v);
}

// The weight types the kernels take (core/dtype.cpp marks them).
bool is_matmul_type(DType t) { return dtype_info(t).supported; }

} // namespace

std::unique_ptr<Model> Model::load(const std::string &path, const LoadOptions &opts) {
    std::unique_ptr<Model> m(new Model());
    m->log_ = opts.log;
    m->vocab_only_ = opts.vocab_only;
    if (opts.progress && !opts.progress(0.0f)) fail(EMBER_ERR_CANCELLED, "load of '%s' cancelled", path.c_str());

    m->file_ = std::make_unique<MappedFile>(path);
    try {
        m->gguf_ = gguf::File::parse(m->file_->data(), m->file_->size());
    } catch (const Error &e) {
        throw Error(e.status(), format("'%s': %s", path.c_str(), e.what()));
    }
    const gguf::File &g = m->gguf_;
    auto arch = g.get_string("general.architecture");
    if (!arch) fail(EMBER_ERR_INVALID_MODEL, "'%s': metadata key 'general.architecture' is missing", path.c_str());
    m->arch_ = std::string(*arch);
    m->name_ = std::string(g.get_string("general.name").value_or(""));
    for (const auto &t : g.tensors()) {
        m->n_params_ += t.n_elements;
        m->size_bytes_ += t.n_bytes;
    }
    m->tokenizer_ = Tokenizer::from_gguf(g);
    if (!m->vocab_only_) m->build_desc(opts);
    if (opts.progress && !opts.progress(1.0f)) fail(EMBER_ERR_CANCELLED, "load of '%s' cancelled", path.c_str());
    log_msg(&m->log_, EMBER_LOG_INFO, "loaded '%s': %s, %llu parameters, %zu tensors%s", path.c_str(),
            m->arch_.c_str(), (unsigned long long)m->n_params_, g.tensors().size(), m->vocab_only_ ? " (vocab only)" : "");
    return m;
}

void Model::build_desc(const LoadOptions &opts) {
    const gguf::File &g = gguf_;
    const ArchSpec *spec = arch_find(arch_);
    if (!spec)
        fail(EMBER_ERR_UNSUPPORTED, "architecture '%s' is not supported (supported: %s); it can still be "
             "loaded vocab-only", arch_.c_str(), arch_supported_list());
    const std::string a = arch_ + ".";
    HParams hp;
    hp.n_embd = get_u32(g, a + "embedding_length", std::nullopt);
    hp.n_layer = get_u32(g, a + "block_count", std::nullopt);
    hp.n_ff = get_u32(g, a + "feed_forward_length", std::nullopt);
    hp.n_head = get_u32(g, a + "attention.head_count", std::nullopt);
    hp.n_head_kv = get_u32(g, a + "attention.head_count_kv", hp.n_head);
    hp.n_ctx_train = get_u32(g, a + "context_length", 2048u);
    hp.norm_eps = get_f32(g, a + "attention.layer_norm_rms_epsilon", 1e-5f);
    if (hp.n_embd == 0 || hp.n_layer == 0 || hp.n_head == 0 || hp.n_head_kv == 0 || hp.n_ff == 0)
        fail(EMBER_ERR_INVALID_MODEL, "zero in the model's dimensions (embedding %u, layers %u, heads %u/%u, ffn %u)",
             hp.n_embd, hp.n_layer, hp.n_head, hp.n_head_kv, hp.n_ff);
    if (hp.n_layer > 4096 || hp.n_head > 4096 || hp.n_embd > (1u << 20))
        fail(EMBER_ERR_INVALID_MODEL, "implausible model dimensions (embedding %u, layers %u, heads %u)",
             hp.n_embd, hp.n_layer, hp.n_head);
    if (hp.n_head % hp.n_head_kv != 0)
        fail(EMBER_ERR_INVALID_MODEL, "head_count %u is not a multiple of head_count_kv %u", hp.n_head, hp.n_head_kv);
    hp.head_dim = get_u32(g, a + "attention.key_length", hp.n_embd % hp.n_head == 0 ? std::optional<uint32_t>(hp.n_embd / hp.n_head) : std::nullopt);
    if (get_u32(g, a + "attention.value_length", hp.head_dim) != hp.head_dim)
        fail(EMBER_ERR_UNSUPPORTED, "key_length and value_length differ");
    if (hp.head_dim == 0 || hp.head_dim > 256 || hp.head_dim % 2)
        fail(EMBER_ERR_UNSUPPORTED, "head dimension %u is not supported (even, at most 256)", hp.head_dim);
    hp.n_rot = get_u32(g, a + "rope.dimension_count", hp.head_dim);
    if (hp.n_rot > hp.head_dim || hp.n_rot % 2)
        fail(EMBER_ERR_INVALID_MODEL, "rope.dimension_count %u does not fit head dimension %u", hp.n_rot, hp.head_dim);
    hp.rope_neox = spec->rope_neox;
    hp.rope_theta = get_f32(g, a + "rope.freq_base", 10000.0f);
    if (auto type = g.get_string(a + "rope.scaling.type"); type && *type != "none") {
        if (*type != "linear")
            fail(EMBER_ERR_UNSUPPORTED, "rope scaling type '%.*s' is not supported (none, linear; Llama-3 "
                 "scaling comes from rope_freqs)", (int)type->size(), type->data());
        const float factor = get_f32(g, a + "rope.scaling.factor", 1.0f);
        if (!(factor > 0)) fail(EMBER_ERR_INVALID_MODEL, "rope.scaling.factor must be positive");
        hp.rope_freq_scale = 1.0f / factor;
    }

    // Tensors: record each with a stable address, then resolve names.
    size_t done = 0;
    const size_t total = g.tensors().size();
    for (const auto &t : g.tensors()) {
        TensorRef r;
        r.name = std::string(t.name);
        r.type = t.type;
        r.n_dims = static_cast<int>(t.n_dims);
        for (int i = 0; i < 4; ++i) r.ne[i] = t.ne[i];
        r.data = t.data;
        r.n_bytes = t.n_bytes;
        tensors_.push_back(std::move(r));
        // Ask the kernel to start reading the weights in; the CPU backend uses them in place.
        if (t.n_bytes > 0) {
            const uintptr_t page = 4096;
            uintptr_t b = reinterpret_cast<uintptr_t>(t.data) & ~(page - 1);
            ::madvise(reinterpret_cast<void *>(b), t.n_bytes + (reinterpret_cast<uintptr_t>(t.data) - b), MADV_WILLNEED);
        }
        ++done;
        if (opts.progress && (done % 16 == 0 || done == total) && !opts.progress(0.9f * done / total))
            fail(EMBER_ERR_CANCELLED, "load cancelled");
    }
    std::map<std::string_view, const TensorRef *> by_name;
    for (const TensorRef &r : tensors_) by_name[r.name] = &r;

    auto find = [&](const std::string &name) -> const TensorRef * {
        auto it = by_name.find(name);
        return it == by_name.end() ? nullptr : it->second;
    };
    // A weight matrix of shape [n_in, n_out] (GGUF ne order), or a vector [n_in] when n_out == 0.
    auto need = [&](const std::string &name, int64_t n_in, int64_t n_out, bool matrix, bool required) -> const TensorRef * {
        const TensorRef *t = find(name);
        if (!t) {
            if (required) fail(EMBER_ERR_INVALID_MODEL, "tensor '%s' is missing", name.c_str());
            return nullptr;
        }
        const bool shape_ok = matrix ? (t->n_dims == 2 && t->ne[0] == n_in && t->ne[1] == n_out)
                                     : (t->n_dims == 1 && t->ne[0] == n_in);
        if (!shape_ok)
            fail(EMBER_ERR_INVALID_MODEL, "tensor '%s' has shape [%lld, %lld], expected [%lld%s%s]", name.c_str(),
                 (long long)t->ne[0], (long long)t->ne[1], (long long)n_in, matrix ? ", " : "",
                 matrix ? std::to_string(n_out).c_str() : "");
        if (matrix && !is_matmul_type(t->type))
            fail(EMBER_ERR_UNSUPPORTED, "tensor '%s' has type %s, which this build does not support "
                 "(supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)", name.c_str(),
                 dtype_name(t->type));
        if (!matrix && t->type != DType::F32)
            fail(EMBER_ERR_UNSUPPORTED, "tensor '%s' has type %s; norms and biases must be F32", name.c_str(),
                 dtype_name(t->type));
        return t;
    };

    ModelDesc d;
    d.arch = arch_;
    const TensorRef *emb = find("token_embd.weight");
    if (!emb) fail(EMBER_ERR_INVALID_MODEL, "tensor 'token_embd.weight' is missing");
    hp.n_vocab = static_cast<uint32_t>(emb->ne[1]);
    if (hp.n_vocab != static_cast<uint32_t>(tokenizer_->n_vocab()))
        fail(EMBER_ERR_INVALID_MODEL, "token_embd.weight has %u rows but the tokenizer has %d tokens", hp.n_vocab,
             tokenizer_->n_vocab());
    d.tok_embd = need("token_embd.weight", hp.n_embd, hp.n_vocab, true, true);
    d.output_norm = need("output_norm.weight", hp.n_embd, 0, false, true);
    d.output = need("output.weight", hp.n_embd, hp.n_vocab, true, false);
    if (!d.output) d.output = d.tok_embd;  // tied embeddings
    if (const TensorRef *rf = find("rope_freqs.weight")) {
        if (rf->type != DType::F32 || rf->ne[0] != hp.n_rot / 2)
            fail(EMBER_ERR_INVALID_MODEL, "rope_freqs.weight must be F32 with %u elements", hp.n_rot / 2);
        d.rope_freqs = rf;
    }
    const int64_t nq = hp.n_embd_q(), nkv = hp.n_embd_kv();
    for (uint32_t l = 0; l < hp.n_layer; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        LayerWeights w;
        w.attn_norm = need(p + "attn_norm.weight", hp.n_embd, 0, false, true);
        w.wq = need(p + "attn_q.weight", hp.n_embd, nq, true, true);
        w.wk = need(p + "attn_k.weight", hp.n_embd, nkv, true, true);
        w.wv = need(p + "attn_v.weight", hp.n_embd, nkv, true, true);
        w.wo = need(p + "attn_output.weight", nq, hp.n_embd, true, true);
        w.bq = need(p + "attn_q.bias", nq, 0, false, spec->qkv_bias_required);
        w.bk = need(p + "attn_k.bias", nkv, 0, false, spec->qkv_bias_required);
        w.bv = need(p + "attn_v.bias", nkv, 0, false, spec->qkv_bias_required);
        w.bo = need(p + "attn_output.bias", hp.n_embd, 0, false, false);
        w.ffn_norm = need(p + "ffn_norm.weight", hp.n_embd, 0, false, true);
        w.ffn_gate = need(p + "ffn_gate.weight", hp.n_embd, hp.n_ff, true, true);
        w.ffn_up = need(p + "ffn_up.weight", hp.n_embd, hp.n_ff, true, true);
        w.ffn_down = need(p + "ffn_down.weight", hp.n_ff, hp.n_embd, true, true);
        d.layers.push_back(w);
    }
    d.hp = hp;
    desc_ = std::move(d);
}

BackendModel &Model::backend_model(Backend &backend) const {
    std::lock_guard<std::mutex> lock(backend_mutex_);
    auto &slot = backend_models_[&backend];
    if (!slot) slot = backend.load_model(desc_);
    return *slot;
}

} // namespace ember
