// model_desc.hpp — a model as the core and the backends see it: its shape, the tensors its forward pass
// reads, and that pass as a program of backend-neutral ops (backend/graph.h).
//
// The architecture files (model/arch_*.cpp) build it from GGUF metadata and tensor names; every backend
// runs the same program from it (through its C form, backend/module_api.h's ember_mod_model_desc, made
// in one place: backend/module_loader.cpp). Nothing in it names an architecture except `arch`, which
// only the core reads (for messages and `ember info`).
#pragma once

#include "backend/module_api.h"
#include "core/dtype.hpp"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace ember {

// A tensor's bytes as stored in the file (host memory: the mapping). n_dims <= 4, ne[0] innermost.
struct TensorRef {
    std::string name;
    DType type = DType::F32;
    int n_dims = 0;
    int64_t ne[4] = {1, 1, 1, 1};
    const void *data = nullptr;
    size_t n_bytes = 0;
};

// The model's shape: what the core sizes caches and buffers with, and what `ember info` shows. The
// architecture's choices (rope variant, biases, norms) are in the program, not here.
struct HParams {
    uint32_t n_vocab = 0;
    uint32_t n_embd = 0;
    uint32_t n_layer = 0;
    uint32_t n_head = 0;
    uint32_t n_head_kv = 0;
    uint32_t head_dim = 0;     // n_embd / n_head unless the file says otherwise
    uint32_t n_ff = 0;
    uint32_t n_ctx_train = 0;
    uint32_t n_expert = 0;       // mixture of experts: experts per layer (0: a dense FFN)
    uint32_t n_expert_used = 0;  // experts each token goes through

    uint32_t n_embd_kv() const { return n_head_kv * head_dim; }
    uint32_t n_embd_q() const { return n_head * head_dim; }
};

// An embedding or reranking model (docs/embeddings.md): how a sequence's output rows become its vector or
// score. The numbers are GGUF's <arch>.pooling_type values.
enum class Pooling : uint32_t { None = 0, Mean = 1, Cls = 2, Last = 3, Rank = 4 };
struct EmbeddingInfo {
    Pooling pooling = Pooling::None;
    // Bidirectional (an encoder, or <arch>.attention.causal false): the model has no next token to predict.
    bool encoder = false;
    // The program's output rows are hidden states (width n_embd) or a ranking head's outputs, not logits:
    // set for every model with a pooling type; such a model does not generate.
    bool outputs_hidden = false;
    // Rank: the first of the head's outputs after a softmax over them (Qwen3-Reranker's yes / no), else the
    // head's first output as it is.
    bool rank_softmax = false;
};

struct ModelDesc {
    std::string arch;
    HParams hp;
    // The tensors the program reads, by index (nodes' w and b); pointers into the Model's tensor list.
    std::vector<const TensorRef *> tensors;
    // Tensors the architecture made rather than found: parts of a fused tensor (Phi-3's attn_qkv) and
    // values computed from metadata. Stable addresses; `tensors` may point into it.
    std::deque<TensorRef> made;
    std::deque<std::vector<float>> made_data;
    std::vector<ember_graph_buf> bufs;
    std::vector<ember_graph_node> nodes;
    int32_t logits_buf = -1;
    // Floats of one sequence's recurrent state (the SSM_CONV and GATED_DELTA nodes' parts): 0 for a model
    // of attention layers only.
    uint32_t state_floats = 0;
    // A per-token buffer a pass returns on request (module_api.h's hidden_buf): the final normed hidden
    // state of the decoders build_decoder makes (engine embedding requests pool it) and of a model whose
    // file carries multi-token-prediction layers, and that block's own; -1: none.
    int32_t hidden_buf = -1;
    EmbeddingInfo embedding;

    // The C form every backend receives (backend/module_api.h), pointing into this object: made by
    // finish() once the program is complete and the object is in its final place.
    ember_mod_model_desc c{};
    std::vector<ember_mod_tensor> c_tensors;
    void finish();

    // A tensor of the file by name (tests, fingerprints), or nullptr.
    const TensorRef *tensor(std::string_view name) const {
        for (const TensorRef *t : tensors)
            if (t->name == name) return t;
        return nullptr;
    }
};

} // namespace ember
