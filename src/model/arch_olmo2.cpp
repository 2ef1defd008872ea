// arch_olmo2.cpp — OLMo 2: no norm before the blocks; each block's output is RMS-normed
// (post_attention_norm, post_ffw_norm) before the residual add; q and k are RMS-normed over their whole
// width (all heads together) before rope; NEOX rope, SwiGLU. A file with attention.sliding_window (OLMo 3
// under this name) gets it in three layers of every four, as in llama.cpp; those window layers rope with
// rope.freq_base but none of the file's scaling (OLMo 3's YaRN is the global layers' alone).
#include "model/arch.hpp"

namespace ember {
namespace {
void qk_norm(ArchBuilder &b, const DecoderLayer &l) {
    const HParams &hp = b.hp();
    b.rms_norm(l.q, l.q, b.vector(l.prefix + "attn_q_norm.weight", hp.n_embd_q()), l.eps, hp.n_embd_q());
    b.rms_norm(l.k, l.k, b.vector(l.prefix + "attn_k_norm.weight", hp.n_embd_kv()), l.eps, hp.n_embd_kv());
}
} // namespace

// Found by arch.cpp through the list CMake writes from the arch_*.cpp files (arch_list.inc).
extern const ArchSpec arch_spec_olmo2 = {"olmo2", [](ArchBuilder &b) {
                                 DecoderOptions o;
                                 o.rope_mode = EMBER_GRAPH_ROPE_NEOX;
                                 o.pre_norms = false;
                                 o.post_norms = true;
                                 o.after_qkv = qk_norm;
                                 o.window = b.u32("attention.sliding_window", 0u);
                                 o.window_pattern = 4;
                                 o.window_rope_unscaled = true;
                                 build_decoder(b, o);
                             }};
} // namespace ember
