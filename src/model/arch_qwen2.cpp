// arch_qwen2.cpp — Qwen2 / Qwen2.5: the usual decoder with biases on Q, K and V and NEOX-style rope.
#include "model/arch.hpp"

namespace ember {
// Found by arch.cpp through the list CMake writes from the arch_*.cpp files (arch_list.inc).
extern const ArchSpec arch_spec_qwen2 = {"qwen2", [](ArchBuilder &b) {
                                 DecoderOptions o;
                                 o.rope_mode = EMBER_GRAPH_ROPE_NEOX;
                                 o.qkv_bias_required = true;
                                 build_decoder(b, o);
                             }};
} // namespace ember
