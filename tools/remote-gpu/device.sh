#!/usr/bin/env bash
# tools/remote-gpu/device.sh — the CUDA checks on a GPU machine, run from the checkout's root there over
# what stage.sh packed into .gpu/ (nothing is built on that machine). Logs go to $OUT: info.txt,
# ctest-cuda.log, hybrid.log, sanitizer.log, ctest-all.log, bench.jsonl, synth.log, summary.txt (and with the
# offload step, offload.jsonl). Every step has its own time limit, so one hang costs that step only.
#
# usage: tools/remote-gpu/device.sh [STEPS]   STEPS: any of "tests hybrid sanitizer suite bench" (default: all)
# in the order tests, hybrid, suite, sanitizer (while the models are written), bench; EMBER_GPU_DEADLINE (s, default 420) ends it early;
# EMBER_GPU_TESTS (a ctest -R regex, default the CUDA ones) picks what the tests step runs.
set -u
steps=${1:-"tests hybrid sanitizer suite bench"}
deadline=${EMBER_GPU_DEADLINE:-420}   # seconds: later steps are skipped, said so, rather than cut off
OUT=${OUT:-/tmp/ember-gpu-out}; mkdir -p "$OUT"
root=$PWD
bp=$(cat .gpu/build-path)                 # the build tree's path when it was built (ctest files name it)
src=$(dirname "$bp")
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$OUT/summary.txt"; }
left() { [ $(( deadline - ($(date +%s) - t0) )) -ge "$1" ]; }  # at least $1 s before the deadline
has() { case " $steps " in *" $1 "*) return 0 ;; esac; return 1; }

# The build tree's absolute paths resolve here: the source dir is this checkout, ../shared beside it.
if [ "$root" != "$src" ]; then mkdir -p "$(dirname "$src")"; [ -e "$src" ] || ln -s "$root" "$src"; fi
if [ ! -x "$bp/tests/test_parity" ]; then
  mkdir -p "$root/$(basename "$bp")" && xz -dc .gpu/build.tar.xz | tar xf - -C "$root/$(basename "$bp")"
fi
# A copy outside the checkout for peer.sh, which may run where the checkout no longer holds .gpu/ and this
# unpacked build (a runner that keeps only the files it was given for each step).
mkdir -p /tmp/ember-gpubuild && cp -a "$bp/." /tmp/ember-gpubuild/
shared=$(dirname "$src")/shared
if [ -f .gpu/shared-models.tar.xz ] && [ ! -d "$shared/models/stories260K" ]; then
  mkdir -p "$shared" && xz -T0 -dc .gpu/shared-models.tar.xz | tar xf - -C "$shared"
  ln -sf "$root/models/stories15M-q8_0.gguf" "$shared/models/stories15M/stories15M-q8_0.gguf"
fi
# The Debian libraries the tests link (libcmocka ...): in the loader's own path too, for the tests that set
# LD_LIBRARY_PATH themselves (test_cuda_stub_driver puts the toolkit's stub libcuda there, replacing ours).
if [ -w /usr/local/lib ]; then cp -P .gpu/lib/*.so* /usr/local/lib/ && ldconfig; fi
export LD_LIBRARY_PATH="$root/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# test_cuda_stub_driver's link to the toolkit's stub libcuda names where the build machine keeps it: point
# it at this machine's (a dangling link lets the real driver load, and the test sees CUDA work).
stub=$(ls /usr/local/cuda/lib64/stubs/libcuda.so /usr/local/cuda*/targets/x86_64-linux/lib/stubs/libcuda.so 2>/dev/null | head -1)
[ -n "$stub" ] && [ -d "$bp/cuda-stub" ] && ln -sfn "$stub" "$bp/cuda-stub/libcuda.so.1"
# cuBLASLt (dlopen'ed by the module) and compute-sanitizer: wherever this image keeps them.
lt=$(ls /usr/local/cuda/lib64/libcublasLt.so.13 /usr/local/cuda*/targets/x86_64-linux/lib/libcublasLt.so.13 2>/dev/null | head -1)
[ -n "$lt" ] || lt=$(find / -xdev -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
[ -n "$lt" ] && export EMBER_CUBLASLT=$lt
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer /usr/local/cuda*/compute-sanitizer/compute-sanitizer 2>/dev/null | head -1)
export EMBER_BACKEND_DIR=$bp
stamp "root=$root build=$bp cublasLt=${lt:-none} sanitizer=${san:-none}"

{ date -u; uname -a; nproc; nvidia-smi; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
  "$bp/bench/ember-cuda-bench" bandwidth 4096; } > "$OUT/info.txt" 2>&1
stamp "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1); $(grep copy_gb_s "$OUT/info.txt" | tail -1)"

