#include "model/arch.hpp"

namespace ember {

extern const ArchSpec kArchLlama;
extern const ArchSpec kArchQwen2;
extern const ArchSpec kArchQwen3;

namespace {
const ArchSpec *const kArchs[] = {&kArchLlama, &kArchQwen2, &kArchQwen3};
}

const ArchSpec *arch_find(std::string_view name) {
    for (const ArchSpec *a : kArchs)
        if (name == a->name) return a;
    return nullptr;
}

const char *arch_supported_list() { return "llama, qwen2, qwen3"; }

} // namespace ember
