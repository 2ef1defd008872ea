#!/usr/bin/env bash
# The reliability checks CI runs after tools/test.sh (docs/reliability.md describes each):
#   abi   the ABI gate: the release build's libember.so against the committed baseline (abi/check.sh)
#   asan  a Debug build with AddressSanitizer + UBSan (no recovery, leak checker on) runs the whole suite
#   tsan  a ThreadSanitizer build runs the tests labelled "concurrency"
#   fuzz  each libFuzzer target for EMBER_FUZZ_SECONDS (default 30) from its seeds (tools/fuzz.sh)
#   soak  test_soak from the release build with EMBER_SOAK_TOKENS (default 300000) generated tokens
# usage: bash tools/reliability.sh [STAGE...]     (default: all, in the order above)
# The release build is EMBER_RELEASE_BUILD (default: build, as tools/test.sh leaves it; made if missing);
# the sanitizer and fuzz builds go under EMBER_RELIABILITY_BUILD (default: build-reliability).
set -euo pipefail
cd "$(dirname "$0")/.."
release=${EMBER_RELEASE_BUILD:-build}
root=${EMBER_RELIABILITY_BUILD:-build-reliability}
jobs=${EMBER_JOBS:-2}
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(abi asan tsan fuzz soak)
bash tools/install-deps.sh --reliability

release_build() {
  if [ ! -f "$release/build.ninja" ]; then
    cmake -S . -B "$release" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
  fi
  cmake --build "$release" -j "$jobs"
}

stage_abi() {
  release_build
  bash abi/check.sh "$release"
}

# Tests that bound wall-clock latencies (label "timing") run alone after the others: a sanitizer build
# on a loaded 2-core machine can deschedule a thread for longer than those bounds allow.
run_ctest() {
  local dir=$1
  shift
  ctest --test-dir "$dir" --output-on-failure -j "$jobs" -LE timing "$@"
  ctest --test-dir "$dir" --output-on-failure -L timing "$@"
}

stage_asan() {
  # A Debug build (assertions on) at -O1, as the sanitizers' documentation recommends: several times
  # faster than -O0, with the same reports.
  cmake -S . -B "$root/asan" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DEMBER_SANITIZE=ON \
    -DCMAKE_C_FLAGS_DEBUG="-g -O1" -DCMAKE_CXX_FLAGS_DEBUG="-g -O1" > /dev/null
  cmake --build "$root/asan" -j "$jobs"
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:check_initialization_order=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  run_ctest "$root/asan"
}

stage_tsan() {
  cmake -S . -B "$root/tsan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMBER_SANITIZE_THREAD=ON > /dev/null
  # Only the programs of the tests it runs.
  local tests
  tests=$(ctest --test-dir "$root/tsan" -N -L concurrency | sed -n 's/^ *Test *#[0-9]*: *//p')
  cmake --build "$root/tsan" -j "$jobs" --target $tests
  export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
  ctest --test-dir "$root/tsan" --output-on-failure -j "$jobs" -L concurrency -LE timing
  ctest --test-dir "$root/tsan" --output-on-failure -L concurrency -L timing
}

stage_fuzz() {
  EMBER_FUZZ_BUILD="$root/fuzz" bash tools/fuzz.sh "${EMBER_FUZZ_SECONDS:-30}"
}

stage_soak() {
  release_build
  mkdir -p "$root"
  if ! EMBER_SOAK_TOKENS=${EMBER_SOAK_TOKENS:-300000} ctest --test-dir "$release" --output-on-failure -L soak -V \
       > "$root/soak.log" 2>&1; then
    cat "$root/soak.log"
    return 1
  fi
  grep -o "soak: .*" "$root/soak.log"
}

summary=()
for s in "${stages[@]}"; do
  case "$s" in abi|asan|tsan|fuzz|soak) ;; *) echo "reliability: unknown stage '$s'" >&2; exit 2;; esac
  echo "==== reliability: $s"
  start=$(date +%s)
  ( "stage_$s" )   # a subshell: one stage's sanitizer options do not leak into the next
  summary+=("$s $(( $(date +%s) - start ))s")
done
echo "==== reliability: all green (${summary[*]})"
