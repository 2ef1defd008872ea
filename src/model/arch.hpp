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
    // A per-layer value "<arch>.<key>" given as one number for every layer or as an array of n_layer
    // (integers or bools); the fallback for every layer when absent (or EMBER_ERR_INVALID_MODEL).
    std::vector<uint32_t> u32_per_layer(const std::string &key, uint32_t n_layer, std::optional<uint32_t> fallback) const;
    const gguf::File &file() const { return file_; }
    const std::string &arch() const { return out_.arch; }
    HParams &hp() { return out_.hp; }
    ModelDesc &desc() { return out_; }

    // Tensors, checked: a matrix [n_in, n_out] of a type the backends take, or an F32 vector [n].
    // Returns the tensor's index for the nodes, or -1 when absent and not required.
    int32_t matrix(const std::string &name, int64_t n_in, int64_t n_out, bool required = true);
    int32_t vector(const std::string &name, int64_t n, bool required = true);
    // Rows [row0, row0 + n_rows) of a matrix [n_in, n_total] as a matrix of its own (a fused tensor's
    // part: Phi-3's attn_qkv, its ffn_up holding gate then up). The rows are contiguous in the file.
    int32_t matrix_rows(const std::string &name, int64_t n_in, int64_t n_total, int64_t row0, int64_t n_rows);
    // Experts: a 3-D tensor [n_in, n_out, n_expert] of a matrix type, or an F32 [n, n_expert] of biases.
    int32_t experts(const std::string &name, int64_t n_in, int64_t n_out, int64_t n_expert, bool required = true);
    int32_t expert_bias(const std::string &name, int64_t n, int64_t n_expert);
    // A matrix of one output row [n_in, 1], stored as a vector [n_in] or as such a matrix (Qwen3.5-MoE's
    // shared expert gate).
    int32_t row_matrix(const std::string &name, int64_t n_in);
    // An F32 tensor [ne0, ne1] read by an op other than MATMUL (a convolution's kernel).
    int32_t f32_matrix(const std::string &name, int64_t ne0, int64_t ne1);
    // Values [offset, offset + n) of an F32 tensor of `total` values in any shape (Mamba-2's ssm_a and
    // ssm_d of [1, heads], a group's row of its ssm_norm [width, groups]) as an F32 vector [n].
    int32_t f32_slice(const std::string &name, int64_t total, int64_t offset, int64_t n);
    // An F32 vector of values computed here (e.g. rope frequency factors from metadata).
    int32_t made_vector(const std::string &name, std::vector<float> values);
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
        // YaRN / LongRoPE (graph.h's ROPE_YARN; emitted instead of ROPE when ext_factor != 0 or
        // attn_factor != 1).
        float ext_factor = 0.0f, attn_factor = 1.0f, beta_fast = 32.0f, beta_slow = 1.0f;
        uint32_t n_ctx_orig = 0;
    };
    void rope(int32_t dst, uint32_t n_head, uint32_t head_dim, const Rope &r);
    void kv_store(int32_t k, int32_t v);
    // ATTENTION, or ATTENTION_EXT when the options ask for it.
    struct AttnExt {
        uint32_t window = 0;
        float softcap = 0;
        int32_t sinks = -1;
        uint32_t local_chunk = 0;                  // chunked local attention (graph.h)
        float temp_scale = 0, temp_offset = 0;     // attention temperature (graph.h; scale 0: none)
        uint32_t temp_floor = 0;
        bool bidirectional = false;   // graph.h's EMBER_GRAPH_MASK_SEQUENCE
    };
    void attention(int32_t dst, int32_t q, uint32_t n_head, uint32_t n_head_kv, uint32_t head_dim, float scale,
                   const AttnExt &ext);
    void add(int32_t dst, int32_t src);
    // ATTENTION / ATTENTION_EXT over the cache of an earlier layer (graph.h's kv_from): the last node
    // emitted must be that attention.
    void read_kv_of(int32_t layer);
    // The encoders' ops (graph.h): LayerNorm with optional weight and bias, plain GELU, learned positions.
    void layer_norm(int32_t dst, int32_t src, int32_t w, int32_t b, float eps);
    void gelu(int32_t dst, int32_t src);
    void add_pos_rows(int32_t dst, int32_t table);
    // An F32 matrix [ne0, ne1] of values computed here (e.g. position embeddings with a constant row added).
    int32_t made_matrix(const std::string &name, std::vector<float> values, int64_t ne0, int64_t ne1);
    // A tensor's values as f32 (F32, F16 or BF16 only), for tables the architecture folds at load.
    std::vector<float> f32_values(const TensorRef &t) const;
    void swiglu(int32_t dst, int32_t gate, int32_t up);
    void geglu(int32_t dst, int32_t gate, int32_t up);
    void scale(int32_t dst, int32_t src, float s);
    void softcap(int32_t dst, int32_t src, float cap);
    struct Moe {
        int32_t gate = -1, up = -1, down = -1, gate_b = -1, up_b = -1, down_b = -1;
        int32_t sel_bias = -1;   // EMBER_GRAPH_MOE_GATE_SIGMOID's choice bias, F32 [n_expert]
        uint32_t n_expert = 0, n_used = 0, gating = EMBER_GRAPH_MOE_GATE_SOFTMAX_TOPK, act = EMBER_GRAPH_ACT_SILU;
        float alpha = 0, limit = 0;
    };
    void moe(int32_t dst, int32_t src, int32_t router_logits, const Moe &m);
    void gather_logits(int32_t dst, int32_t src);
    void output(int32_t logits_buf);
    // A program fed by another pass (graph.h's INPUT_ROWS: the batch's input rows into dst), and the
    // per-token buffer a pass returns on request (model_desc.hpp's hidden_buf).
    void input_rows(int32_t dst);
    void hidden_rows(int32_t buf);
    // The hybrid families' ops (graph.h): columns offset..offset+n_cols of each of n_group groups (into dst
    // from column dst_col); src *
    // sigmoid(gate); a causal convolution with a carried window; the gated delta rule. The last two take
    // their share of the sequence's recurrent state.
    void copy_cols(int32_t dst, int32_t src, uint32_t n_group, uint32_t offset, uint32_t n_cols, uint32_t dst_col = 0);
    void sigmoid_mul(int32_t dst, int32_t src, int32_t gate);
    void mul(int32_t dst, int32_t a, int32_t b);   // elementwise a * b
    // silu false: the convolution's sum itself (LFM2); bias: an F32 [channels] vector or -1.
    void ssm_conv(int32_t dst, int32_t src, int32_t kernel, bool silu = true, int32_t bias = -1);
    struct GatedDelta {
        uint32_t n_head = 0, n_head_k = 0, head_dim = 0;   // value heads, key heads, their dimension
        int32_t dt = -1, decay = -1;                       // F32 [n_head] tensors
        float eps = 1e-6f, scale = 1.0f;
        bool grouped = false;   // value head h reads key head h / (n_head / n_head_k), else h % n_head_k
    };
    void gated_delta(int32_t dst, int32_t qkv, int32_t a, int32_t b, const GatedDelta &g);
    // Mamba-2's scan (graph.h's SSM_SCAN): xbc rows of x, B, C; dt one per head.
    struct Scan {
        uint32_t n_head = 0, head_dim = 0, n_group = 0, d_state = 0;
        int32_t A = -1, D = -1, dt_bias = -1;   // F32 [n_head] tensors
    };
    void ssm_scan(int32_t dst, int32_t xbc, int32_t dt, const Scan &s);

