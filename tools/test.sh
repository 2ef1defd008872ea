#!/usr/bin/env bash
# README command 2 (and CI): install what is missing, build, run every test. Tests that need data from
# ../shared/models skip with a printed reason when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
bash tools/build.sh
ctest --test-dir build --output-on-failure -j "${EMBER_JOBS:-2}"
