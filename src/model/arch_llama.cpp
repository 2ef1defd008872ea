// arch_llama.cpp — Llama 1/2/3, TinyLlama, Mistral-style and SmolLM checkpoints: RMSNorm, RoPE on
// adjacent pairs, grouped-query attention, SwiGLU, tied or separate output; Llama-3 rope scaling comes
// from the optional rope_freqs tensor, linear scaling from <arch>.rope.scaling.*.
#include "model/arch.hpp"

namespace ember {
extern const ArchSpec kArchLlama = {"llama", /*rope_neox=*/false, /*qkv_bias_required=*/false};
} // namespace ember
