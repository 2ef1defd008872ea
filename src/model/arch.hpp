// arch.hpp — how an architecture file describes its decoder: it reads the metadata and tensors it needs
// through an ArchBuilder and emits the forward pass as ops (backend/graph.h).
//
// Each supported architecture is one file (arch_<name>.cpp) defining an ArchSpec. Architectures of the
// usual shape (norm → attention → norm → FFN, pre-norm residuals) share build_decoder() and differ in
// its options; anything else writes its own ops with the builder.
#pragma once

#include "gguf/gguf.hpp"
#include "model/model_desc.hpp"

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace ember {

class ArchBuilder {
public:
    // `tensors`: every tensor of the file, with stable addresses.
    ArchBuilder(const gguf::File &file, std::string arch, const std::deque<TensorRef> &tensors, ModelDesc &out);

    // Metadata "<arch>.<key>": the value, the fallback when absent, or EMBER_ERR_INVALID_MODEL.
    uint32_t u32(const std::string &key, std::optional<uint32_t> fallback) const;
    float f32(const std::string &key, float fallback) const;
    std::optional<std::string_view> str(const std::string &key) const;
    const gguf::File &file() const { return file_; }
    HParams &hp() { return out_.hp; }

    // Tensors, checked: a matrix [n_in, n_out] of a type the backends take, or an F32 vector [n].
    // Returns the tensor's index for the nodes, or -1 when absent and not required.
    int32_t matrix(const std::string &name, int64_t n_in, int64_t n_out, bool required = true);
    int32_t vector(const std::string &name, int64_t n, bool required = true);
    // A tensor's record (to read a shape before checking it), or nullptr.
    const TensorRef *find(const std::string &name) const;

    // The program. Buffers are per token row unless `logits` (one row per logits row).
    int32_t buf(uint32_t width, bool logits = false);
    void layer(int32_t il) { layer_ = il; }   // the layer the next ops belong to (-1 before the first)
    void get_rows(int32_t dst, int32_t w);
    void rms_norm(int32_t dst, int32_t src, int32_t w, float eps, uint32_t group);
    void matmul(int32_t dst, int32_t src, int32_t w, int32_t bias = -1);
    struct Rope {
        uint32_t n_rot = 0, mode = EMBER_GRAPH_ROPE_NORMAL;
        float theta = 10000.0f, freq_scale = 1.0f;
        int32_t factors = -1;
    };
    void rope(int32_t dst, uint32_t n_head, uint32_t head_dim, const Rope &r);
    void kv_store(int32_t k, int32_t v);
    void attention(int32_t dst, int32_t q, uint32_t n_head, uint32_t n_head_kv, uint32_t head_dim, float scale);
    void add(int32_t dst, int32_t src);
    void swiglu(int32_t dst, int32_t gate, int32_t up);
    void gather_logits(int32_t dst, int32_t src);
    void output(int32_t logits_buf);

private:
    ember_graph_node &node(uint32_t op);
    uint32_t width(int32_t buf) const;

    const gguf::File &file_;
    std::string prefix_;
    std::map<std::string_view, const TensorRef *> by_name_;
    std::map<const TensorRef *, int32_t> index_;
    ModelDesc &out_;
    int32_t layer_ = -1;
};

struct ArchSpec {
    const char *name;                 // general.architecture
    void (*build)(ArchBuilder &b);    // reads hyper-parameters and tensors, emits the program
};

// Each arch_<name>.cpp defines `extern const ArchSpec arch_spec_<name>`; the build writes the list of
// them from the files present (CMakeLists.txt: arch_list.inc), so adding an architecture edits no list.
// nullptr when the architecture is not supported by this build.
const ArchSpec *arch_find(std::string_view name);
// Comma-separated list of supported names (sorted), for error messages.
std::string arch_supported_list();

// The usual decoder: token embedding; per layer x += Wo·attn(rope(Wq·n(x)), rope(Wk·n(x)), Wv·n(x)),
// x += Wd·(silu(Wg·n(x)) * Wu·n(x)) with RMSNorms n; output norm and vocabulary product.
struct DecoderLayer {
    uint32_t il;           // layer index
    std::string prefix;    // "blk.<il>."
    int32_t q, k, v;       // the layer's q, k, v buffers, after their products
    float eps;             // the model's RMSNorm epsilon
};
struct DecoderOptions {
    uint32_t rope_mode = EMBER_GRAPH_ROPE_NORMAL;
    bool qkv_bias_required = false;   // attn_q/k/v biases must be present (they are used whenever present)
    // An architecture's own ops between the Q/K/V products and rope (e.g. Qwen3's per-head q/k norm), or
    // nullptr: what lets a variant of the usual decoder live in its own file.
    void (*after_qkv)(ArchBuilder &b, const DecoderLayer &l) = nullptr;
};
void build_decoder(ArchBuilder &b, const DecoderOptions &opt);

} // namespace ember
