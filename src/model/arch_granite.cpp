// arch_granite.cpp — IBM Granite (3.x dense): Llama's decoder with four multipliers from the file:
// embeddings times embedding_scale, each block's output times residual_scale before the residual add,
// attention scores times attention.scale (in place of 1/sqrt(head_dim)), logits divided by logit_scale.
#include "model/arch.hpp"

#include "core/error.hpp"

namespace ember {
// Found by arch.cpp through the list CMake writes from the arch_*.cpp files (arch_list.inc).
extern const ArchSpec arch_spec_granite = {"granite", [](ArchBuilder &b) {
                                   DecoderOptions o;
                                   o.embd_scale = b.f32("embedding_scale", 1.0f);
                                   o.residual_scale = b.f32("residual_scale", 1.0f);
                                   o.attn_scale = b.f32("attention.scale", 0.0f);
                                   const float logit_scale = b.f32("logit_scale", 1.0f);
                                   if (!(logit_scale > 0)) fail(EMBER_ERR_INVALID_MODEL, "granite.logit_scale must be positive");
                                   o.logit_scale = 1.0f / logit_scale;
                                   build_decoder(b, o);
                               }};
} // namespace ember
