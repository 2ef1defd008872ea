// arch.hpp — what distinguishes one decoder architecture from another, as data.
//
// Each supported architecture is one small file (arch_<name>.cpp) defining an ArchSpec; the generic
// loader (model_loader.cpp) reads "<arch>.*" metadata keys and the standard GGUF tensor names
// (token_embd, blk.N.attn_q, ...) and applies the spec's choices.
#pragma once

#include <string_view>

namespace ember {

struct ArchSpec {
    const char *name;        // general.architecture
    bool rope_neox;          // rotate (i, i + n_rot/2) pairs (NEOX style) instead of (2i, 2i + 1)
    bool qkv_bias_required;  // attn_q/k/v biases must be present (they are used whenever present)
};

// nullptr when the architecture is not supported by this build.
const ArchSpec *arch_find(std::string_view name);
// Comma-separated list of supported names, for error messages.
const char *arch_supported_list();

} // namespace ember
