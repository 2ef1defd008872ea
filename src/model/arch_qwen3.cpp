// arch_qwen3.cpp — Qwen3 (dense): Qwen2's decoder without the Q/K/V biases and with a per-head RMSNorm
// of q and k (attn_q_norm, attn_k_norm: head_dim weights shared by all heads) before rope.
#include "model/arch.hpp"

namespace ember {
// Found by arch.cpp through the list CMake writes from the arch_*.cpp files (arch_list.inc).
extern const ArchSpec arch_spec_qwen3 = {"qwen3", [](ArchBuilder &b) {
                                 DecoderOptions o;
                                 o.rope_mode = EMBER_GRAPH_ROPE_NEOX;
                                 o.after_qkv = qk_norm_per_head;
                                 build_decoder(b, o);
                             }};
} // namespace ember
