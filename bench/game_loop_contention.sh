#!/usr/bin/env bash
# The game-loop sample beside a busy process: NPC tokens/s and Ember's time per frame, against one
# engine thread on a quiet machine (the target: NPCs' tokens/s >= 0.8x of one core's quiet rate, docs/benchmarks.md).
#
# Each round runs, in turn: the sample with `-t 1` and nothing beside it ("quiet-t1"), then the sample
# with its default settings while one busy process (a shell loop) runs beside it ("busy-default").
# It prints every run's stats line and then the medians and the ratio busy-default / quiet-t1.
#
# Isolation: on a machine that other jobs share, `nice` does not keep them out when the kernel groups
# tasks by session (sched_autogroup_enabled=1: each session's group gets an equal share whatever the
# nice values). Run as root, the script puts the sample and the busy process in a cgroup (v1 `cpu`
# controller) with the largest CPU share, so the other jobs get a few percent and the busy process is
# the competition measured. Without root (or cgroup v1) it runs as it is and says so.
#
# usage: bench/game_loop_contention.sh [MODEL=models/stories15M-q8_0.gguf] [ROUNDS=5] [SECONDS=8]
# env:   GAME_LOOP_BIN (default build/samples/game-loop/ember-game-loop)
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-models/stories15M-q8_0.gguf}
rounds=${2:-5}
secs=${3:-8}
bin=${GAME_LOOP_BIN:-build/samples/game-loop/ember-game-loop}
[ -x "$bin" ] || { echo "no $bin: build the game-loop sample first" >&2; exit 1; }

cg=/sys/fs/cgroup/cpu/ember-bench
if mkdir -p "$cg" 2>/dev/null && echo 262144 >"$cg/cpu.shares" 2>/dev/null && echo $$ >"$cg/cgroup.procs" 2>/dev/null; then
  echo "isolation: cgroup $cg (cpu.shares 262144)" >&2
else
  echo "isolation: none (needs root and the cgroup v1 cpu controller); other jobs on the machine compete too" >&2
fi

out=$(mktemp)
busy=
cleanup() { [ -n "$busy" ] && kill "$busy" 2>/dev/null; rm -f "$out"; }
trap cleanup EXIT

run() {  # LABEL ARGS...: one run of the sample, its stats line tagged with the label
  local label=$1; shift
  local line
  line=$("$bin" -m "$model" --seconds "$secs" --quiet "$@" 2>&1 | grep -m1 '^stats:' || true)
  [ -n "$line" ] && echo "$label $line" | tee -a "$out"
}
for ((r = 1; r <= rounds; r++)); do
  run quiet-t1 -t 1
  bash -c 'while :; do :; done' &
  busy=$!
  run busy-default
  kill "$busy"; wait "$busy" 2>/dev/null || true; busy=
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
awk '
  { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[$1, kv[1], ++n[$1, kv[1]]] = kv[2] } labels[$1] = 1 }
  function median(l, k,   m, i, j, t, a) {
    m = n[l, k]; for (i = 1; i <= m; i++) a[i] = v[l, k, i] + 0
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
  }
  END {
    for (l in labels) printf "%s: median tok/s %.1f, median p99 %.3f ms, median max %.3f ms\n", l, median(l, "tok_per_s"), median(l, "p99_ms"), median(l, "max_ms")
    printf "busy-default / quiet-t1 tokens/s: %.3f\n", median("busy-default", "tok_per_s") / median("quiet-t1", "tok_per_s")
  }' "$out"
