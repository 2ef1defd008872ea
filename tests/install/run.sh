#!/usr/bin/env bash
# Installs the build into a temporary prefix, then checks what a user of the package sees:
# find_package(ember) and pkg-config both build a working program, the header is installed, and the
# shared library exports only ember_* symbols, each under the EMBER_1 version node.
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

# 3. Exports: every defined dynamic symbol is ember_* and carries the version node.
bad=$(nm -D --defined-only --with-symbol-versions "$lib" | awk '{print $3}' | grep -v '^ember_.*@@EMBER_1$' | grep -v '^EMBER_1$' || true)
if [ -n "$bad" ]; then
  echo "unexpected exported symbols:"; echo "$bad"; exit 1
fi
n=$(nm -D --defined-only "$lib" | grep -c ' ember_')
echo "exports: $n ember_* symbols, all @@EMBER_1"
test "$n" -ge 40
