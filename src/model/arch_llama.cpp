// arch_llama.cpp — Llama 1/2/3, TinyLlama, Mistral-style and SmolLM checkpoints: the usual decoder with
// rope on adjacent pairs, grouped-query attention, SwiGLU, tied or separate output; Llama-3 rope
// scaling from the optional rope_freqs tensor, linear scaling from <arch>.rope.scaling.*.
#include "model/arch.hpp"

namespace ember {
// Found by arch.cpp through the list CMake writes from the arch_*.cpp files (arch_list.inc).
extern const ArchSpec arch_spec_llama = {"llama", [](ArchBuilder &b) { build_decoder(b, {}); }};
} // namespace ember
