// arch_mistral3.cpp — Mistral 3's text models (Ministral 3, Mistral Small 3.x, Devstral): Llama's decoder
// (rope on adjacent pairs, grouped-query attention, SwiGLU, optional attn_output bias) with YaRN as the
// shared rope reader takes it (its betas, and yarn_log_multiplier: the magnitude 1 + 0.1 ln(factor) over
// 1 + 0.1 multiplier ln(factor), which is 1 at Ministral's multiplier 1), and the attention temperature
// of attention.temperature_scale (the checkpoint's llama_4_scaling_beta): the query at position p scaled
// by 1 + scale ln(floor(p / n) + 1), n the original context rope.scaling.original_context_length (else
// context_length), so that it changes nothing before position n. A file with experts runs the shared
// decoder's routed experts; parts it has no op for (a shared expert, FFN biases) are refused by name.
#include "model/arch.hpp"

#include "core/error.hpp"

namespace ember {
// Found by arch.cpp through the list CMake writes from the arch_*.cpp files (arch_list.inc).
extern const ArchSpec arch_spec_mistral3 = {"mistral3", [](ArchBuilder &b) {
    for (const char *t : {"ffn_gate_shexp.weight", "ffn_gate.bias", "ffn_up.bias", "ffn_down.bias"})
        if (b.find(std::string("blk.0.") + t))
            fail(EMBER_ERR_UNSUPPORTED, "mistral3: tensor 'blk.0.%s' is not supported", t);
    DecoderOptions o;
    o.attn_temp_scale = b.f32("attention.temperature_scale", 0.0f);
    if (o.attn_temp_scale != 0.0f) {
        o.attn_temp_floor = b.u32("rope.scaling.original_context_length", b.u32("context_length", 0u));
        if (o.attn_temp_floor == 0)
            fail(EMBER_ERR_INVALID_MODEL, "metadata 'mistral3.rope.scaling.original_context_length' (the attention "
                 "temperature's length) is 0");
    }
    build_decoder(b, o);
}};
} // namespace ember
