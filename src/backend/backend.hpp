// backend.hpp — the one boundary between the core and a compute backend (CPU, CUDA, Vulkan).
//
// Shape (after ggml-backend's registry → device → buffer, kept narrow): a Backend is a family that can
// run on this machine or not (score 0); it loads a model description's weights into a BackendModel
// (device memory; zero-copy on the CPU); a BackendModel creates BackendContexts, which own a KV cache
// and run forward passes of the description's program (graph.h).
//
// Every backend — the CPU, built in, as much as the CUDA and Vulkan modules loaded at run time — is one
// implementation of the C table of module_api.h; these classes are the core's one adapter over that
// table (module_loader.cpp), so there is one backend interface, and the CPU is registered like the others.
//
// Errors are thrown as ember::Error (EMBER_ERR_BACKEND, EMBER_ERR_OUT_OF_MEMORY, ...) and caught at the ABI.
#pragma once

#include "backend/module_api.h"
#include "core/dtype.hpp"

#include <ember/ember.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace ember {

constexpr uint32_t kBackendApiVersion = 1;

struct ContextParams {
    uint32_t n_blocks = 0;     // KV-cache blocks this context holds (its block pool's size)
    uint32_t block_size = 16;  // tokens per block
    uint32_t n_threads = 1;
    uint32_t n_batch = 256;    // largest n_tokens passed to forward()
    uint32_t n_logits = 1;     // largest n_logits passed to forward()
    DType kv_type = DType::F16; // element type of the K/V rows (F16, Q8_0 or Q4_0, see kv_format.cpp)
    // A context of the same backend whose worker threads this one runs on instead of starting its own
    // (then n_threads is that context's). For contexts used by turns, such as a speculative draft and
    // its target: two pools would each keep their workers spinning for a while after a pass, on the
    // cores the other pool's next pass needs. Ignored when it is another backend's context.
    const class BackendContext *share_threads_with = nullptr;
    // Blocks of a second pool holding the K/V rows of the sliding-window layers (kv/window_table.hpp),
    // or 0: all layers' rows are in the n_blocks pool. Only for a backend whose window_blocks() is true.
    uint32_t n_window_blocks = 0;
    // Recurrent states (module_api.h's state slots; the model's state_floats each), for a model with
    // recurrent layers; 0 otherwise. Only for a backend whose recurrent_state() is true.
    uint32_t n_state_slots = 0;
};

// The KV cache's row format, the same on every backend (a saved state moves between them): a row is one
// position's K (or V) of one layer, kv_width values of the cache type in GGUF's layout for that type.
// Throws EMBER_ERR_UNSUPPORTED for a type or shape the cache cannot hold (Q8_0 and Q4_0 need kv_width a
// multiple of 32 and head_dim a multiple of 8).
void check_kv_type(const ember_mod_model_desc &d, DType kv_type);
size_t kv_row_bytes(const ember_mod_model_desc &d, DType kv_type);
// The layers that keep K/V rows (those with a KV_STORE node: a hybrid model's recurrent layers keep none),
// and their count.
std::vector<bool> kv_layers(const ember_mod_model_desc &d);
uint32_t n_kv_layers(const ember_mod_model_desc &d);
// The layers with a node that carries a recurrent state (state_size > 0).
uint32_t n_recurrent_layers(const ember_mod_model_desc &d);
// K and V rows of the layers that keep them: what one token costs in the cache.
inline size_t kv_bytes_per_token(const ember_mod_model_desc &d, DType kv_type) {
    return 2 * size_t{n_kv_layers(d)} * kv_row_bytes(d, kv_type);
}
// Bytes of one sequence's recurrent state (module_api.h's state_floats; 0 without recurrent layers). An
// older description without the field has none.
inline size_t state_bytes(const ember_mod_model_desc &d) {
    return d.struct_size >= offsetof(ember_mod_model_desc, state_floats) + sizeof d.state_floats
               ? size_t{d.state_floats} * sizeof(float) : 0;
}

// The buffer a description's pass starts from (module_api.h's has_input: a part of a program cut across
// devices), or -1 when it starts from tokens. An older description without the fields has none.
inline int32_t desc_input_buf(const ember_mod_model_desc &d) {
    return d.struct_size >= offsetof(ember_mod_model_desc, input_buf) + sizeof d.input_buf && d.has_input
               ? d.input_buf : -1;
}

