// backend.hpp — the one boundary between the core and a compute backend (CPU, CUDA, Vulkan).
//
// Shape (after ggml-backend's registry → device → buffer, kept narrow): a Backend is a family that can
// run on this machine or not (score 0); it loads a ModelDesc's weights into a BackendModel (device
// memory; zero-copy on the CPU); a BackendModel creates BackendContexts, one per sequence, which own
// the KV cache and run forward passes. GPU backends will be modules loaded at run time that hand the
// core an object of this interface; the interface only ever gains methods at the end, and a module
// reports the kBackendApiVersion it was built against.
//
// Errors are thrown as ember::Error (EMBER_ERR_BACKEND, EMBER_ERR_OUT_OF_MEMORY, ...) and caught at the ABI.
#pragma once

#include "model/model_desc.hpp"

#include <ember/ember.h>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace ember {

constexpr uint32_t kBackendApiVersion = 1;

struct ContextParams {
    uint32_t n_ctx = 0;       // KV cache capacity in tokens
    uint32_t n_threads = 1;
    uint32_t n_batch = 256;   // largest n passed to forward()
};

class BackendContext {
public:
    virtual ~BackendContext() = default;
    // Evaluates tokens[0..n) at positions pos0..pos0+n-1 (n <= n_batch, pos0 + n <= n_ctx), writing them
    // into the KV cache. If logits is not null, writes the logits of the last token (n_vocab floats).
    // Cache rows at positions >= pos0 are overwritten, which is how truncation rolls back.
    virtual void forward(const int32_t *tokens, uint32_t n, uint32_t pos0, float *logits) = 0;
    // Bytes this context allocated (KV cache and scratch).
    virtual size_t memory_bytes() const = 0;
};

class BackendModel {
public:
    virtual ~BackendModel() = default;
    virtual std::unique_ptr<BackendContext> create_context(const ContextParams &params) = 0;
};

class Backend {
public:
    virtual ~Backend() = default;
    virtual uint32_t api_version() const { return kBackendApiVersion; }
    virtual ember_backend_kind kind() const = 0;
    virtual const char *name() const = 0;
    // 0: cannot run on this machine; higher wins for EMBER_BACKEND_AUTO.
    virtual int score() const = 0;
    // The ModelDesc (and the memory its TensorRefs point into) outlives the returned object.
    virtual std::unique_ptr<BackendModel> load_model(const ModelDesc &desc) = 0;
};

// The backends of this build that can run here, best first; the CPU backend is always present.
Backend *backend_find(ember_backend_kind kind);   // nullptr if absent or unusable; AUTO = the best
std::unique_ptr<Backend> cpu_backend_create();

} // namespace ember
