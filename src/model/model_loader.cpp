// model_loader.cpp — GGUF file → Model: metadata to hyper-parameters, tensor names to weights, and
// every shape checked against the hyper-parameters before a backend sees it.
#include "model/model.hpp"

#include "core/error.hpp"
#include "model/arch.hpp"

#include <cstdint>
#include <optional>
#include <sys/mman.h>


namespace ember {

namespace {
// Metadata that no shape check can catch but that would make every output NaN: a rope base of zero or
// below (its powers are NaN), a negative norm epsilon (the root of a negative mean). Checked for every
// architecture, where present (the architecture's own reading checks types and finiteness).
void check_sign(const gguf::File &g, const std::string &key, bool zero_allowed) {
    const std::optional<double> v = g.get_float(key);
    if (v && (zero_allowed ? !(*v >= 0) : !(*v > 0)))
        fail(EMBER_ERR_INVALID_MODEL, "metadata '%s' = %g must be %s", key.c_str(), *v, zero_allowed ? "0 or more" : "positive");
}
} // namespace

std::unique_ptr<Model> Model::load(const std::string &path, const LoadOptions &opts) {
    std::unique_ptr<Model> m(new Model());
    m->log_ = opts.log;
    m->vocab_only_ = opts.vocab_only || opts.metadata_only;
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
    if (!opts.metadata_only) m->tokenizer_ = Tokenizer::from_gguf(g);
    if (!m->vocab_only_) m->build_desc(opts);
    if (opts.progress && !opts.progress(1.0f)) fail(EMBER_ERR_CANCELLED, "load of '%s' cancelled", path.c_str());
    log_msg(&m->log_, EMBER_LOG_INFO, "loaded '%s': %s, %llu parameters, %zu tensors%s", path.c_str(),
            m->arch_.c_str(), (unsigned long long)m->n_params_, g.tensors().size(),
            opts.metadata_only ? " (metadata only)" : m->vocab_only_ ? " (vocab only)" : "");
    return m;
}

void Model::no_tokenizer() {
    fail(EMBER_ERR_UNSUPPORTED, "the model was loaded metadata-only: it has no tokenizer");
}

uint32_t Model::n_vocab() const {
    if (tokenizer_) return static_cast<uint32_t>(tokenizer_->n_vocab());
    // get_array throws for a non-array value; a metadata-only load describes, so report 0 instead.
    const gguf::KV *kv = gguf_.find("tokenizer.ggml.tokens");
    return kv && kv->value.type == gguf::ValueType::ARRAY ? static_cast<uint32_t>(kv->value.count) : 0;
}

void Model::build_desc(const LoadOptions &opts) {
    const gguf::File &g = gguf_;
    const ArchSpec *spec = arch_find(arch_);
    if (!spec)
        fail(EMBER_ERR_UNSUPPORTED, "architecture '%s' is not supported (supported: %s); it can still be "
             "loaded vocab-only", arch_.c_str(), arch_supported_list().c_str());

    // Tensors: record each with a stable address; the architecture then picks the ones it reads.
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

    ModelDesc d;
    ArchBuilder builder(g, arch_, tensors_, d);
    spec->build(builder);
    check_sign(g, arch_ + ".rope.freq_base", false);
    check_sign(g, arch_ + ".attention.layer_norm_rms_epsilon", true);
    if (d.hp.n_vocab != static_cast<uint32_t>(tokenizer_->n_vocab()))
        fail(EMBER_ERR_INVALID_MODEL, "token_embd.weight has %u rows but the tokenizer has %d tokens", d.hp.n_vocab,
             tokenizer_->n_vocab());
    if (d.logits_buf < 0) fail(EMBER_ERR_INTERNAL, "architecture '%s' built no output", arch_.c_str());
    desc_ = std::move(d);
    desc_.finish();
    build_long_context(g);
    build_mtp(*spec);
}

void Model::build_mtp(const ArchSpec &spec) {
    const std::optional<int64_t> n = gguf_.get_int(arch_ + ".nextn_predict_layers");
    n_mtp_layers_ = n && *n > 0 && *n < INT32_MAX ? static_cast<uint32_t>(*n) : 0;
    if (n_mtp_layers_ == 0) return;
    if (!spec.build_mtp) {
        mtp_error_ = format("this build does not run the multi-token-prediction layers of '%s' files", arch_.c_str());
        return;
    }
    // A file whose MTP block cannot be read still runs as a model: the reason is kept for whoever asks
    // for the block (ember_session_set_speculation with EMBER_SPEC_MTP).
    try {
        auto m = std::make_unique<ModelDesc>();
        ArchBuilder builder(gguf_, arch_, tensors_, *m);
        if (!spec.build_mtp(builder)) return;
        m->finish();
        desc_mtp_ = std::move(m);
    } catch (const Error &e) {
        mtp_error_ = format("the file's multi-token-prediction layers cannot be used: %s", e.what());
    }
}

const ModelDesc &Model::mtp_desc() const {
    if (desc_mtp_) return *desc_mtp_;
    if (!mtp_error_.empty()) fail(EMBER_ERR_INVALID_ARGUMENT, "%s", mtp_error_.c_str());
    fail(EMBER_ERR_INVALID_ARGUMENT, "the model carries no multi-token-prediction layers (%s.nextn_predict_layers is %s)",
         arch_.c_str(), gguf_.find(arch_ + ".nextn_predict_layers") ? "0" : "absent");
}

BackendModel &Model::mtp_backend_model(Backend &backend) const {
    const ModelDesc &d = mtp_desc();
    std::lock_guard<std::mutex> lock(backend_mutex_);
    auto &slot = mtp_backend_models_[&backend];
    if (!slot) slot = backend.load_model(d.c);
    return *slot;
}

// LongRoPE: the architecture's program ropes with the short factors, which hold up to the original
// context; the program for longer contexts is the same with the long factors in their place.
void Model::build_long_context(const gguf::File &g) {
    const TensorRef *long_f = nullptr;
    for (const TensorRef &t : tensors_)
        if (t.name == "rope_factors_long.weight") long_f = &t;
    int32_t short_w = -1;
    for (size_t i = 0; i < desc_.tensors.size(); ++i)
        if (desc_.tensors[i]->name == "rope_factors_short.weight") short_w = static_cast<int32_t>(i);
    if (!long_f || short_w < 0) return;
    const TensorRef &short_f = *desc_.tensors[static_cast<size_t>(short_w)];
    if (long_f->type != DType::F32 || long_f->n_dims != 1 || long_f->ne[0] != short_f.ne[0])
        fail(EMBER_ERR_INVALID_MODEL, "rope_factors_long.weight must be F32 with %lld elements, as the short factors",
             (long long)short_f.ne[0]);
    const std::optional<int64_t> orig = g.get_int(arch_ + ".rope.scaling.original_context_length");
    if (orig && (*orig <= 0 || *orig > UINT32_MAX))
        fail(EMBER_ERR_INVALID_MODEL, "rope.scaling.original_context_length %lld is out of range", (long long)*orig);
    n_ctx_orig_ = orig ? static_cast<uint32_t>(*orig) : desc_.hp.n_ctx_train;

    desc_long_ = std::make_unique<ModelDesc>(desc_);
    ModelDesc &l = *desc_long_;
    l.tensors.push_back(long_f);
    const int32_t long_w = static_cast<int32_t>(l.tensors.size() - 1);
    for (ember_graph_node &n : l.nodes)
        if ((n.op == EMBER_GRAPH_ROPE || n.op == EMBER_GRAPH_ROPE_YARN) && n.w == short_w) n.w = long_w;
    l.finish();
}

BackendModel &Model::backend_model(Backend &backend, uint32_t n_ctx_per_seq) const {
    std::lock_guard<std::mutex> lock(backend_mutex_);
    const bool long_ctx = uses_long(n_ctx_per_seq);
    auto &slot = backend_models_[{&backend, long_ctx}];
    if (!slot) slot = backend.load_model(backend.kind() == EMBER_BACKEND_CPU ? cpu_desc_locked(long_ctx, backend)
                                         : long_ctx                          ? desc_long_->c
                                                                             : desc_.c);
    return *slot;
}

} // namespace ember
