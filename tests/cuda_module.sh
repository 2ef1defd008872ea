#!/usr/bin/env bash
# The CUDA module's linkage, checked on any machine (no GPU needed):
#   - libember has no NEEDED entry for any NVIDIA library (the module is dlopen'ed);
#   - libember-cuda.so has none for libcuda, libcudart or libcublasLt (the runtime is linked statically
#     and opens the driver itself; cuBLASLt is dlopen'ed) and exports ember_backend_module_v1 alone;
#   - with no driver, `ember run --backend cuda` fails with a message naming the reason, and
#     `--backend auto` runs on the CPU.
# usage: cuda_module.sh LIBEMBER LIBEMBER_CUDA   (env: EMBER_CLI, EMBER_REPO_MODELS)
set -euo pipefail
lib=$1; mod=$2
nvidia='libcuda|libcudart|libcublas|libnvidia|libnvrtc|libnvJitLink'
if readelf -d "$lib" | grep NEEDED | grep -E "$nvidia"; then
  echo "FAIL: libember needs an NVIDIA library"; exit 1
fi
if readelf -d "$mod" | grep NEEDED | grep -E "$nvidia"; then
  echo "FAIL: libember-cuda.so needs an NVIDIA library"; exit 1
fi
echo "NEEDED of $(basename "$mod"): $(readelf -d "$mod" | awk '/NEEDED/ {print $5}' | tr -d '[]' | tr '\n' ' ')"
exports=$(nm -D --defined-only "$mod" | awk '{print $3}')
[ "$exports" = "ember_backend_module_v1" ] || { echo "FAIL: libember-cuda.so exports: $exports"; exit 1; }
echo "exports: $exports"

if [ -n "${EMBER_CLI:-}" ] && [ -f "${EMBER_REPO_MODELS:-}/stories15M-q8_0.gguf" ]; then
  model=$EMBER_REPO_MODELS/stories15M-q8_0.gguf
  set +e
  out=$(EMBER_CUDA_DRIVER=/nonexistent/libcuda.so.1 "$EMBER_CLI" run -m "$model" -p "Once" -n 4 --temp 0 --backend cuda 2>&1)
  rc=$?
  set -e
  echo "ember run --backend cuda (no driver): exit $rc: $out"
  [ $rc -ne 0 ] || { echo "FAIL: --backend cuda succeeded without a driver"; exit 1; }
  echo "$out" | grep -q "no CUDA driver" || { echo "FAIL: the message does not say why"; exit 1; }
  EMBER_CUDA_DRIVER=/nonexistent/libcuda.so.1 "$EMBER_CLI" run -m "$model" -p "Once" -n 4 --temp 0 --backend auto > /dev/null
  echo "ember run --backend auto (no driver): ok"
fi
echo "ok"
