#!/usr/bin/env bash
# .gpu-peer/run.sh MODEL [P=512] [G=128] [N=1] [extra peer_cuda.mjs args, e.g. --flash-attn off --verbose]
# Unpacks node + node-llama-cpp (CUDA prebuilt, fatbin cut to sm_90 SASS) into /tmp/peer once, finds the
# CUDA 13 runtime libs, and runs bench/peer_cuda.mjs with --gpu cuda (never falls back to the CPU).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
model=${1:?usage: run.sh MODEL [P] [G] [N] [extra args]}
P=${2:-512}; G=${3:-128}; N=${4:-1}
shift $(( $# < 4 ? $# : 4 ))
dst=${PEER_DIR:-/tmp/peer}
log() { echo "[run.sh] $*" >&2; }

if [ ! -f "$dst/.unpacked" ]; then
    t0=$(date +%s%N)
    rm -rf "$dst" && mkdir -p "$dst" || exit 1
    xz -dc "$here/node.xz" > "$dst/node" & p1=$!
    xz -dc "$here/nlc.tar.xz" | tar -x -C "$dst" & p2=$!
    wait $p1 && wait $p2 || { log "unpack FAILED"; exit 1; }
    chmod +x "$dst/node" && touch "$dst/.unpacked"
    log "unpacked into $dst in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
fi
"$dst/node" --version >/dev/null || { log "node does not run here (glibc/libstdc++?)"; exit 1; }
bins=$dst/node_modules/@node-llama-cpp/linux-x64-cuda/bins/linux-x64-cuda

# CUDA 13 runtime: libcudart.so.13, libcublas.so.13, libcublasLt.so.13 (toolkit or pip nvidia-* wheels).
if [ -z "${PEER_SKIP_LIBSEARCH:-}" ]; then
    roots="/usr/local/cuda /usr/local/cuda-13* /usr/local/cuda/targets /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/local/lib /opt"
    py_sp=$(python3 -c 'import site,sys; print(" ".join(site.getsitepackages()+[site.getusersitepackages()]))' 2>/dev/null)
    dirs=""
    for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13; do
        f=$(timeout 40 find -L $roots $py_sp -maxdepth 9 -name "$lib" \( -type f -o -type l \) 2>/dev/null | head -n1)
        if [ -n "$f" ]; then d=$(dirname "$f"); case ":$dirs:" in *":$d:"*) ;; *) dirs="$dirs:$d";; esac
        else log "WARNING: $lib not found under $roots $py_sp"; fi
    done
    if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
        f=$(timeout 20 find -L /usr/lib /usr/lib64 /usr/local/nvidia /usr/local/cuda/compat -maxdepth 4 -name 'libcuda.so.1' 2>/dev/null | head -n1)
        [ -n "$f" ] && dirs="$dirs:$(dirname "$f")" || log "WARNING: libcuda.so.1 (driver) not found"
    fi
    export LD_LIBRARY_PATH="${dirs#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    log "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
fi
missing=$(LD_LIBRARY_PATH="$bins:$LD_LIBRARY_PATH" ldd "$bins/libggml-cuda.so" | grep 'not found')
[ -n "$missing" ] && log "libggml-cuda.so has unresolved libraries (CUDA will NOT load):"$'\n'"$missing"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >&2

cd "$root"
NODE_LLAMA_CPP_DIR="$dst/node_modules/node-llama-cpp" "$dst/node" bench/peer_cuda.mjs \
    --model "$model" --prompt-tokens "$P" --gen-tokens "$G" --sequences "$N" --gpu cuda "$@"
rc=$?
if [ $rc -ne 0 ]; then
    log "bench FAILED (rc=$rc). dlopen check of the CUDA backend:"
    LD_LIBRARY_PATH="$bins:$LD_LIBRARY_PATH" python3 -c "import ctypes,sys; ctypes.CDLL(sys.argv[1]); print('dlopen ok')" "$bins/libggml-cuda.so" >&2
    log "'no kernel image is available' => a kernel whose module was not kept (see .gpu-peer/README); retry with --flash-attn off"
fi
exit $rc
