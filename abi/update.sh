#!/usr/bin/env bash
# Rewrites the ABI baseline (abi/libember.abi, abi/libember.symbols) from a release build: the deliberate
# step after an ABI change that abi/README.md allows (a struct grown at its end with a new symbol version
# for its init, a new version node). Review `git diff abi/` before committing it.
# usage: bash abi/update.sh [BUILD_DIR]    (default: build, as tools/build.sh makes it)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
source "$here/common.sh"
abi_open_build "${1:-}"
abi_dump "$lib" "$src/include/ember" "$here/libember.abi"
abi_symbols "$lib" "$here/libember.symbols"
echo "abi: baseline written from $lib:"
echo "  $(grep -c ' ember_' "$here/libember.symbols") exported functions, $(grep -c '^A ' "$here/libember.symbols") version nodes"
if git -C "$root" rev-parse --git-dir > /dev/null 2>&1; then
  git -C "$root" --no-pager diff --stat -- abi/libember.abi abi/libember.symbols || true
fi
