#!/usr/bin/env bash
# README command 1: install what is missing, build, and generate text with the model shipped in models/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
bash tools/build.sh
./build/tools/ember/ember run -m models/stories15M-q8_0.gguf -p "Once upon a time" -n 40 --temp 0
