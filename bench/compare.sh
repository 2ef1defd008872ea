#!/usr/bin/env bash
# Runs `ember bench` and the llama.cpp peer (../shared/peer, node-llama-cpp) alternately on the same model
# and thread count, ROUNDS times each, and prints every JSON line. The machine is shared and noisy:
# compare the two in the same window (medians of alternating runs), never against stored figures.
#
# usage: bench/compare.sh MODEL [THREADS=2] [PROMPT_TOKENS=128] [GEN_TOKENS=64] [ROUNDS=3]
# The peer must be installed first: cp -r ../shared/peer /tmp/peer && (cd /tmp/peer && npm install),
# then PEER_DIR=/tmp/peer (default: ../shared/peer).
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: bench/compare.sh MODEL [THREADS] [PROMPT_TOKENS] [GEN_TOKENS] [ROUNDS]}
threads=${2:-2}; p=${3:-128}; n=${4:-64}; rounds=${5:-3}
peer=${PEER_DIR:-../shared/peer}
for ((i = 1; i <= rounds; i++)); do
  ./build/tools/ember/ember bench -m "$model" -t "$threads" -p "$p" -n "$n"
  node "$peer/bench.mjs" --model "$model" --threads "$threads" --prompt-tokens "$p" --gen-tokens "$n"
done