private:
    ember_graph_node &node(uint32_t op);
    const TensorRef *checked_matrix(const std::string &name, int64_t n_in, int64_t n_out, bool required) const;
    uint32_t state(uint64_t floats);   // reserves floats of the sequence's state; returns their offset
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
    // The file's multi-token-prediction block as a program of its own (the draft of speculative decoding,
    // spec/mtp_draft.hpp): returns false when the file carries none. nullptr: the family has none.
    bool (*build_mtp)(ArchBuilder &b) = nullptr;
};

// Each arch_<name>.cpp defines `extern const ArchSpec arch_spec_<name>`; the build writes the list of
// them from the files present (CMakeLists.txt: arch_list.inc), so adding an architecture edits no list.
// nullptr when the architecture is not supported by this build.
const ArchSpec *arch_find(std::string_view name);
// Comma-separated list of supported names (sorted), for error messages.
std::string arch_supported_list();

// The usual decoder: token embedding; per layer x += Wo·attn(rope(Wq·n(x)), rope(Wk·n(x)), Wv·n(x)),
// x += Wd·(silu(Wg·n(x)) * Wu·n(x)) with RMSNorms n; output norm and vocabulary product. The options
// cover the variants of that shape the supported families use (each file says which it takes).
struct DecoderLayer {
    uint32_t il;           // layer index
    std::string prefix;    // "blk.<il>."
    int32_t q, k, v;       // the layer's q, k, v buffers, after their products
    float eps;             // the model's RMSNorm epsilon
};
struct DecoderOptions {
    uint32_t rope_mode = EMBER_GRAPH_ROPE_NORMAL;
    bool qkv_bias_required = false;   // attn_q/k/v biases must be present (they are used whenever present)
    bool fused_qkv = false;           // attn_qkv.weight (q, k, v rows in turn) when present (Phi-3)
    // An architecture's own ops between the Q/K/V products and rope (e.g. Qwen3's per-head q/k norm), or
    // nullptr: what lets a variant of the usual decoder live in its own file.
    void (*after_qkv)(ArchBuilder &b, const DecoderLayer &l) = nullptr;

