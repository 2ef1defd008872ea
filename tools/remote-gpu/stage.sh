#!/usr/bin/env bash
# tools/remote-gpu/stage.sh — pack what a GPU machine needs to run the test suite and the CUDA
# benchmarks without building there: the build tree's programs and libraries (stripped), the ctest files,
# the few Debian libraries the tests link that such a machine lacks, and the shared models the GPU tests
# read. Everything lands in .gpu/ (ignored by git), which goes to the GPU machine with the checkout; device.sh unpacks it there.
#
# usage: tools/remote-gpu/stage.sh BUILD_DIR [--no-shared]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:?usage: stage.sh BUILD_DIR}; shared=1; [ "${2:-}" = --no-shared ] && shared=0
rm -rf .gpu && mkdir -p .gpu/lib
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# Programs, libraries, ctest files and small data of the build tree; no objects, no CMake internals.
(cd "$build" && find . \( -name CMakeFiles -o -name Testing -o -name '_deps' -o -name target -o -name '*.dir' \) -prune -o \
   -type f \( -executable -o -name '*.so*' -o -name 'CTestTestfile.cmake' -o -name '*.gguf' -o -name '*.json' -o -name '*.layout' \) \
   -not -name '*.o' -not -name '*.a' -print) > "$tmp/files"
# What tests read from the build tree besides programs: test_install runs `cmake --install` (every
# directory's cmake_install.cmake, the package files and the export sets it copies, which CMake keeps
# under CMakeFiles/Export), test_readme_support the generated list of architectures. Text, a few KiB.
(cd "$build" && { find . \( -name CMakeFiles -o -name '_deps' -o -name target -o -name '*.dir' \) -prune -o \
     -type f \( -name cmake_install.cmake -o -name '*.pc' -o -name '*Config.cmake' -o -name '*ConfigVersion.cmake' \) -print
   find ./CMakeFiles/Export -type f -name '*.cmake' 2>/dev/null || true
   ls ./generated/arch_list.inc; }) >> "$tmp/files"
sort -u -o "$tmp/files" "$tmp/files"
(cd "$build" && tar cf - -T "$tmp/files") | (mkdir -p "$tmp/b" && cd "$tmp/b" && tar xf -)
find "$tmp/b" -type f | while read -r f; do
  if head -c4 "$f" | grep -q 'ELF'; then strip --strip-unneeded "$f" 2>/dev/null || true; fi
done
# Keep the symbolic links (libember.so -> libember.so.0 ...).
(cd "$build" && find . -maxdepth 2 -type l -name '*.so*' -print | tar cf - -T - ) | (cd "$tmp/b" && tar xf -)
tar cf - -C "$tmp/b" . | xz -9e -T2 --lzma2=preset=9e,dict=192MiB > .gpu/build.tar.xz
for l in libcmocka.so.0 libcpp-httplib.so.0.11 libbrotlicommon.so.1 libbrotlidec.so.1 libbrotlienc.so.1; do
  cp -L "/usr/lib/x86_64-linux-gnu/$l" .gpu/lib/
done
echo "$(cd "$build" && pwd)" > .gpu/build-path
if [ $shared -eq 1 ]; then
  s=../shared/models
  tar cf - -C "$s/.." models/stories260K models/llama2-tokenizer models/ggml-vocab models/stories15M/stories15M-q4_0.gguf models/PROVENANCE.md \
    | xz -6 -T2 > .gpu/shared-models.tar.xz
fi
du -sb .gpu/* | sort -n
