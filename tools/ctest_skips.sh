#!/usr/bin/env bash
# Prints one line per test that the last ctest run in BUILD_DIR skipped, with the reason the test
# printed (its first line starting "SKIP:" or "skipped:"), e.g.
#   skipped: test_cuda_models — the cuda module is not built (...)
# ctest itself shows only "(Skipped)"; the reasons are in Testing/Temporary/LastTest.log, where a skip
# (exit 77) is recorded with the test's whole output.
# usage: bash tools/ctest_skips.sh [BUILD_DIR]    (default: build)
set -euo pipefail
log=${1:-build}/Testing/Temporary/LastTest.log
[ -f "$log" ] || exit 0
# The log records a skip (exit 77 under SKIP_RETURN_CODE) as "Test Passed.", so the test's own "SKIP:"
# line is what marks it here. Partial skips ("SKIP part: ...") inside passing tests are not listed.
awk '
  /^[0-9]+\/[0-9]+ Testing: / { name = $3; reason = "" }
  reason == "" && /^(SKIP|skipped): / { reason = $0; sub(/^(SKIP|skipped): /, "", reason) }
  /^"[^"]+" end time:/ { if (reason != "") { printf "skipped: %s: %s\n", name, reason; n++ } reason = "" }
  END { if (n) printf "%d test(s) skipped, each for the reason given above\n", n }
' "$log"
