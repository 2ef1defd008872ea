#!/usr/bin/env bash
# Installs the build into a temporary prefix, then checks what a user of the package sees:
# find_package(ember) and pkg-config both build a working program, the header is installed, and the
# shared library exports only ember_* symbols, each under a version node of cmake/ember.map (EMBER_1,
# EMBER_1.1, ..., EMBER_EXPERIMENTAL), and keeps the EMBER_1 versions of the inits whose structs grew.
# (abi/check.sh compares the exports and their types with the committed baseline.)
# usage: run.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1; src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > /dev/null
test -f "$tmp/prefix/include/ember/ember.h"
lib=$(ls "$tmp"/prefix/lib*/libember.so.0 2>/dev/null || ls "$tmp"/prefix/lib/*/libember.so.0)
libdir=$(dirname "$lib")

# 1. CMake package
cmake -S "$src/tests/install" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$tmp/prefix" > /dev/null
cmake --build "$tmp/cmake" > /dev/null
LD_LIBRARY_PATH="$libdir" "$tmp/cmake/consumer"

# 2. pkg-config
export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc -std=c11 "$src/tests/install/consumer.c" $(pkg-config --cflags --libs ember) -o "$tmp/pc-consumer"
LD_LIBRARY_PATH="$libdir" "$tmp/pc-consumer"

# 3. Exports: every defined dynamic symbol is ember_* and carries a version node.
syms=$(nm -D --defined-only --with-symbol-versions "$lib" | awk '{print $3}')
# (EMBER_EXPERIMENTAL: the node of functions not yet promised, abi/README.md.)
bad=$(echo "$syms" | grep -Ev '^ember_[a-z0-9_]+@@?EMBER_(1(\.[0-9]+)?|EXPERIMENTAL)$' |
      grep -Ev '^EMBER_(1(\.[0-9]+)?|EXPERIMENTAL)$' || true)
if [ -n "$bad" ]; then
  echo "unexpected exported symbols:"; echo "$bad"; exit 1
fi
for old in ember_session_params_init@EMBER_1 ember_engine_params_init@EMBER_1 ember_generate_params_init@EMBER_1; do
  echo "$syms" | grep -qx "$old" || { echo "missing $old (programs built against EMBER_1 need it)"; exit 1; }
done
# 4. The backend modules (Vulkan, CUDA), where they were built: installed beside libember (where
#    libember looks for them), each exporting its module entry point alone.
for name in vulkan cuda; do
  [ -f "$build/libember-$name.so" ] || continue
  test -f "$libdir/libember-$name.so" || { echo "libember-$name.so not installed beside libember"; exit 1; }
  mod=$(nm -D --defined-only "$libdir/libember-$name.so" | awk '{print $3}')
  [ "$mod" = "ember_backend_module_v1" ] || { echo "libember-$name.so exports: $mod"; exit 1; }
done
n=$(echo "$syms" | grep -c '@@EMBER_1')
echo "exports: $n ember_* symbols, each under a version node"
test "$n" -ge 40
