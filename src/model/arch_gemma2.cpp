// arch_gemma2.cpp — Gemma 2: GeGLU, embeddings scaled by sqrt(n_embd), RMSNorms before and after each
// block (the file's norm weights already hold Gemma's 1 + w), attention scores capped at
// attn_logit_softcapping and logits at final_logit_softcapping, a sliding window in the even layers
// (attention.sliding_window), NEOX rope, tied output.
#include "model/arch.hpp"

#include <cmath>

namespace ember {

// What Gemma 2 and 3 share (arch_gemma3.cpp uses it too). Queries are scaled by
// query_pre_attn_scalar^-1/2, which the GGUF does not carry: llama.cpp takes n_embd / n_head for the
// 27B models (told by their layer count) and head_dim otherwise, as the checkpoints were configured.
DecoderOptions gemma_decoder_options(ArchBuilder &b, uint32_t layers_of_27b) {
    const uint32_t n_layer = b.u32("block_count", std::nullopt), n_embd = b.u32("embedding_length", std::nullopt);
    const uint32_t n_head = b.u32("attention.head_count", std::nullopt);
    const uint32_t head_dim = b.u32("attention.key_length", n_head ? n_embd / n_head : 0);
    const uint32_t scalar = n_layer == layers_of_27b && n_head ? n_embd / n_head : head_dim;
    DecoderOptions o;
    o.rope_mode = EMBER_GRAPH_ROPE_NEOX;
    o.post_norms = true;
    o.act = EMBER_GRAPH_ACT_GELU;
    o.embd_scale = std::sqrt(static_cast<float>(n_embd));
    o.attn_scale = scalar ? 1.0f / std::sqrt(static_cast<float>(scalar)) : 0.0f;
    return o;
}

// Found by arch.cpp through the list CMake writes from the arch_*.cpp files (arch_list.inc).
extern const ArchSpec arch_spec_gemma2 = {"gemma2", [](ArchBuilder &b) {
                                  DecoderOptions o = gemma_decoder_options(b, 46);
                                  o.attn_softcap = b.f32("attn_logit_softcapping", 50.0f);
                                  o.final_softcap = b.f32("final_logit_softcapping", 30.0f);
                                  o.window = b.u32("attention.sliding_window", 4096u);
                                  o.window_pattern = 2;
                                  build_decoder(b, o);
                              }};
} // namespace ember
