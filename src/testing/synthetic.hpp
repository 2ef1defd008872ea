// synthetic.hpp — GGUF models of any shape with random weights, written by our own GGUF writer
// (library ember_testing: for tests and benchmarks, not part of libember).
//
// For tests (architecture features the shipped real models do not exercise: biases, NEOX rope, rope
// scaling factors, GQA shapes) and for speed measurements on realistic shapes (a TinyLlama-shaped Q4_0
// or Q4_K_M model, say) without downloading anything. The vocabulary is a small SentencePiece-style one.
#pragma once

#include "core/dtype.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ember {

// How the matrices' types are chosen: all `type`, or a mix by role (see synthetic.cpp for the recipe).
enum class WeightMix { Uniform, Q4_K_M };

struct SyntheticSpec {
    std::string arch = "llama";   // general.architecture
    uint32_t n_vocab = 64;        // >= 8
    uint32_t n_embd = 64;
    uint32_t n_layer = 2;
    uint32_t n_head = 4;
    uint32_t n_head_kv = 2;
    uint32_t n_ff = 96;
    uint32_t n_ctx = 512;
    DType type = DType::F32;      // matrices: F32, F16, BF16 or a quantized type the CPU kernels take (norms
                                  // and biases stay F32); K-quants need rows of whole 256-blocks, else fall back
    WeightMix mix = WeightMix::Uniform;  // Q4_K_M: `type` is ignored
    bool tied_output = true;      // no output.weight: the embedding matrix is reused
    bool qkv_bias = false;        // Q/K/V biases (qwen2 requires them)
    bool qk_norm = false;         // per-head q/k norm weights (qwen3 requires them)
    uint32_t head_dim = 0;        // 0: n_embd / n_head; else written as attention.key_length
    bool rope_freqs = false;      // add a rope_freqs.weight tensor (Llama-3 style scaling factors)
    float rope_theta = 10000.0f;
    uint64_t seed = 1;
    // Every layer's matrices the same bytes as the first layer's of that name and type (random all the
    // same): for speed tests, where the bytes read matter and not their values. An 8B-shaped model is
    // then written in seconds rather than minutes (time on a rented GPU machine is short).
    bool repeat_layers = false;

    // The other families' parts (synthetic_family() sets what each needs; all off by default).
    uint32_t n_rot = 0;           // rope.dimension_count; 0: head_dim (partial rotary: Phi-4-mini)
    bool post_norms = false;      // post_attention_norm / post_ffw_norm (Gemma 2/3, OLMo 2)
    bool pre_norms = true;        // attn_norm / ffn_norm (OLMo 2 has none)
    bool qk_norm_full = false;    // q/k norm over the whole q/k width (OLMo 2) instead of per head
    bool fused = false;           // attn_qkv and ffn_up holding gate then up (Phi-3)
    bool out_bias = false;        // attn_output.bias (gpt-oss)
    bool sinks = false;           // attn_sinks (gpt-oss)
    bool oss_norm_names = false;  // the pre-FFN norm named post_attention_norm (gpt-oss)
    uint32_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0;  // a mixture of experts (0: dense)
    bool expert_bias = false;     // router and expert biases (gpt-oss)
    uint32_t window = 0;          // attention.sliding_window (0: not written)
    float attn_softcap = 0, final_softcap = 0;  // Gemma 2's, written when nonzero
    std::string rope_scaling;     // "", "linear", "yarn" (rope.scaling.*), "longrope" (factor tensors)
    float rope_factor = 1.0f;     // rope.scaling.factor
    uint32_t rope_orig_ctx = 0;   // rope.scaling.original_context_length (yarn; longrope: where long begins)
    float rope_attn_factor = 0;   // rope.scaling.attn_factor (0: not written)
    // Granite's multipliers (0: not written).
    float embedding_scale = 0, residual_scale = 0, attention_scale = 0, logit_scale = 0;
    // Control tokens appended to the vocabulary (a family's special tokens that loaders look up).
    std::vector<std::string> control_tokens;
    // > 0: the output matrix (or the tied embedding) is scaled so the logits' standard deviation is
    // about this, as trained models' are (decisive: a clear argmax).
    float logit_std = 0;

    // Hybrids of Gated DeltaNet and gated attention (Qwen3.5, Qwen3.6, Qwen3-Next); all off by default.
    // Layer l is a full attention layer when (l + 1) % full_attn_interval == 0, a DeltaNet layer else
    // (0: every layer attention). Attention layers then have an output gate (attn_q twice as wide: per
    // head the query rows, then the gate rows) and the pre-FFN norm is named post_attention_norm.
    uint32_t full_attn_interval = 0;
    // attention.recurrent_layers: one flag per layer (true: DeltaNet), as newer converters write from the
    // checkpoint's layer_types; where written it decides, not the interval (empty: not written).
    std::vector<bool> recurrent_layers;
    uint32_t ssm_conv = 4;         // ssm.conv_kernel
    uint32_t ssm_groups = 0;       // ssm.group_count: key heads
    uint32_t ssm_heads = 0;        // ssm.time_step_rank: value heads (a multiple of the key heads)
    uint32_t ssm_state = 0;        // ssm.state_size: the head width of keys and values
    bool ssm_ba = false;           // Qwen3-Next's ssm_ba (per key head: its value heads' betas, then alphas)
                                   // instead of ssm_beta and ssm_alpha
    bool ssm_fused_in = false;     // Qwen3-Next's older files' ssm_in (per key head: q, k, then its value
                                   // heads' v and z) instead of attn_qkv and attn_gate
    std::vector<int32_t> rope_sections;  // rope.dimension_sections (empty: not written)
    uint32_t n_ff_shexp = 0;       // a gated shared expert beside the routed ones (0: none)
    // Multi-token-prediction blocks after the n_layer layers, as newer converters of these checkpoints
    // write them: block_count counts them, nextn_predict_layers says how many, and the model's own
    // forward pass runs none of them (each: an attention layer's tensors plus nextn.eh_proj, enorm,
    // hnorm and shared_head_norm).
    uint32_t n_nextn = 0;
    // Further "<arch>.<key>" metadata, written as given (a family's own keys, rope scaling's optional
    // ones: the combinations a parity test needs without a field each).
    std::vector<std::pair<std::string, float>> extra_f32;
    std::vector<std::pair<std::string, uint32_t>> extra_u32;

