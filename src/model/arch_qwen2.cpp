// arch_qwen2.cpp — Qwen2 / Qwen2.5: the llama block with biases on Q, K and V and NEOX-style rope.
#include "model/arch.hpp"

namespace ember {
extern const ArchSpec kArchQwen2 = {"qwen2", /*rope_neox=*/true, /*qkv_bias_required=*/true};
} // namespace ember
