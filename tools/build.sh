#!/usr/bin/env bash
# Configures and builds ember (release build with debug info) into ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j "${EMBER_JOBS:-2}"