    // Window layouts (Gemma 3, Gemma 4): attention.sliding_window_pattern as a number (0: not written)
    // or as one flag per layer (true: a window layer; empty: not written).
    uint32_t swa_pattern = 0;
    std::vector<bool> swa_layers;
    // Gemma 4 (all off by default): the window layers' head size (attention.key_length_swa, 0: as the
    // global ones) and rope base (rope.freq_base_swa, 0: not written); the last shared_kv_layers layers
    // without K/V of their own (attention.shared_kv_layers); per-layer embeddings of n_embd_per_layer
    // values per layer; a layer_output_scale per layer; the MoE layers' dense FFN beside the experts with
    // their own norms and the router's input scale (gemma4_moe).
    uint32_t head_dim_swa = 0;
    float rope_theta_swa = 0;
    uint32_t shared_kv_layers = 0;
    uint32_t n_embd_per_layer = 0;
    bool layer_scale = false;
    bool gemma4_moe = false;
    // <arch>.pooling_type (0: not written): a decoder embedding model (3: last-token pooling, Qwen3-Embedding).
    uint32_t pooling_type = 0;

    // LFM2's gated short-convolution blocks (0: none): shortconv.l_cache taps; the layers flagged in
    // recurrent_layers are convolution blocks, attention.head_count_kv is written per layer (0 for them),
    // attention layers have per-head q/k norms and the final norm is named token_embd_norm.
    uint32_t shortconv = 0;
    // LFM2-MoE: layers from this one on have experts (leading_dense_block_count), gated by sigmoid with a
    // selection bias (exp_probs_b).
    uint32_t n_dense_lead = 0;
    // Granite 4's Mamba-2 layers (the layers flagged in recurrent_layers; head_count_kv per layer, 0 for
    // them): ssm_conv taps over x, B and C; ssm_heads heads of ssm_inner / ssm_heads; ssm_groups groups of
    // ssm_state for B and C.
    bool mamba2 = false;
    uint32_t ssm_inner = 0;
    bool no_rope = false;          // rope.scaling.finetuned false: Granite's switch for no rope at all
    // sentence-transformers' dense projections of an embedding model (EmbeddingGemma): dense_2 from n_embd to
    // this many features, dense_3 back to n_embd, with their dense_*_feat_* keys (0: none).
    uint32_t dense_features = 0;
    // Llama 4: experts (with an ungated shared expert of n_ff_shexp) only in the layers l with
    // (l + 1) % moe_layer_step == 0, a dense FFN in the others (interleave_moe_layer_step; 0: not written).
    uint32_t moe_layer_step = 0;
};

// A spec with every part `arch` has, exercised: small windows (so that a short test crosses them),
// softcaps that bite, rope scaling of the family's kind, experts. n_embd and the FFN widths are 256
// (whole K-quant super-blocks); logits decisive (std ~15). Knows llama (dense), "mixtral" (llama with
// experts), qwen2, qwen3, qwen3moe, gemma2, gemma3, phi3, granite, olmo2, gpt-oss, and the hybrids
// qwen35, qwen35moe (Qwen3.5 / Qwen3.6) and qwen3next: 8 layers, attention in layers 3 and 7 (qwen35moe:
// 1 and 7, by attention.recurrent_layers); qwen35 adds an MTP block (blk.8, unused by the forward pass);
// smollm3 (4 layers, no rope in layer 3), mistral3 (YaRN with its betas and log multiplier, attention
// temperature), and two metadata combinations: olmo3-yarn (olmo2 with windows and YaRN), qwen3-yarn
// (YaRN with an explicit attention factor).
// gemma4: 6 layers alternating window and global (head sizes 32 and 64), per-layer embeddings, the last
// two layers reading layers 2 and 3's caches; gemma4moe: gemma4's attention with experts, no per-layer
// embeddings or sharing. gemma3-p2, gemma3-layers, gemma3-global: gemma3 with
// attention.sliding_window_pattern 2, a per-layer pattern, and no attention.sliding_window.
// Not in synthetic_families() (they do not generate): "gemma-embedding", gemma3's layers as EmbeddingGemma's
// encoder (window 128, mean pooling, dense projections 256 -> 512 -> 256).
// llama4: 4 layers, experts in layers 1 and 3 (a shared expert beside them), no rope in layer 3, the
// chunk size, no-rope step and temperature llama.cpp fixes (8192, 4, 0.1 over 8192) left unwritten;
// llama4-chunked: the same with attention.chunk_size 4 and attention.temperature_length 6 written, so that
// a short sequence crosses chunks and the temperature bites (llama.cpp reads neither key).
SyntheticSpec synthetic_family(const std::string &arch);
// The names synthetic_family knows, in a fixed order.
const std::vector<std::string> &synthetic_families();

// The GGUF file's bytes. Weights are uniform in ±1/sqrt(n_in) (norm weights around 1), so activations
// stay O(1) through the layers.
std::vector<uint8_t> synthetic_model_gguf(const SyntheticSpec &spec);

} // namespace ember
