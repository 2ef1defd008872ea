// arch_smollm3.cpp — SmolLM3: Llama's decoder (rope on adjacent pairs, grouped-query attention, SwiGLU,
// tied or separate output) with no rotary embedding in every fourth layer (layers 3, 7, 11, ...: the
// checkpoint's no_rope_layers, which the converters do not write; llama.cpp fixes the step at four too).
#include "model/arch.hpp"

namespace ember {
// Found by arch.cpp through the list CMake writes from the arch_*.cpp files (arch_list.inc).
extern const ArchSpec arch_spec_smollm3 = {"smollm3", [](ArchBuilder &b) {
                                   DecoderOptions o;
                                   o.no_rope_step = 4;
                                   build_decoder(b, o);
                               }};
} // namespace ember
