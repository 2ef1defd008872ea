// backend_arg.hpp — the backend a C++ test of the core runs its cases on: its first argument ("vulkan",
// "cuda"), or the CPU without one. Shared by the tests that run the same cases on every backend module.
#pragma once

#include "test_util.h"

#include "backend/backend.hpp"
#include "core/error.hpp"

#include <cstdio>
#include <cstring>

// Reads argv[1] into *out. Returns -1 to go on, else the exit code to return: 2 (usage) for an unknown
// name, EMBER_TEST_SKIP (with the reason printed) where that backend's module is not usable here.
inline int test_backend_arg(int argc, char **argv, ember_backend_kind *out) {
    *out = EMBER_BACKEND_CPU;
    if (argc < 2) return -1;
    if (std::strcmp(argv[1], "vulkan") == 0) *out = EMBER_BACKEND_VULKAN;
    else if (std::strcmp(argv[1], "cuda") == 0) *out = EMBER_BACKEND_CUDA;
    else return std::fprintf(stderr, "usage: %s [vulkan|cuda]\n", argv[0]), 2;
    try {
        ember::backend_require(*out);
    } catch (const ember::Error &e) {
        std::printf("SKIP: no %s backend: %s\n", argv[1], e.what());
        return EMBER_TEST_SKIP;
    }
    return -1;
}
