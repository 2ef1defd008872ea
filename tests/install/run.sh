#!/usr/bin/env bash
# Installs the build into a temporary prefix, then checks what a user of the package sees, with no
# LD_LIBRARY_PATH anywhere: find_package(ember) and pkg-config both build a working program, the
# installed CLI runs in place and after the prefix is moved, the header is installed, and the
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

# Nothing below sets LD_LIBRARY_PATH: installed programs find libember through their RPATH
# ($ORIGIN/../lib for ours, the consumer's own for the test programs).
unset LD_LIBRARY_PATH

# 1. CMake package: CMake links the imported libember with its location as the program's RPATH.
cmake -S "$src/tests/install" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$tmp/prefix" > /dev/null
cmake --build "$tmp/cmake" > /dev/null
"$tmp/cmake/consumer"

# 2. pkg-config: the flags it gives, plus an RPATH to its libdir (what a program linked against a prefix
#    outside the linker's default paths adds; see README.md, "The library").
export PKG_CONFIG_PATH="$libdir/pkgconfig"
pc_libdir=$(pkg-config --variable=libdir ember)
cc -std=c11 "$src/tests/install/consumer.c" $(pkg-config --cflags --libs ember) -Wl,-rpath,"$pc_libdir" -o "$tmp/pc-consumer"
"$tmp/pc-consumer"
# A shared libember names its dependencies itself: the .pc file lists none (no Libs.private for a static
# library that is not installed).
! grep -q '^Libs.private' "$libdir/pkgconfig/ember.pc" || { echo "ember.pc has Libs.private but no static libember is installed"; exit 1; }

# 3. The installed CLI runs as installed, and after the whole prefix is moved (relocatable: RPATH
#    $ORIGIN/../lib, the .pc file relative to itself).
if [ -f "$build/tools/ember/ember" ]; then   # built unless EMBER_BUILD_TOOLS=OFF
  test -x "$tmp/prefix/bin/ember" || { echo "bin/ember not installed"; exit 1; }
  "$tmp/prefix/bin/ember" version | grep -q '^ember '
  mv "$tmp/prefix" "$tmp/moved"
  "$tmp/moved/bin/ember" version | grep -q '^ember '
  PKG_CONFIG_PATH=${PKG_CONFIG_PATH/$tmp\/prefix/$tmp\/moved} pkg-config --libs ember | grep -q -- "-L$tmp/moved/"
  mv "$tmp/moved" "$tmp/prefix"
fi

# 4. Exports: every defined dynamic symbol is ember_* and carries a version node.
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
# 5. The backend modules (Vulkan, CUDA), where they were built: installed beside libember (where
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
