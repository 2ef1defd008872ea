#!/usr/bin/env bash
# README command 1: install what is missing, build what the first token needs, and generate text with
# the model shipped in models/. Builds libember (CPU backend), the ember CLI and the GPU backend modules
# whose SDK is already installed; nothing else (tests, samples and bindings are command 2: tools/test.sh).
# About 2-3 minutes on 2 cores from a fresh Debian 12 machine, apt included (README.md says how measured).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
step() { echo "==== quickstart [$1/3, $(( $(date +%s) - start ))s] $2"; }
step 1 "packages: cmake, ninja-build, g++, libxxhash-dev (installed only if missing)"
bash tools/install-deps.sh --minimal
step 2 "building libember and the ember CLI into build/ (ninja shows [done/total])"
bash tools/build.sh --quick
step 3 "generating 40 tokens with models/stories15M-q8_0.gguf"
./build/tools/ember/ember run -m models/stories15M-q8_0.gguf -p "Once upon a time" -n 40 --temp 0
echo "==== quickstart: done in $(( $(date +%s) - start ))s. Next: bash tools/test.sh builds and runs everything else."