    // Norms: attn_norm / <ffn_norm> before each block (pre), post_attention_norm / post_ffw_norm on each
    // block's output before it joins the residual stream (post: Gemma 2/3 have both, OLMo 2 only post).
    bool pre_norms = true, post_norms = false;
    const char *ffn_norm = "ffn_norm";   // gpt-oss calls its pre-FFN norm post_attention_norm

    // The FFN: gated by SiLU (SwiGLU) or GELU (GeGLU); ffn_up holding gate then up (Phi-3); a mixture
    // of experts when ffn_gate_inp is present (required with moe_required).
    uint32_t act = EMBER_GRAPH_ACT_SILU;
    bool fused_gate_up = false;
    bool moe_required = false;
    uint32_t moe_gating = EMBER_GRAPH_MOE_GATE_SOFTMAX_TOPK;
    uint32_t moe_act = EMBER_GRAPH_ACT_SILU;
    float moe_alpha = 0, moe_limit = 0;

    // Multipliers (1: none): of the embeddings, of each block's output before the residual add
    // (Granite), of the logits.
    float embd_scale = 1.0f, residual_scale = 1.0f, logit_scale = 1.0f;
    // Attention: score scale (0: 1/sqrt(head_dim)), score softcap and final logit softcap (0: none),
    // per-head sinks (attn_sinks.weight, gpt-oss).
    float attn_scale = 0.0f, attn_softcap = 0.0f, final_softcap = 0.0f;
    bool sinks = false;
    // Sliding window: `window` positions (0: none) in the layers il with il % window_pattern <
    // window_pattern - 1 (0: every layer; 2: the even layers; 6: five of every six), which rope with
    // base window_theta and no scaling when it is nonzero (Gemma 3's local layers).
    uint32_t window = 0, window_pattern = 0;
    float window_theta = 0.0f;
    // The window layers rope with the file's base but without its scaling (OLMo 3 with YaRN).
    bool window_rope_unscaled = false;
    // Attention temperature in every layer (graph.h's ATTENTION_EXT; scale 0: none): Mistral 3's.
    float attn_temp_scale = 0, attn_temp_offset = 0;
    uint32_t attn_temp_floor = 0;
    // Layers il with (il + 1) % no_rope_step == 0 have no rotary embedding at all (0: every layer has it;
    // SmolLM3's and Llama 4's every fourth).
    uint32_t no_rope_step = 0;
    // Per layer, whether it has the window (a file's attention.sliding_window_pattern array): decides
    // instead of window_pattern where not empty.
    std::vector<bool> window_layers;
    // Attention both ways in every layer (an encoder made of a decoder's layers: EmbeddingGemma); a file's
    // <arch>.attention.causal false asks for the same.
    bool bidirectional = false;
};
void build_decoder(ArchBuilder &b, const DecoderOptions &opt);
// attention.sliding_window_pattern as Gemma 3's files give it: absent (the fallback period), one period p
// (layer il has the window when il % p < p - 1) or one flag per layer; into opt's window_pattern or
// window_layers.
void read_window_pattern(ArchBuilder &b, DecoderOptions &opt, uint32_t fallback_period);
// build_decoder's readers, for architectures that write their own layers: the shape ("<arch>.*" keys,
// checked; with experts) into b.hp(), and the rotary embedding (rope_mode: an ember_graph_rope_mode).
void read_decoder_shape(ArchBuilder &b, bool moe);
// The token embedding token_embd.weight ([n_embd, n_vocab]; refused when missing): sets hp.n_vocab from it
// and returns its tensor index.
int32_t token_embedding(ArchBuilder &b);
// The decoder's head: the residual stream x's logits rows through output_norm and the vocabulary product
// (output.weight, or the embedding tok_embd where tied); returns the logits buffer. `norm`: the final
// norm's tensor (LFM2 names it token_embd_norm).
// With `hidden`, every token row goes through the output norm, and those normed rows are the program's
// hidden rows (what a multi-token-prediction block reads); the logits rows are gathered from them.
int32_t decoder_logits(ArchBuilder &b, int32_t x, int32_t tok_embd, float eps, const char *norm = "output_norm.weight",
                       bool hidden = false);
