#include "model/arch.hpp"

namespace ember {

extern const ArchSpec kArchLlama;
extern const ArchSpec kArchQwen2;

namespace {
const ArchSpec *const kArchs[] = {&kArchLlama, &kArchQwen2};
}

const ArchSpec *arch_find(std::string_view name) {
    for (const ArchSpec *a : kArchs)
        if (name == a->name) return a;
    return nullptr;
}

const char *arch_supported_list() { return "llama, qwen2"; }

} // namespace ember
