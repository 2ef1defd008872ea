// arch_gpt_oss.cpp — OpenAI gpt-oss: biased Q/K/V/O products, attention sinks (one learned logit per
// head, attn_sinks), a 128-position sliding window in the even layers, YaRN rope (NEOX pairs), and a
// mixture of experts in every layer: a biased router, the top expert_used_count experts weighted by the
// softmax of their logits, biased experts with gpt-oss's clamped SwiGLU (alpha 1.702, limit 7). Its
// pre-FFN norm is the tensor named post_attention_norm.
#include "model/arch.hpp"

namespace ember {
// Found by arch.cpp through the list CMake writes from the arch_*.cpp files (arch_list.inc).
extern const ArchSpec arch_spec_gpt_oss = {"gpt-oss", [](ArchBuilder &b) {
                                   DecoderOptions o;
                                   o.rope_mode = EMBER_GRAPH_ROPE_NEOX;
                                   o.ffn_norm = "post_attention_norm";
                                   o.sinks = true;
                                   o.window = b.u32("attention.sliding_window", 128u);
                                   o.window_pattern = 2;
                                   o.moe_required = true;
                                   o.moe_act = EMBER_GRAPH_ACT_SWIGLU_OAI;
                                   o.moe_alpha = 1.702f;
                                   o.moe_limit = 7.0f;
                                   build_decoder(b, o);
                               }};
} // namespace ember
