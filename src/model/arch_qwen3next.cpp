// arch_qwen3next.cpp — Qwen3-Next (80B-A3B): arch_qwen35.cpp's hybrid of Gated DeltaNet and gated
// attention layers with Qwen3.5-MoE's routed plus shared experts, plain rope, the decay and write-strength
// inputs in one product (ssm_ba) and each key head's value heads adjacent.
#include "model/arch.hpp"

namespace ember {
// Found by arch.cpp through the list CMake writes from the arch_*.cpp files (arch_list.inc).
extern const ArchSpec arch_spec_qwen3next = {"qwen3next", [](ArchBuilder &b) { build_qwen35(b, true, true); }};
} // namespace ember
