#!/usr/bin/env bash
# Greedy output under each GBNF grammar, Ember against llama.cpp (the peer: node-llama-cpp's prebuilt CPU
# binary), on the same model and prompt: the texts must be equal. With --timing, both runtimes' cost per
# token of the grammar too (Ember: `ember bench --grammar`; the peer: bench/peer_grammar.mjs --timing).
# usage: bench/compare_grammar_peer.sh [--timing] MODEL GRAMMAR.gbnf...   (env: EMBER (default
#        build/tools/ember/ember), PEER (default ../shared/peer, with its node_modules installed), THREADS)
set -euo pipefail
cd "$(dirname "$0")/.."
timing=""
if [ "${1:-}" = "--timing" ]; then timing=--timing; shift; fi
model=$1; shift
ember=${EMBER:-build/tools/ember/ember}
peer=${PEER:-../shared/peer}
threads=${THREADS:-2}
prompt="Once upon a time"
[ -d "$peer/node_modules/node-llama-cpp" ] || { echo "compare_grammar_peer: $peer has no node_modules (cd $peer && npm install)" >&2; exit 77; }
status=0
for g in "$@"; do
  mine=$("$ember" run -m "$model" -p "$prompt" -n 64 --temp 0 -t "$threads" --grammar "$g" 2>/dev/null)
  mine=${mine#"$prompt"}
  theirs_json=$(node bench/peer_grammar.mjs --model "$model" --peer "$peer" --threads "$threads" --prompt "$prompt" --max 64 $timing "$g")
  theirs=$(printf '%s' "$theirs_json" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>process.stdout.write(JSON.parse(s).text))')
  if [ "$mine" = "$theirs" ]; then
    echo "same   $g: $mine"
  else
    echo "DIFFER $g:"; echo "  ember:     $mine"; echo "  llama.cpp: $theirs"; status=1
  fi
  if [ -n "$timing" ]; then
    echo "  llama.cpp: $theirs_json" | grep -o '"ms_per_token_grammar.*'
    "$ember" bench -m "$model" -t "$threads" -n 64 --grammar "$g" | grep -o '"decode_step_ms.*'
  fi
done
exit $status
