// model.hpp — a loaded model: the mapped file, its parsed metadata, tokenizer and decoder description.
//
// Immutable after load() returns, so any number of sessions on any threads share it. The only mutable
// part is the per-backend weight cache (backend_model()) with the CPU backend's weight placement, which
// a mutex guards.
#pragma once

#include "backend/backend.hpp"
#include "core/huge_page_copy.hpp"
#include "core/log.hpp"
#include "core/mapped_file.hpp"
#include "gguf/gguf.hpp"
#include "model/model_desc.hpp"
#include "tokenizer/tokenizer.hpp"

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace ember {

struct LoadOptions {
    bool vocab_only = false;
    // Metadata and tensor table only: no tokenizer, no description (implies vocab_only). For describing
    // a file this build cannot run: an unknown architecture, tokenizer or pre-tokenizer.
    bool metadata_only = false;
    // Progress in [0, 1]; returning false cancels (load() then throws EMBER_ERR_CANCELLED).
    std::function<bool(float)> progress;
    LogSink log;
};

class Model {
public:
    // Throws Error: EMBER_ERR_IO, EMBER_ERR_INVALID_MODEL, EMBER_ERR_UNSUPPORTED, EMBER_ERR_CANCELLED.
    static std::unique_ptr<Model> load(const std::string &path, const LoadOptions &opts);

    const gguf::File &gguf() const { return gguf_; }
    // Throws Error(EMBER_ERR_UNSUPPORTED) for a metadata-only load, which has no tokenizer.
    const Tokenizer &tokenizer() const {
        if (!tokenizer_) no_tokenizer();
        return *tokenizer_;
    }
    bool has_tokenizer() const { return tokenizer_ != nullptr; }
    bool vocab_only() const { return vocab_only_; }
    // The vocabulary's size: the tokenizer's, or the length of tokenizer.ggml.tokens for a metadata-only load.
    uint32_t n_vocab() const;
    const ModelDesc &desc() const { return desc_; }
    // Every tensor of the file (the description holds the ones its program reads); empty when vocab-only.
    const std::deque<TensorRef> &file_tensors() const { return tensors_; }
    const std::string &arch() const { return arch_; }
    const std::string &name() const { return name_; }
    uint64_t n_params() const { return n_params_; }
    uint64_t size_bytes() const { return size_bytes_; }
    const LogSink &log() const { return log_; }

    // The weights of this model on `backend`, loaded on first use (thread-safe), with the program for a
    // context of n_ctx_per_seq positions per sequence (0: within the original context). They differ only
    // for LongRoPE (Phi-3 128k): its long factors beyond rope.scaling.original_context_length, as llama.cpp
    // chooses them (the context per sequence, not the position). On the CPU a second program costs no
    // weights (they are read in place from the mapping); a GPU backend uploads them once per program.
    BackendModel &backend_model(Backend &backend, uint32_t n_ctx_per_seq = 0) const;

    // Where the CPU backend reads the weights from (model/weight_placement.cpp), decided once, on the
    // first CPU session or engine: a private copy in transparent huge pages (core/huge_page_copy.hpp says
    // why: decode runs up to 1.6x faster in a VM) when the kernel offers THP (enabled "always" or
    // "madvise"), the weights take 64 MiB or more, and the copy with the context's `context_bytes` takes
    // at most half of host_memory_available(); else the file mapping in place. EMBER_HUGEPAGES=1 copies
    // whenever THP is offered, EMBER_HUGEPAGES=0 never. Returns the bytes the copy is yet to allocate (0:
    // mapped, or copied already), for the caller's check of host memory before it allocates. Thread-safe.
    uint64_t cpu_weights_reserve(uint64_t context_bytes) const;
    // Whether the CPU backend reads the weights from the huge-page copy (false before its first use).
    bool cpu_weights_copied() const;
    // How many tensors the copy holds in the CPU backend's own layout (module_api.h's host layout).
    size_t cpu_weights_rewritten() const;

    // The description that backend_model(backend, n_ctx_per_seq) runs.
    const ModelDesc &desc_for(uint32_t n_ctx_per_seq) const { return uses_long(n_ctx_per_seq) ? *desc_long_ : desc_; }
    // Whether that program is LongRoPE's long one (saved states record it: keys rotated with one set of
    // factors cannot be read with the other), and the context it starts beyond (0: no LongRoPE).
    bool uses_long(uint32_t n_ctx_per_seq) const { return desc_long_ && n_ctx_per_seq > n_ctx_orig_; }
    uint32_t n_ctx_orig() const { return desc_long_ ? n_ctx_orig_ : 0; }

    // Multi-token-prediction layers the file carries (<arch>.nextn_predict_layers; 0: none).
    uint32_t n_mtp_layers() const { return n_mtp_layers_; }
    // The first of them as a program of its own (ArchSpec::build_mtp), the draft of speculative decoding.
    // Throws EMBER_ERR_INVALID_ARGUMENT when the file carries none, or says why this build cannot use them.
    const ModelDesc &mtp_desc() const;
    // Its weights on `backend`, loaded on first use (thread-safe). On the CPU they are read from the file
    // mapping (the huge-page copy holds the main program's tensors only).
    BackendModel &mtp_backend_model(Backend &backend) const;

private:
    Model() = default;
    void build_desc(const LoadOptions &opts);
    [[noreturn]] static void no_tokenizer();
    void build_long_context(const gguf::File &g);
    void build_mtp(const struct ArchSpec &spec);
    // With backend_mutex_ held: the placement's decision and the copy (weight_placement.cpp).
    bool cpu_decide_locked(uint64_t context_bytes) const;
    void cpu_copy_locked(const Backend &backend) const;
    // The tensors the copy holds in the CPU backend's own layout: (file offset, tensor), weight_placement.cpp.
    std::vector<std::pair<uint64_t, const ember_mod_tensor *>> cpu_layout_candidates(const Backend &backend) const;
    // The file's byte ranges that the programs' tensors take, merged.
    std::vector<HugePageCopy::Range> cpu_ranges() const;
    // The description that the CPU backend loads for the long (or original) program.
    const ember_mod_model_desc &cpu_desc_locked(bool long_ctx, const Backend &backend) const;

    std::unique_ptr<MappedFile> file_;
    gguf::File gguf_;
    std::unique_ptr<Tokenizer> tokenizer_;
    bool vocab_only_ = false;
    std::string arch_, name_;
    uint64_t n_params_ = 0, size_bytes_ = 0;
    std::deque<TensorRef> tensors_;   // stable addresses: ModelDesc points into it
    ModelDesc desc_;
    // LongRoPE's program for contexts beyond n_ctx_orig_ (nullptr for every other model).
    std::unique_ptr<ModelDesc> desc_long_;
    uint32_t n_ctx_orig_ = 0;
    // The multi-token-prediction block's program (null: none), or why it could not be built.
    uint32_t n_mtp_layers_ = 0;
    std::unique_ptr<ModelDesc> desc_mtp_;
    std::string mtp_error_;
    mutable std::map<Backend *, std::unique_ptr<BackendModel>> mtp_backend_models_;
    LogSink log_;
    mutable std::mutex backend_mutex_;
    mutable std::map<std::pair<Backend *, bool>, std::unique_ptr<BackendModel>> backend_models_;
    // The CPU backend's placement: decided (once), the copy (when chosen), and the programs' descriptions
    // with their tensors pointing into it ([0] the original program, [1] LongRoPE's long one).
    mutable bool cpu_decided_ = false, cpu_wants_copy_ = false;
    mutable std::unique_ptr<HugePageCopy> cpu_copy_;
    // File offsets (sorted) of the tensors the copy holds in the CPU backend's own layout
    // (weight_placement.cpp says which and why).
    mutable std::vector<uint64_t> cpu_rows16_;
    struct CDesc {
        ember_mod_model_desc c{};
        std::vector<ember_mod_tensor> tensors;
    };
    mutable std::unique_ptr<CDesc> cpu_desc_[2];
};

// Throws EMBER_ERR_UNSUPPORTED for an embedding or reranking model (ModelDesc::embedding), which has no
// next-token logits to generate from; `what` names the refused use ("sessions").
void refuse_embedding_model(const Model &model, const char *what);

} // namespace ember
