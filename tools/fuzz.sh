#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang, ASan and UBSan into build-fuzz, and runs each for
# a bounded time, starting from the committed seeds in tests/fuzz/corpus/<target>/. What a run finds
# beyond the seeds goes to build-fuzz/corpus/<target>/ (kept between runs, never committed); a crash
# stops the script with the input saved as build-fuzz/artifacts/<target>-crash-*: turn it into a
# regression test (docs/reliability.md says how).
# usage: bash tools/fuzz.sh [SECONDS_PER_TARGET (default 60)] [TARGET...]   (targets: gguf tokenizer session_state chat_template gbnf json_schema tool_parser)
#        bash tools/fuzz.sh --make-seeds    (rewrite the committed seeds from tests/fuzz/make_seeds.cpp)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${EMBER_FUZZ_BUILD:-build-fuzz}
cc=""
for c in clang-19 clang; do command -v "$c" > /dev/null && { cc=$c; break; }; done
[ -n "$cc" ] || { echo "fuzz: clang not found (bash tools/install-deps.sh installs it)" >&2; exit 1; }
cxx=${cc/clang/clang++}
if [ ! -f "$build/build.ninja" ]; then
  CC=$cc CXX=$cxx cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMBER_BUILD_FUZZERS=ON \
    -DEMBER_BUILD_SHARED=OFF -DEMBER_BUILD_TESTS=OFF -DEMBER_BUILD_TOOLS=OFF > /dev/null
fi
all=(gguf tokenizer session_state chat_template gbnf json_schema tool_parser)

if [ "${1:-}" = "--make-seeds" ]; then
  cmake --build "$build" -j "${EMBER_JOBS:-2}" --target fuzz_make_seeds
  for t in "${all[@]}"; do
    rm -rf "tests/fuzz/corpus/$t" && mkdir -p "tests/fuzz/corpus/$t"
    "$build/tests/fuzz/fuzz_make_seeds" "$t" "tests/fuzz/corpus/$t" models/stories260K.gguf > /dev/null
  done
  du -sh tests/fuzz/corpus/*
  exit 0
fi

seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
cmake --build "$build" -j "${EMBER_JOBS:-2}" $(printf -- '--target fuzz_%s ' "${targets[@]}")
mkdir -p "$build/artifacts"
# ASan/UBSan stop at the first report; the leak checker runs at exit too. -rss_limit_mb bounds what one
# input may make the library allocate; -timeout flags an input that takes longer than 10 s.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
# Symbolized reports need an llvm-symbolizer; any version reads clang-19's debug info.
for s in llvm-symbolizer-19 llvm-symbolizer /usr/lib/llvm-*/bin/llvm-symbolizer; do
  if command -v "$s" > /dev/null 2>&1; then export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-$(command -v "$s")}; break; fi
done
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
for t in "${targets[@]}"; do
  mkdir -p "$build/corpus/$t"
  echo "fuzz: $t for ${seconds}s"
  start=$(date +%s)
  if ! "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$build/artifacts/$t-" "$build/corpus/$t" "tests/fuzz/corpus/$t" \
       > "$build/fuzz_$t.log" 2>&1; then
    tail -n 60 "$build/fuzz_$t.log"
    echo "fuzz: $t FOUND A PROBLEM; the input is in $build/artifacts/ (log: $build/fuzz_$t.log)"
    exit 1
  fi
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "$build/fuzz_$t.log" | tr '\n' ' '
  echo "($(( $(date +%s) - start ))s, corpus $(ls "$build/corpus/$t" | wc -l) + $(ls "tests/fuzz/corpus/$t" | wc -l) seeds)"
done
echo "fuzz: OK"
