// arch_phi3.cpp — Phi-3, Phi-3.5 and Phi-4-mini: the usual decoder with Q, K and V in one fused matrix
// (attn_qkv, or separate where a file splits them), gate and up in one (ffn_up: gate rows, then up
// rows), NEOX rope over rope.dimension_count dims (partial rotary: 96 of 128 in Phi-4-mini), LongRoPE
// factors with rope.scaling.attn_factor. This program ropes with rope_factors_short; the model derives
// the one for contexts beyond rope.scaling.original_context_length, rope_factors_long in their place
// (Model::build_long_context: a context takes it by its size, as in llama.cpp). The files'
// sliding_window is not applied, as in llama.cpp (the converters write it where the model was trained
// without it).
#include "model/arch.hpp"

namespace ember {
// Found by arch.cpp through the list CMake writes from the arch_*.cpp files (arch_list.inc).
extern const ArchSpec arch_spec_phi3 = {"phi3", [](ArchBuilder &b) {
                                DecoderOptions o;
                                o.rope_mode = EMBER_GRAPH_ROPE_NEOX;
                                o.fused_qkv = true;
                                o.fused_gate_up = true;
                                build_decoder(b, o);
                            }};
} // namespace ember