// One forward pass over tokens of one or more sequences (continuous batching puts the decode tokens of
// many sequences and chunks of prompts into one pass: every weight is read once for all of them).
struct Batch {
    uint32_t n_tokens = 0;
    const int32_t *tokens = nullptr;          // [n_tokens]
    const int32_t *pos = nullptr;             // [n_tokens] position of each token in its sequence
    // [n_tokens] the block table of each token's sequence: position j is in block table[j / block_size].
    // Tokens of one sequence at positions p..p+k see each other causally (all K/V rows of the batch are
    // written before attention reads them).
    const int32_t *const *tables = nullptr;
    uint32_t n_logits = 0;
    const int32_t *logits_rows = nullptr;     // [n_logits] which tokens' logits to compute
    float *logits = nullptr;                  // [n_logits][n_vocab]
    // Optional: a backend that splits a long pass into chunks (the Vulkan module's command buffers)
    // checks it between them and then throws EMBER_ERR_CANCELLED; K/V rows already written stay valid.
    const std::atomic<bool> *cancel = nullptr;
    // With ContextParams::n_window_blocks: [n_tokens] each token's window-layer block table (-1 entries
    // for released blocks, which no window layer reads again); the window layers use it instead of tables.
    const int32_t *const *window_tables = nullptr;
    // EMBER_PRECISION_* (ember.h): how the products with quantized weights round the activations. Other
    // than EMBER_PRECISION_DEFAULT only for a backend whose precision_high() is true.
    uint32_t precision = 0;
    // With ContextParams::n_state_slots: [n_tokens] each token's sequence's state slot, and the slot its
    // first token in this batch reads from (-1: a new sequence's zero state); module_api.h says the rules.
    const int32_t *state_slots = nullptr, *state_src = nullptr;
    // module_api.h's inputs (a program with INPUT_ROWS) and hidden (the description's hidden_buf rows of
    // every token, when not null).
    const float *inputs = nullptr;
    float *hidden = nullptr;
    // For a description with an input buffer (desc_input_buf): [n_tokens][its width] the activations the
    // pass starts from, computed by the part of the program before it.
    const float *input = nullptr;
    // With keep_states(): nullptr, or [n_tokens] a slot that also receives the sequence's state after that
    // token (-1: none); module_api.h's state_keep says the rules.
    const int32_t *state_keep = nullptr;
};

class BackendContext {
public:
    virtual ~BackendContext() = default;
    // Evaluates the batch: writes each token's K/V rows into its block at its position, and the
    // requested logits. Rows already in the cache are only read, so rolling a sequence back is just
    // forgetting positions (the next forward overwrites them).
    virtual void forward(const Batch &batch) = 0;
    // Copies every layer's K/V rows of block src into block dst (copy-on-write of shared blocks). With
    // window blocks, ids from n_blocks on name window block id - n_blocks (the window layers' rows), and
    // ids below only the other layers' rows.
    virtual void copy_block(int32_t src, int32_t dst) = 0;
    // Bytes of one position's K/V rows over all layers (K and V together): what a saved state holds per token.
    virtual size_t kv_bytes_per_token() const = 0;
    // Copies the K/V rows of positions 0..n-1 of the sequence with block table `table` into dst
    // (n * kv_bytes_per_token() bytes, in a layout of the backend's choosing that write_kv reads back).
    // With window blocks, `table` is ceil(n / block_size) blocks followed by the window table's as many
    // (-1: released); the rows of released window blocks read as zeros and are not written back.
    virtual void read_kv(const int32_t *table, uint32_t n, uint8_t *dst) const = 0;
    virtual void write_kv(const int32_t *table, uint32_t n, const uint8_t *src) = 0;
    // Recurrent states by slot (ContextParams::n_state_slots): copy one to another, read or write one
    // (state_bytes(desc) bytes, f32).
    virtual void copy_state(int32_t src, int32_t dst) = 0;
    virtual void read_state(int32_t slot, float *dst) const = 0;
    virtual void write_state(int32_t slot, const float *src) = 0;
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
    // Whether its contexts take ContextParams::n_window_blocks (module_api.h's EMBER_MOD_CAP_WINDOW_BLOCKS).
    virtual bool window_blocks() const { return false; }
    // Whether its contexts run Batch::precision EMBER_PRECISION_HIGH (EMBER_MOD_CAP_PRECISION_HIGH).
    virtual bool precision_high() const { return false; }
    // Whether it runs models with recurrent state (EMBER_MOD_CAP_RECURRENT_STATE).
    virtual bool recurrent_state() const { return false; }
    // Whether its recurrent ops keep per-token states (EMBER_MOD_CAP_KEEP_STATES: Batch::state_keep).
    virtual bool keep_states() const { return false; }
    // Whether it runs descriptions that start from activations (EMBER_MOD_CAP_INPUT_ROWS): the parts of a
    // program cut across devices after the first.
    virtual bool input_rows() const { return false; }
    // The description (and the memory its tensors point into) outlives the returned object.
    virtual std::unique_ptr<BackendModel> load_model(const ember_mod_model_desc &desc) = 0;
    // Bytes a context with these params would allocate (KV cache and activations), without allocating.
    virtual size_t context_bytes(const ember_mod_model_desc &desc, const ContextParams &params) const = 0;
    // Bytes its device can still allocate (opening the device if it is not open yet), or UINT64_MAX
    // where the backend cannot say (module_api.h's memory_available). Not called for the CPU backend,
    // whose memory is the host's (host_memory.hpp).
    virtual uint64_t device_memory_available() { return UINT64_MAX; }
    // A layout of its own for some host weights (module_api.h's host_layout_wants / _rewrite): whether
    // it wants tensor t rewritten, and the rewrite of its bytes in place. Default: none.
    virtual bool host_layout_wants(const ember_mod_tensor &) const { return false; }
    virtual void host_layout_rewrite(const ember_mod_tensor &, void *) const {}
};

// The backends of this build that can run here, best first; the CPU backend is always present.
Backend *backend_find(ember_backend_kind kind);   // nullptr if absent or unusable; AUTO = the best
// backend_find, or throws EMBER_ERR_UNSUPPORTED saying why the backend is missing (module not built or
// not found, no Vulkan loader, no device).
Backend &backend_require(ember_backend_kind kind);
// The module backend of `kind` even when it cannot run (to list its devices or choose one), or throws
// EMBER_ERR_UNSUPPORTED saying why it was not loaded.
Backend &backend_module(ember_backend_kind kind);

} // namespace ember
