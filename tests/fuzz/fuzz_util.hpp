// fuzz_util.hpp — what the fuzz targets share: where the models are, and a failure that libFuzzer
// records as a crash with its input.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/stat.h>

namespace ember::fuzz {

// A model file from models/ (env EMBER_REPO_MODELS) or ../shared/models (env EMBER_SHARED_MODELS);
// "" when absent. The defaults are the checkout's folders, compiled in by tests/fuzz/CMakeLists.txt.
inline std::string find_model(const char *env, const char *fallback_dir, const char *relative) {
    const char *dir = std::getenv(env);
    std::string path = std::string(dir && *dir ? dir : fallback_dir) + "/" + relative;
    struct stat st;
    return stat(path.c_str(), &st) == 0 ? path : std::string();
}

inline std::string repo_model(const char *relative) {
    return find_model("EMBER_REPO_MODELS", EMBER_FUZZ_REPO_MODELS, relative);
}

inline std::string shared_model(const char *relative) {
    return find_model("EMBER_SHARED_MODELS", EMBER_FUZZ_SHARED_MODELS, relative);
}

// A property the library promises does not hold: report it and abort (libFuzzer saves the input).
[[noreturn]] inline void broken(const char *what, const char *detail = "") {
    std::fprintf(stderr, "fuzz: broken promise: %s %s\n", what, detail);
    std::abort();
}

} // namespace ember::fuzz
