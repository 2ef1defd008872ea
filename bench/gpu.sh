#!/usr/bin/env bash
# bench/gpu.sh — the CUDA backend's figures on this machine's GPU, as one JSON document on stdout:
#   - the device's copy bandwidth (ember-cuda-bench bandwidth), the ceiling of batch-1 decode;
#   - `ember bench --backend cuda` on synthetic TinyLlama-1.1B- and Llama-3-8B-shaped models (Q4_0 and
#     Q8_0, written by ember-synth): decode tok/s and its fraction of the bandwidth limit (copy GB/s over
#     the bytes of weights read per token, taken as the file size less the embedding table), prefill
#     tok/s at 512 and 4096 prompt tokens;
#   - attention TFLOP/s at 4k context (ember-cuda-bench attention, the module's own kernels);
#   - a peer run with Hugging Face transformers + PyTorch (fp16, SDPA, static cache) on the same shapes
#     (bench/hf_peer.py), when python3 with torch, transformers and a CUDA device is present; skipped
#     with a message otherwise.
# Progress goes to stderr. Builds for sm_90 (H100/H200) into build-gpu unless told otherwise.
#
# usage: bench/gpu.sh [--build-dir DIR] [--arch ARCHS] [--skip-build] [--models-dir DIR]
#                     [--presets "tinyllama llama3-8b"] [--types "q4_0 q8_0"] [--no-peer] [--dry-run]
#   --dry-run: build (unless --skip-build) and write the models, print the commands that need a GPU
#              instead of running them (checks everything that a machine without a GPU can).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-gpu; arch=90; skip_build=0; models=${TMPDIR:-/tmp}/ember-gpu-bench
presets="tinyllama llama3-8b"; types="q4_0 q8_0"; peer=1; dry=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --arch) arch=$2; shift 2 ;;
    --skip-build) skip_build=1; shift ;;
    --models-dir) models=$2; shift 2 ;;
    --presets) presets=$2; shift 2 ;;
    --types) types=$2; shift 2 ;;
    --no-peer) peer=0; shift ;;
    --dry-run) dry=1; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "gpu.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
log() { echo "gpu.sh: $*" >&2; }
run_gpu() {  # a command that needs the GPU: its stdout, or (dry run) the command itself
  if [ $dry -eq 1 ]; then log "would run: $*"; echo '{"dry_run":true}'; else "$@"; fi
}
# The last line of a command's output that starts with '{' (ember bench prints one JSON line).
json_line() { grep '^{' | tail -1; }
field() {  # field NAME JSON -> number or empty
  sed -n "s/.*\"$1\":\([-0-9.eE+]*\).*/\1/p" <<< "$2" | head -1
}

if [ $skip_build -eq 0 ]; then
  log "building into $build for CUDA architectures $arch"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" \
    -DEMBER_BUILD_TESTS=OFF -DEMBER_VULKAN=OFF >&2
  cmake --build "$build" -j "${EMBER_JOBS:-$(nproc)}" >&2
fi
for exe in ember ember-synth ember-cuda-bench; do
  [ -x "$build/$exe" ] || [ -x "$build/bench/$exe" ] || [ -x "$build/tools/ember/$exe" ] ||
    { echo "gpu.sh: $exe not found under $build (is the CUDA module built? see cuda/README.md)" >&2; exit 1; }
done
find_exe() { for d in "$build" "$build/bench" "$build/tools/ember"; do [ -x "$d/$1" ] && { echo "$d/$1"; return; }; done; }
ember=$(find_exe ember); synth=$(find_exe ember-synth); cbench=$(find_exe ember-cuda-bench)
export EMBER_BACKEND_DIR=$(dirname "$(ls "$build"/libember.so* | head -1)")

if [ $dry -eq 0 ] && ! "$cbench" bandwidth 64 > /dev/null 2>&1; then
  echo "gpu.sh: no usable CUDA device here ($("$cbench" bandwidth 64 2>&1 | tail -1))" >&2
  exit 77
fi

out=()
bw=$(run_gpu "$cbench" bandwidth 4096 | json_line)
out+=("\"bandwidth\":$bw")
copy_gb_s=$(field copy_gb_s "$bw")

mkdir -p "$models"
runs=()
for preset in $presets; do
  for type in $types; do
    m="$models/$preset-$type.gguf"
    if [ ! -s "$m" ]; then
      log "writing $m"
      "$synth" -o "$m" --preset "$preset" --type "$type" --ctx 8192 >&2
    fi
    size=$(stat -c %s "$m")
    # Bytes of weights read per decoded token: everything but the embedding table (one row of it is read).
    embd=$("$ember" info -m "$m" --tensors 2>/dev/null | awk '/token_embd/ {for (i = 1; i <= NF; ++i) if ($i ~ /^[0-9]+$/ && $i > 1000000) print $i}' | head -1)
    per_token=$(( size - ${embd:-0} ))
    r512=$(run_gpu "$ember" bench -m "$m" --backend cuda -p 512 -n 128 -c 8192 | json_line)
    r4k=$(run_gpu "$ember" bench -m "$m" --backend cuda -p 4096 -n 32 -c 8192 | json_line)
    dec=$(field decode_tok_s "$r512")
    frac=null
    if [ -n "$dec" ] && [ -n "$copy_gb_s" ]; then
      frac=$(awk -v d="$dec" -v b="$copy_gb_s" -v n="$per_token" 'BEGIN { printf "%.3f", d / (b * 1e9 / n) }')
    fi
    runs+=("{\"model\":\"$preset\",\"type\":\"$type\",\"file_bytes\":$size,\"bytes_per_token\":$per_token,\"decode_tok_s\":${dec:-null},\"decode_fraction_of_bandwidth_limit\":$frac,\"prefill_tok_s_512\":$(field prefill_tok_s "$r512" | grep . || echo null),\"prefill_tok_s_4096\":$(field prefill_tok_s "$r4k" | grep . || echo null),\"bench_512\":$r512,\"bench_4096\":$r4k}")
  done
done
out+=("\"ember\":[$(IFS=,; echo "${runs[*]}")]")

attn=()
attn+=("$(run_gpu "$cbench" attention 4096 32 8 128 f16 | json_line)")   # Llama-3-8B's heads
attn+=("$(run_gpu "$cbench" attention 4096 32 4 64 f16 | json_line)")    # TinyLlama's heads
out+=("\"attention_4k\":[$(IFS=,; echo "${attn[*]}")]")

peer_json='"skipped"'
if [ $peer -eq 0 ]; then
  peer_json='"skipped: --no-peer"'
elif ! python3 -c 'import torch, transformers; assert torch.cuda.is_available()' > /dev/null 2>&1; then
  log "peer run skipped: python3 with torch, transformers and a CUDA device is not available here"
  peer_json='"skipped: no python3 with torch + transformers + CUDA"'
else
  rows=()
  for preset in $presets; do
    rows+=("$(run_gpu python3 bench/hf_peer.py --preset "$preset" | json_line)")
  done
  peer_json="[$(IFS=,; echo "${rows[*]}")]"
fi
out+=("\"hf_transformers_fp16\":$peer_json")
echo "{$(IFS=,; echo "${out[*]}")}"
