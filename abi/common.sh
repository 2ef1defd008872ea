# shellcheck shell=bash
# common.sh — sourced by abi/check.sh and abi/update.sh: how the ABI of a build is described, in one
# place, so that the baseline and the library under test are always read the same way.

# abi_library BUILD_DIR: prints the path of the shared library in a build directory, after checking that
# the build is one the gate can read (shared, with debug info, no sanitizers).
abi_library() {
  local build=$1 cache=$1/CMakeCache.txt
  [ -f "$cache" ] || { echo "abi: $build is not a CMake build directory" >&2; return 1; }
  local type shared asan tsan
  type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$cache")
  shared=$(sed -n 's/^EMBER_BUILD_SHARED:BOOL=//p' "$cache")
  asan=$(sed -n 's/^EMBER_SANITIZE:BOOL=//p' "$cache")
  tsan=$(sed -n 's/^EMBER_SANITIZE_THREAD:BOOL=//p' "$cache")
  case "$type" in RelWithDebInfo|Release) ;; *)
    echo "abi: $build is a '$type' build; the ABI is read from the release build (RelWithDebInfo)" >&2; return 1;;
  esac
  [ "${shared:-ON}" = ON ] || { echo "abi: $build builds a static library" >&2; return 1; }
  [ "${asan:-OFF}" = OFF ] && [ "${tsan:-OFF}" = OFF ] || { echo "abi: $build is a sanitizer build" >&2; return 1; }
  local lib=$build/libember.so.0
  [ -e "$lib" ] || { echo "abi: $lib not found (build the 'ember' target first)" >&2; return 1; }
  readlink -f "$lib"
}

# abi_source_dir BUILD_DIR: the source tree the build was configured from (its public headers are the
# ones compiled into the debug info).
abi_source_dir() {
  sed -n 's/^ember_SOURCE_DIR:STATIC=//p' "$1/CMakeCache.txt"
}

# abi_dump LIB HEADERS_DIR OUT: libabigail's description of LIB's exported interface. Types defined
# outside the public headers (the C++ behind the opaque handles) are dropped, so only what include/ember/
# declares is compared; no paths or line numbers, and type ids derived from the types, so that the
# committed file changes only when the ABI does.
abi_dump() {
  abidw --no-corpus-path --no-comp-dir-path --no-show-locs --short-locs --no-elf-needed --type-id-style hash --exported-interfaces-only \
        --drop-private-types --headers-dir "$2" --out-file "$3" "$1"
}

# abi_symbols LIB OUT: the SONAME, the version nodes ("A EMBER_1") and every exported symbol with its
# version ("T ember_x@@EMBER_1"; one "@": an older version kept for programs linked before), one a
# line, sorted bytewise (check.sh compares them with comm).
abi_symbols() {
  {
    echo "SONAME $(readelf -d "$1" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
    nm -D --defined-only --with-symbol-versions "$1" | awk '{print $2, $3}'
  } | LC_ALL=C sort > "$2"
}

# abi_require_tools: abidw/abidiff (Debian: abigail-tools) and binutils.
abi_require_tools() {
  local t
  for t in abidw abidiff nm readelf; do
    command -v "$t" > /dev/null || { echo "abi: '$t' not found (bash tools/install-deps.sh installs abigail-tools)" >&2; return 1; }
  done
}

# abi_open_build [BUILD_DIR]: what check.sh and update.sh both start with. Checks the tools, takes the
# build directory (default: the checkout's build/, made with tools/build.sh if missing) and sets
# `lib` (its libember.so) and `src` (the source tree it was configured from). Needs `root` set.
abi_open_build() {
  abi_require_tools
  local build=${1:-$root/build}
  if [ ! -e "$build/libember.so.0" ] && [ "$build" = "$root/build" ]; then
    bash "$root/tools/build.sh"
  fi
  lib=$(abi_library "$build")
  src=$(abi_source_dir "$build")
}