// decoder_logits with the norm and the vocabulary matrix given (tensor indices).
int32_t logits_head(ArchBuilder &b, int32_t x, int32_t norm_w, int32_t out_w, float eps, bool hidden);
ArchBuilder::Rope read_decoder_rope(ArchBuilder &b, uint32_t rope_mode);
// Qwen3.5 / Qwen3.6 (arch_qwen35.cpp): Gated DeltaNet layers beside gated attention, a dense FFN or
// routed plus shared experts (qwen35moe); Qwen3-Next (next) the same layers with its own tensor layout.
void build_qwen35(ArchBuilder &b, bool moe, bool next = false);
// Their multi-token-prediction block (arch_qwen35_mtp.cpp), ArchSpec::build_mtp's contract.
bool build_qwen35_mtp(ArchBuilder &b, bool moe);
// Embedding models: <arch>.pooling_type (and <arch>.attention.causal) into b's description; returns the
// pooling (Pooling::None for a generating model). `encoder`: bidirectional whatever the file says.
Pooling read_pooling(ArchBuilder &b, bool encoder);
// The output of an embedding model whose last hidden state (after its output norm, if any) is `hidden`
// (per token): every row's hidden state (mean, CLS, last pooling; the host pools), or for Rank the ranking
// head — cls (+ bias, tanh) then cls_out (+ bias) — over the rows asked for. Sets the program's output.
void embedding_output(ArchBuilder &b, int32_t hidden, Pooling pooling);
// The encoders' pieces (arch_bert.cpp; nomic-bert's too): the post-norm residual x = LN(tmp + x) with the
// LayerNorm <norm>.weight / <norm>.bias (tmp is overwritten), and the end of the program: every token row
// of x to embedding_output.
void encoder_residual_norm(ArchBuilder &b, int32_t x, int32_t tmp, const std::string &norm, float eps);
void encoder_output(ArchBuilder &b, int32_t x, Pooling pooling);
// An attention layer's common tail: rope of q and k (none for a null rope or n_rot 0), the KV store of k and
// v, and the attention of q into attn with the model's heads (hp) and `scale`.
void rope_store_attend(ArchBuilder &b, int32_t q, int32_t k, int32_t v, int32_t attn, const ArchBuilder::Rope *rope,
                       float scale);
// A layer's routed experts by their usual names (blk.N.ffn_{gate,up,down}_exps), n_ff wide, the model's
// expert counts; the gating and options left to the caller.
ArchBuilder::Moe read_experts(ArchBuilder &b, const std::string &p, uint32_t n_ff);
// The hybrids whose recurrent layers are those of attention.head_count_kv 0 (LFM2, Granite 4; defined in
// arch_lfm2.cpp): that key as one count per layer, or one for every layer (no recurrent layer); sets
// hp.n_head_kv to the attention layers' count (they must agree) and returns which layers are recurrent.
std::vector<bool> read_recurrent_layers(ArchBuilder &b);
// An after_qkv hook: RMSNorm of each head of q and k with the layer's attn_q_norm / attn_k_norm weights
// (head_dim each, shared by the heads) — Qwen3's, Qwen3-MoE's and Gemma 3's.
void qk_norm_per_head(ArchBuilder &b, const DecoderLayer &l);

} // namespace ember
