#!/usr/bin/env bash
# Configures and builds ember (release build with debug info) into ./build.
#   bash tools/build.sh           everything: library, backends, CLI, tools, samples, tests, bindings' tests
#   bash tools/build.sh --quick   what the first token needs: libember (with the CPU backend), the ember CLI,
#                                 and the GPU backend modules whose SDK is installed (README command 1)
# Both use the same build directory, so the full build after a quick one compiles only what is left.
# ccache is used when installed. EMBER_JOBS sets the parallel jobs (default 2); extra arguments go to
# CMake's configure step (e.g. -DEMBER_CUDA=OFF).
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
if [ "${1:-}" = "--quick" ]; then quick=1; shift; fi
jobs=${EMBER_JOBS:-2}
launcher=()
if command -v ccache > /dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
if [ $quick -eq 1 ]; then
  parts=(-DEMBER_BUILD_TESTS=OFF -DEMBER_BUILD_SAMPLES=OFF)
else
  parts=(-DEMBER_BUILD_TESTS=ON -DEMBER_BUILD_SAMPLES=ON)
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" "${parts[@]}" "$@"
if [ $quick -eq 1 ]; then
  # The CLI pulls in libember; the backend modules are separate targets, present only where CMake found
  # their SDK (vulkan: glslc and headers; cuda: nvcc and the toolkit).
  targets=(ember_cli)
  for t in ember_vulkan ember_cuda; do
    if ninja -C build -t query "$t" > /dev/null 2>&1; then targets+=("$t"); fi
  done
  cmake --build build -j "$jobs" --target "${targets[@]}"
else
  cmake --build build -j "$jobs"
fi
