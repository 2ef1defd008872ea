#!/usr/bin/env bash
# Ember against llama.cpp on the same model, threads and token counts, run alternately.
#
# Installs node-llama-cpp 3.22.1 with its prebuilt linux-x64 CPU binary from npm into a scratch folder
# (once; nothing is compiled or downloaded besides the npm packages), then runs `ember bench` and
# bench/llamacpp_bench.mjs (which measures llama.cpp the way `ember bench` measures ember) one after the
# other, ROUNDS times, prints every JSON line, and finally the median of each metric per runtime and the
# ratio ember / llama.cpp. The machine is shared and noisy: only alternating runs in one window compare.
#
# usage: bench/compare_llamacpp.sh MODEL [THREADS=2] [PROMPT_TOKENS=128] [GEN_TOKENS=64] [ROUNDS=3]
# env:   EMBER_BIN (default build/tools/ember/ember), PEER_DIR (default ${TMPDIR:-/tmp}/ember-llamacpp-3.22.1),
#        EMBER_ARGS (extra `ember bench` options, e.g. "--kv-type q8_0")
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: bench/compare_llamacpp.sh MODEL [THREADS] [PROMPT_TOKENS] [GEN_TOKENS] [ROUNDS]}
threads=${2:-2}; p=${3:-128}; n=${4:-64}; rounds=${5:-3}
ember=${EMBER_BIN:-build/tools/ember/ember}
peer=${PEER_DIR:-${TMPDIR:-/tmp}/ember-llamacpp-3.22.1}
[ -x "$ember" ] || { echo "no $ember: build first (tools/build.sh)" >&2; exit 1; }

if [ ! -d "$peer/node_modules/@node-llama-cpp/linux-x64" ]; then
  echo "installing node-llama-cpp 3.22.1 (prebuilt CPU binary) into $peer" >&2
  mkdir -p "$peer"
  cat > "$peer/package.json" <<'JSON'
{ "name": "ember-llamacpp-peer", "private": true, "type": "module",
  "dependencies": { "node-llama-cpp": "3.22.1", "@node-llama-cpp/linux-x64": "3.22.1" } }
JSON
  # Only the listed prebuilt package: no other optional platform packages (the CUDA ones are large),
  # and no install scripts (node-llama-cpp's would try to download or build llama.cpp).
  printf 'omit=optional\nignore-scripts=true\n' > "$peer/.npmrc"
  (cd "$peer" && npm install --no-audit --no-fund --loglevel=error >&2)
fi

out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((i = 1; i <= rounds; i++)); do
  # shellcheck disable=SC2086
  "$ember" bench -m "$model" -t "$threads" -p "$p" -n "$n" ${EMBER_ARGS:-} | tee -a "$out"
  node bench/llamacpp_bench.mjs --peer "$peer" --model "$model" --threads "$threads" --prompt-tokens "$p" \
       --gen-tokens "$n" | tee -a "$out"
done
node - "$out" <<'JS'
const fs = require("fs");
const rows = fs.readFileSync(process.argv[2], "utf8").trim().split("\n").map((l) => JSON.parse(l));
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const summary = { model: rows[0].model, threads: rows[0].threads, prompt_tokens: rows[0].prompt_tokens,
                  gen_tokens: rows[0].gen_tokens, rounds: rows.length / 2 };
for (const k of ["prefill_tok_s", "decode_tok_s", "load_s", "peak_rss_mb"]) {
  const e = median(rows.filter((r) => r.runtime === "ember").map((r) => r[k]));
  const l = median(rows.filter((r) => r.runtime === "llama.cpp").map((r) => r[k]));
  summary[k] = { ember: e, llamacpp: l, ratio: Math.round((e / l) * 1000) / 1000 };
}
console.log(JSON.stringify(summary));
JS
