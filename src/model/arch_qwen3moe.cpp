// arch_qwen3moe.cpp — Qwen3-MoE: Qwen3's attention (per-head q/k norm, NEOX rope, no biases) and a
// mixture of experts in every layer: the router (ffn_gate_inp) picks expert_used_count of expert_count
// SwiGLU experts (ffn_*_exps, expert_feed_forward_length wide), weighted by the softmax of the chosen
// logits (norm_topk_prob).
#include "model/arch.hpp"

namespace ember {
// Found by arch.cpp through the list CMake writes from the arch_*.cpp files (arch_list.inc).
extern const ArchSpec arch_spec_qwen3moe = {"qwen3moe", [](ArchBuilder &b) {
                                    DecoderOptions o;
                                    o.rope_mode = EMBER_GRAPH_ROPE_NEOX;
                                    o.after_qkv = qk_norm_per_head;
                                    o.moe_required = true;
                                    build_decoder(b, o);
                                }};
} // namespace ember