# The 8B-shaped models take minutes of one core each to write: start them now, beside the tests.
models=/tmp/ember-gpu-models; mkdir -p "$models"
if has bench; then
  for ty in q4_0 q4_k_m q8_0; do
    [ -s "$models/llama3-8b-$ty.gguf" ] || (nice "$bp/bench/ember-synth" --preset llama3-8b --type $ty --ctx 8192 --repeat-layers 1 \
        -o "$models/llama3-8b-$ty.gguf.part" >> "$OUT/synth.log" 2>&1 && mv "$models/llama3-8b-$ty.gguf.part" "$models/llama3-8b-$ty.gguf") &
  done
fi

if has tests; then
  (cd "$bp" && timeout 180 ctest -R "${EMBER_GPU_TESTS:-cuda|parity|window|hybrid}" -j6 --timeout 100 --output-on-failure) > "$OUT/ctest-cuda.log" 2>&1
  stamp "cuda tests: $(grep -E 'tests passed|tests failed' "$OUT/ctest-cuda.log" | tail -1)"
  grep -E '^\s*[0-9]+/[0-9]+ Test' "$OUT/ctest-cuda.log" | grep -v ' Passed' | tee -a "$OUT/summary.txt" | head -20
fi

# The hybrid families (recurrent state beside the KV cache): their four ops against double references
# (test_parity's hybrid cases on CUDA, each case's lines), then synthetic qwen35 / qwen35moe models written
# here, greedy on the CPU and on CUDA (with and without the decode step's CUDA graph): the tokens agree up
# to a near tie of the random weights, so the step reports how many leading characters agree rather than
# failing. test_hybrid_memory (in the tests step: `auto` is CUDA here) checks whole-vs-token-by-token bits,
# forks, truncation, saved states and the engine on CUDA.
if has hybrid && left 60; then
  { echo "== test_parity cuda: the hybrid ops"
    timeout 60 "$bp/tests/test_parity" cuda 2>&1 | grep -E -A3 'test_(copy_sigmoid|ssm_conv|gated_delta)|FAILED|PASSED'
    e="$bp/tools/ember/ember"; prompt="Once upon a time there was a"
    for fam in qwen35 qwen35moe; do
      m=/tmp/ember-gpu-models/$fam.gguf; mkdir -p /tmp/ember-gpu-models
      if ! timeout 60 "$bp/bench/ember-synth" --family $fam -o "$m" > /dev/null 2>&1; then echo "== $fam: ember-synth has no such family in this build"; continue; fi
      cpu=$(timeout 60 "$e" run -m "$m" --backend cpu -p "$prompt" -n 48 --temp 0 -c 256 2>/dev/null)
      for graphs in 1 0; do
        gpu=$(EMBER_CUDA_GRAPHS=$graphs timeout 60 "$e" run -m "$m" --backend cuda -p "$prompt" -n 48 --temp 0 -c 256 2>/tmp/ember-hybrid-err) ||
          echo "== $fam graphs=$graphs: cuda run failed: $(tail -3 /tmp/ember-hybrid-err)"
        same=0; while [ $same -lt ${#cpu} ] && [ "${cpu:$same:1}" = "${gpu:$same:1}" ]; do same=$((same + 1)); done
        echo "== $fam graphs=$graphs: $same of ${#cpu} characters as the CPU's"
        [ $same -lt ${#cpu} ] && printf 'cpu:  %q\ncuda: %q\n' "$cpu" "$gpu"
      done
    done; } > "$OUT/hybrid.log" 2>&1
  stamp "hybrid: $(grep -E '^==|FAILED|PASSED' "$OUT/hybrid.log" | tr '\n' ' ' | head -c 600)"
fi

if has suite; then
  (cd "$bp" && timeout 120 ctest -j12 --timeout 110 -E 'binding|snippets_(csharp|rust|go)' --output-on-failure) > "$OUT/ctest-all.log" 2>&1
  stamp "suite: $(grep -E 'tests passed|tests failed' "$OUT/ctest-all.log" | tail -1)"
  sed -n '/The following tests/,$p' "$OUT/ctest-all.log" | head -30 | tee -a "$OUT/summary.txt"
fi

if has sanitizer && [ -n "$san" ] && left 120; then
  { echo "== memcheck: test_parity cuda"; timeout 90 "$san" --tool memcheck --error-exitcode 9 --print-limit 20 "$bp/tests/test_parity" cuda; echo "rc=$?"
    echo "== racecheck: test_parity cuda (attention kernels among the rest)"; timeout 70 "$san" --tool racecheck --error-exitcode 9 --print-limit 20 "$bp/tests/test_parity" cuda; echo "rc=$?"
  } > "$OUT/sanitizer.log" 2>&1
  stamp "sanitizer: $(grep -E '^rc=|ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer.log" | tr '\n' ' ')"
fi

if has bench; then
  e="$bp/tools/ember/ember"; cb="$bp/bench/ember-cuda-bench"
  { "$cb" attention 4096 32 8 128 f16; "$cb" attention 4096 32 8 128 q8_0
    # The 8B model's matrix shapes, one token (decode), 32 and 512 (prefill passes), from DRAM.
    for ty in q4_0 q8_0 q4_k q6_k; do
      for shape in "4096 4096" "4096 14336" "14336 4096"; do timeout 20 "$cb" gemv $ty $shape 1; done
      for nt in 32 512; do timeout 20 "$cb" gemv $ty 4096 14336 $nt; done
    done; } >> "$OUT/bench.jsonl" 2> >(tail -5 >> "$OUT/summary.txt")
  grep gemv "$OUT/bench.jsonl" >> "$OUT/summary.txt"
  wait  # the models
  stamp "models: $(ls -la $models | tail -n +2 | awk '{print $5, $9}' | tr '\n' ' ')"
  for ty in q4_0 q4_k_m q8_0; do
    m="$models/llama3-8b-$ty.gguf"; [ -s "$m" ] || { stamp "no model $m"; continue; }
    for args in "-p 512 -n 128" "-p 4096 -n 16 -c 4352" "--parallel 16 -p 512 -n 128"; do  # llama.cpp: peer.sh
      left 60 || { stamp "skipped (deadline): bench $ty $args"; continue; }
      r=$(timeout 60 "$e" bench -m "$m" --backend cuda $args 2>>"$OUT/summary.txt" | grep '^{' | tail -1)
      echo "{\"type\":\"$ty\",\"args\":\"$args\",\"result\":${r:-null}}" >> "$OUT/bench.jsonl"
      stamp "bench $ty $args: ${r:0:300}"
    done
  done
fi
# offload: placement across devices (docs/offload.md), not in the default steps (the MoE file takes minutes
# to write; run `EMBER_GPU_DEADLINE=900 device.sh offload`, then `peer.sh offload`): the 8B-shaped Q4_K_M with
# half its layers (16 of 32) on the GPU beside hand-picked counts and auto, and a Qwen3-30B-A3B-shaped
# Q4_K_M with every layer's experts on the CPU; each run's line in offload.jsonl with `ember info --fit`'s
# plan (the estimate) beside the run's measured peak RSS.
if has offload; then
  e="$bp/tools/ember/ember"; m8="$models/llama3-8b-q4_k_m.gguf"; moe="$models/qwen3-30b-a3b-q4_k_m.gguf"
  [ -s "$m8" ] || timeout 120 "$bp/bench/ember-synth" --preset llama3-8b --type q4_k_m --ctx 8192 --repeat-layers 1 -o "$m8" >> "$OUT/synth.log" 2>&1
  if [ ! -s "$moe" ] && left 400; then
    timeout 400 "$bp/bench/ember-synth" --preset qwen3-30b-a3b --type q4_k_m --repeat-layers 1 -o "$moe.part" >> "$OUT/synth.log" 2>&1 \
      && mv "$moe.part" "$moe"
  fi
  offload_run() {  # model, label, ember options
    local m=$1 label=$2; shift 2
    left 90 || { stamp "skipped (deadline): offload $label"; return; }
    local plan r
    plan=$(timeout 60 "$e" info -m "$m" --fit --backend cuda -c 1024 "$@" 2>&1 | sed -n '/^placement:/,/^memory:/p' | tr '\n' ' ' | tr -d '"')
    r=$(timeout 90 "$e" bench -m "$m" --backend cuda -p 512 -n 128 "$@" 2>>"$OUT/summary.txt" | grep '^{' | tail -1)
    echo "{\"label\":\"$label\",\"args\":\"$*\",\"plan\":\"$plan\",\"result\":${r:-null}}" >> "$OUT/offload.jsonl"
    stamp "offload $label: ${r:0:300}"
  }
  if [ -s "$m8" ]; then
    for g in 16 8 24 32 auto; do offload_run "$m8" "8b-q4_k_m" --gpu-layers $g; done
    offload_run "$m8" "8b-q4_k_m budget 4 GiB" --gpu-layers auto --vram-budget 4096
  fi
  if [ -s "$moe" ]; then
    offload_run "$moe" "30b-a3b-q4_k_m experts on cpu" --experts-on-cpu all
    offload_run "$moe" "30b-a3b-q4_k_m budget 8 GiB" --gpu-layers auto --vram-budget 8192
  fi
fi
stamp "done"
