#!/usr/bin/env bash
# Decode on a busy machine: ember's default against its own fixed thread counts, an older ember build
# and llama.cpp, with BUSY processes of pure computation running beside them (0: none), alternately.
#
# Each round runs every configuration once, in the same order; the script prints every JSON line and
# then the median decode and prefill rate per configuration (the machine is shared: only figures of one
# window compare, so compare the ratios). The busy processes are plain shell loops, separate processes
# as a game or a build beside the application would be (ember bench --background-load N makes threads
# of its own instead).
#
# usage: bench/contention.sh MODEL [BUSY=1] [ROUNDS=5] [PROMPT_TOKENS=64] [GEN_TOKENS=128]
# env:   EMBER_BIN (default build/tools/ember/ember); OLD_EMBER_BIN (an older build, optional);
#        PEER_DIR (node-llama-cpp, as bench/compare_llamacpp.sh installs it; skipped when absent);
#        PEER_THREADS (default 2: node-llama-cpp's default on a 2-core machine);
#        PRIO (a prefix for every run and busy process, e.g. "nice -n -20" on a machine that other jobs
#        share: CFS then gives them a few percent, so the busy processes are the competition measured).
#        Not a real-time class (chrt) with the peer: llama.cpp's spinning threads can then hold both
#        cores of a 2-core machine for good (seen here: a SCHED_FIFO run that never ended).
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: bench/contention.sh MODEL [BUSY] [ROUNDS] [PROMPT_TOKENS] [GEN_TOKENS]}
busy=${2:-1}; rounds=${3:-5}; p=${4:-64}; n=${5:-128}
ember=${EMBER_BIN:-build/tools/ember/ember}
peer=${PEER_DIR:-${TMPDIR:-/tmp}/ember-llamacpp-3.22.1}
out=$(mktemp)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -f "$out"; }
trap cleanup EXIT
for ((i = 0; i < busy; i++)); do
  ${PRIO:-} bash -c 'while :; do :; done' &
  pids+=($!)
done

run() {  # LABEL COMMAND...: one run (bounded to 5 minutes), its first JSON line tagged with the label
  local label=$1; shift
  local line
  line=$(timeout 300 ${PRIO:-} "$@" 2>/dev/null | grep -m1 '^{' || true)
  [ -n "$line" ] && echo "$line" | sed "s/^{/{\"config\":\"$label\",/" | tee -a "$out"
}
for ((r = 1; r <= rounds; r++)); do
  run default "$ember" bench -m "$model" -p "$p" -n "$n"
  run t1 "$ember" bench -m "$model" -p "$p" -n "$n" -t 1
  run t2-fixed env EMBER_CPU_ADAPT=0 "$ember" bench -m "$model" -p "$p" -n "$n" -t 2
  if [ -n "${OLD_EMBER_BIN:-}" ]; then run old-default "$OLD_EMBER_BIN" bench -m "$model" -p "$p" -n "$n"; fi
  if [ -d "$peer/node_modules/@node-llama-cpp/linux-x64" ]; then
    run llama.cpp node bench/llamacpp_bench.mjs --peer "$peer" --model "$model" --threads "${PEER_THREADS:-2}" \
        --prompt-tokens "$p" --gen-tokens "$n"
  fi
done
node - "$out" "$busy" <<'JS'
const fs = require("fs");
const rows = fs.readFileSync(process.argv[2], "utf8").trim().split("\n").map((l) => JSON.parse(l));
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const configs = [...new Set(rows.map((r) => r.config))];
const med = {};
for (const c of configs) {
  const rs = rows.filter((r) => r.config === c);
  med[c] = { decode_tok_s: median(rs.map((r) => r.decode_tok_s)), prefill_tok_s: median(rs.map((r) => r.prefill_tok_s)),
             decode_range: [Math.min(...rs.map((r) => r.decode_tok_s)), Math.max(...rs.map((r) => r.decode_tok_s))] };
}
const d = (c) => (med[c] ? med[c].decode_tok_s : NaN);
const r3 = (x) => Math.round(x * 1000) / 1000;
console.log(JSON.stringify({ busy_processes: +process.argv[3], prio: process.env.PRIO || "", rounds: rows.length / configs.length, medians: med,
  default_vs_best_fixed: r3(d("default") / Math.max(d("t1"), d("t2-fixed"))),
  default_vs_llamacpp: r3(d("default") / d("llama.cpp")), default_vs_old: r3(d("default") / d("old-default")) }));
JS
