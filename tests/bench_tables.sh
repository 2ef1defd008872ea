#!/usr/bin/env bash
# test_bench_tables: docs/benchmarks.md's summary tables are what tools/bench_tables.py makes of the
# recorded results in bench/results/, so the page cannot drift from the measurements. Skips (77) where
# python3 is missing.
# usage: bench_tables.sh SOURCE_DIR
set -euo pipefail
command -v python3 >/dev/null || { echo "skipped: python3 not found"; exit 77; }
exec python3 "$1/tools/bench_tables.py" --check "$1/docs/benchmarks.md"
