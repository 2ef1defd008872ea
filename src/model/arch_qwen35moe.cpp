// arch_qwen35moe.cpp — Qwen3.5 / Qwen3.6 with experts (35B-A3B, 122B-A10B): arch_qwen35.cpp's layers with
// every FFN a mixture of routed experts (expert_used_count of expert_count, softmax weights renormalised
// over the chosen) plus one shared expert scaled by sigmoid(ffn_gate_inp_shexp . x).
#include "model/arch.hpp"

namespace ember {
// Found by arch.cpp through the list CMake writes from the arch_*.cpp files (arch_list.inc).
extern const ArchSpec arch_spec_qwen35moe = {"qwen35moe", [](ArchBuilder &b) { build_qwen35(b, true); },
                                             [](ArchBuilder &b) { return build_qwen35_mtp(b, true); }};
} // namespace ember
