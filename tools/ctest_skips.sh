#!/usr/bin/env bash
# Prints, after a ctest run, one line per test that skipped, with the reason it printed (its lines
# starting "SKIP:", "SKIP part:" or "skipped:"):
#   skipped: test_cuda_models: the cuda module is not built (...)
#   partly skipped: test_models: stories260K/stories260K-q8_0.gguf not found
# "skipped" is a test ctest reports as skipped (exit 77: it had nothing to run here); "partly skipped"
# a test that passed but skipped some of its cases (a cmocka skip() with its reason). ctest itself shows
# only "(Skipped)" and no reason; the reasons are in Testing/Temporary/LastTest.log, which holds every
# test's output.
# usage: bash tools/ctest_skips.sh [BUILD_DIR [CTEST_OUTPUT]]
#   CTEST_OUTPUT: what ctest printed (tools/test.sh keeps it), whose "(Skipped)" lines say which tests
#   skipped as a whole; without it every test that printed a reason is listed as "skipped".
set -euo pipefail
log=${1:-build}/Testing/Temporary/LastTest.log
console=${2:-}
[ -f "$log" ] || exit 0
whole=""
if [ -n "$console" ] && [ -f "$console" ]; then
  whole=$(sed -n 's/^[[:space:]]*[0-9]* - \([^ ]*\) (Skipped)$/\1/p' "$console" | tr '\n' ' ')
fi
awk -v whole=" $whole" -v known="$([ -n "$console" ] && echo 1 || echo 0)" '
  /^[0-9]+\/[0-9]+ Testing: / { name = $3; reasons = "" }
  /^(SKIP|SKIP part|skipped): / {
    r = $0; sub(/^(SKIP|SKIP part|skipped): /, "", r)
    if (index(reasons, r) == 0) reasons = reasons (reasons == "" ? "" : "; ") r
  }
  /^"[^"]+" end time:/ {
    if (reasons != "") {
      full = !known || index(whole " ", " " name " ") > 0
      printf "%s: %s: %s\n", full ? "skipped" : "partly skipped", name, reasons
      if (full) n++; else p++
    }
    reasons = ""
  }
  END {
    if (n) printf "%d test(s) skipped as a whole, each for the reason given\n", n
    if (p) printf "%d test(s) passed with some cases skipped, for the reasons given\n", p
  }
' "$log"
