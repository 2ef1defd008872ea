// arch.cpp — the architectures of this build: arch_list.inc, which CMake writes from the arch_*.cpp files
// present (one EMBER_ARCH(name) line each), declares and lists their specs.
#include "model/arch.hpp"

#include <algorithm>
#include <vector>

namespace ember {

#define EMBER_ARCH(name) extern const ArchSpec arch_spec_##name;
#include "arch_list.inc"
#undef EMBER_ARCH

namespace {
#define EMBER_ARCH(name) &arch_spec_##name,
const ArchSpec *const kArchs[] = {
#include "arch_list.inc"
};
#undef EMBER_ARCH
} // namespace

const ArchSpec *arch_find(std::string_view name) {
    for (const ArchSpec *a : kArchs)
        if (name == a->name) return a;
    return nullptr;
}

std::string arch_supported_list() {
    std::vector<std::string> names;
    for (const ArchSpec *a : kArchs) names.emplace_back(a->name);
    std::sort(names.begin(), names.end());
    std::string out;
    for (const std::string &n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
}

} // namespace ember
