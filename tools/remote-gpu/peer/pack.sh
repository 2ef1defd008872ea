#!/usr/bin/env bash
# tools/remote-gpu/peer/pack.sh — packs the peer for a GPU machine into .gpu-peer/ (ignored by git): node
# and llama.cpp's CUDA build as node-llama-cpp ships it (the version ../shared/peer uses), ~29 MB where
# the prebuilt package is 159 MB, so that it travels with the checkout.
#
# Why the surgery: the prebuilt @node-llama-cpp/linux-x64-cuda has a 159 MB fat binary with machine
# code for sm_86/89/120/121 only and PTX of ISA 9.1, which a CUDA 13.0 driver (580)
# cannot compile: nothing in it runs on an H100/H200 as shipped. So each kernel module's PTX is dumped,
# its `.version` lowered to 9.0 and compiled with this machine's ptxas (CUDA 13.0) for sm_90, and only
# the modules a Llama-shaped GGUF needs are kept (KEEP, indices in the section's order: the common ops,
# mmvq, mmvf, mmq for Q4_0/Q4_K/Q6_K/Q8_0, flash attention for head dim 128 / GQA 4); the others are
# emptied, and a kernel of theirs fails with "no kernel image is available" (run.sh says so).
# prune_fatbin.py rewrites each fat binary in place, so every pointer into the section stays valid.
#
# usage: tools/remote-gpu/peer/pack.sh       (needs npm, zstd, xz, /usr/local/cuda/bin/ptxas, ../shared/peer
#                                            installed: cd ../shared/peer && npm install)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../../.." && pwd)
ver=$(node -p "require('$root/../shared/peer/package.json').dependencies['node-llama-cpp']")
keep=${KEEP:-"0-4,6-12,14-20,22-25,27-28,30,32-33,35,38-39,42-55,59-61,63-66,23,36,37,139,85,115,117,121,122,88,94,99,69"}
ptxas=${PTXAS:-/usr/local/cuda/bin/ptxas}
work=${TMPDIR:-/tmp}/ember-peer-pack; out=$root/.gpu-peer
rm -rf "$work" && mkdir -p "$work/ptx" "$work/cubin" "$work/stage/node_modules/@node-llama-cpp" "$out"
log() { echo "pack.sh: $*" >&2; }

log "fetching @node-llama-cpp/linux-x64-cuda@$ver"
(cd "$work" && npm pack -q "@node-llama-cpp/linux-x64-cuda@$ver" >/dev/null && tar xzf ./*.tgz)
bins=$work/package/bins/linux-x64-cuda
python3 "$here/prune_fatbin.py" "$bins/libggml-cuda.so" --dump-ptx "$work/ptx" --arch 90 >/dev/null

# The kept modules' sm_90 code.
indices=$(python3 -c "
import sys
s = set()
for part in sys.argv[1].split(','):
    a, _, b = part.partition('-')
    s.update(range(int(a), int(b or a) + 1))
print(' '.join('%03d' % i for i in sorted(s)))" "$keep")
# (The payloads end in a NUL, which ptxas reads as a premature end of file.)
printf '%s\n' $indices | xargs -P "${JOBS:-2}" -I{} sh -c \
  'zstd -q -dc "$1/ptx/{}.zst" | tr -d "\000" | sed "s/^\.version 9\.[1-9]/.version 9.0/" > "$1/ptx/{}.ptx" &&
   "$2" -arch=sm_90 -O3 "$1/ptx/{}.ptx" -o "$1/cubin/{}.cubin"' _ "$work" "$ptxas"
log "compiled $(ls "$work/cubin" | wc -l) modules for sm_90"
python3 "$here/prune_fatbin.py" "$bins/libggml-cuda.so" "$work/cuda.so" --cubins "$work/cubin" --keep "$keep" | tail -1 >&2

# node-llama-cpp's JavaScript and its dependencies, without the llama.cpp sources it can build from and
# without the CPU/Vulkan prebuilts; the CUDA package with the cut library and one CPU variant (AVX2).
cp -a "$root/../shared/peer/node_modules/." "$work/stage/node_modules/"
rm -rf "$work/stage/node_modules/node-llama-cpp/llama/gitRelease.bundle" "$work/stage/node_modules/node-llama-cpp/llama/addon" \
       "$work/stage/node_modules/@node-llama-cpp/"linux-x64 "$work/stage/node_modules/@node-llama-cpp/"linux-x64-vulkan
# What only building or type-checking reads: headers for native builds, type declarations, source maps, docs.
rm -rf "$work/stage/node_modules/node-addon-api" "$work/stage/node_modules/node-api-headers"
find "$work/stage/node_modules" \( -name '*.d.ts' -o -name '*.map' -o -name '*.md' \) -type f -delete
cp -a "$work/package" "$work/stage/node_modules/@node-llama-cpp/linux-x64-cuda"
cb=$work/stage/node_modules/@node-llama-cpp/linux-x64-cuda/bins/linux-x64-cuda
find "$cb" -name 'libggml-cpu-*.so' ! -name 'libggml-cpu-haswell.so' -delete
strip --strip-unneeded -o "$cb/libggml-cuda.so" "$work/cuda.so"
tar --owner=0 --group=0 --sort=name -cf "$work/nlc.tar" -C "$work/stage" node_modules
xz -9e --x86 --lzma2=preset=9e -T2 -c "$work/nlc.tar" > "$out/nlc.tar.xz"
strip -o "$work/node" "$(command -v node)"
xz -9e --x86 --lzma2=preset=9e -T2 -c "$work/node" > "$out/node.xz"
cp "$here/run.sh" "$here/prune_fatbin.py" "$out/"
log "$(du -sb "$out" | cut -f1) bytes in $out (keep under 29 MiB beside the repo)"
