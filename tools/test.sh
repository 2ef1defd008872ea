#!/usr/bin/env bash
# README command 2 (and CI): install what is missing, build everything, run every test, then list each
# skipped test with the reason it printed (tools/ctest_skips.sh). Tests that need data from
# ../shared/models, a GPU or a toolchain that is missing skip (exit 77) rather than fail.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
bash tools/build.sh
status=0
out=build/Testing/Temporary/ctest-console.log
mkdir -p "$(dirname "$out")"
ctest --test-dir build --output-on-failure -j "${EMBER_JOBS:-2}" 2>&1 | tee "$out" || status=$?
bash tools/ctest_skips.sh build "$out"
exit $status
