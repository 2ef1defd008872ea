// arch_qwen3.cpp — Qwen3 (dense): Qwen2's decoder without the Q/K/V biases and with a per-head RMSNorm
// of q and k (attn_q_norm, attn_k_norm: head_dim weights shared by all heads) before rope.
#include "model/arch.hpp"

namespace ember {
namespace {

void qk_norm(ArchBuilder &b, const DecoderLayer &l) {
    const uint32_t hd = b.hp().head_dim;
    b.rms_norm(l.q, l.q, b.vector(l.prefix + "attn_q_norm.weight", hd), l.eps, hd);
    b.rms_norm(l.k, l.k, b.vector(l.prefix + "attn_k_norm.weight", hd), l.eps, hd);
}

} // namespace

// Found by arch.cpp through the list CMake writes from the arch_*.cpp files (arch_list.inc).
extern const ArchSpec arch_spec_qwen3 = {"qwen3", [](ArchBuilder &b) {
                                 DecoderOptions o;
                                 o.rope_mode = EMBER_GRAPH_ROPE_NEOX;
                                 o.after_qkv = qk_norm;
                                 build_decoder(b, o);
                             }};
} // namespace ember
