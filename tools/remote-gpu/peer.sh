#!/usr/bin/env bash
# tools/remote-gpu/peer.sh — run after device.sh on the same GPU machine: llama.cpp's
# CUDA build (node-llama-cpp, packed into .gpu-peer/ by tools/remote-gpu/peer/pack.sh) beside `ember bench
# --backend cuda`, alternately, on the Llama-3-8B-shaped models device.sh wrote, P 512 G 128, 1 and 16
# sequences. One JSON line per run in $OUT/peer.jsonl; llama.cpp's stderr in $OUT/peer-stderr.txt.
set -u
OUT=${OUT:-/tmp/ember-gpu-out}; mkdir -p "$OUT"
# device.sh's copy of the build in /tmp (.gpu/ need not be here: only .gpu-peer/ is).
bp=/tmp/ember-gpubuild; [ -x "$bp/tools/ember/ember" ] || { echo "peer.sh: run device.sh first (no $bp)" >&2; exit 1; }
export EMBER_BACKEND_DIR=$bp
export LD_LIBRARY_PATH="$bp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"  # the CLI's RUNPATH names the build tree device.sh unpacked
models=/tmp/ember-gpu-models; e="$bp/tools/ember/ember"
t0=$(date +%s)
types=${EMBER_PEER_TYPES:-q4_0 q4_k_m q8_0}; [ "${1:-}" = offload ] && types=""   # offload: only its own runs below
for ty in $types; do
  m="$models/llama3-8b-$ty.gguf"; [ -s "$m" ] || { echo "no model $m"; continue; }
  for n in 1 16; do
    r=$(timeout 120 .gpu-peer/run.sh "$m" 512 128 $n 2>>"$OUT/peer-stderr.txt" | grep '^{' | tail -1)
    echo "{\"runtime\":\"llama.cpp\",\"type\":\"$ty\",\"sequences\":$n,\"result\":${r:-null}}" | tee -a "$OUT/peer.jsonl"
    if [ $n -eq 1 ]; then a="-p 512 -n 128"; else a="--parallel 16 -p 512 -n 128"; fi
    r=$(timeout 60 "$e" bench -m "$m" --backend cuda $a 2>>"$OUT/peer-stderr.txt" | grep '^{' | tail -1)
    echo "{\"runtime\":\"ember\",\"type\":\"$ty\",\"sequences\":$n,\"result\":${r:-null}}" | tee -a "$OUT/peer.jsonl"
    echo "[$(( $(date +%s) - t0 ))s] $ty n=$n done" >&2
  done
done
# `peer.sh offload`: llama.cpp's -ngl 16 on the 8B Q4_K_M beside `ember --gpu-layers 16` (device.sh's offload
# step wrote the model). Its --cpu-moe has no counterpart in node-llama-cpp's API, and the packed kernels are
# a Llama-shaped model's, so the MoE comparison needs a llama.cpp build of its own (docs/offload.md).
if [ "${1:-}" = offload ]; then
  m="$models/llama3-8b-q4_k_m.gguf"
  r=$(timeout 180 .gpu-peer/run.sh "$m" 512 128 1 --gpu-layers 16 2>>"$OUT/peer-stderr.txt" | grep '^{' | tail -1)
  echo "{\"runtime\":\"llama.cpp\",\"type\":\"q4_k_m\",\"gpu_layers\":16,\"result\":${r:-null}}" | tee -a "$OUT/peer.jsonl"
  r=$(timeout 90 "$e" bench -m "$m" --backend cuda -p 512 -n 128 --gpu-layers 16 2>>"$OUT/peer-stderr.txt" | grep '^{' | tail -1)
  echo "{\"runtime\":\"ember\",\"type\":\"q4_k_m\",\"gpu_layers\":16,\"result\":${r:-null}}" | tee -a "$OUT/peer.jsonl"
fi
