#!/usr/bin/env bash
# The ABI gate: compares the libember.so of a release build with the committed baseline (abi/README.md
# states the policy). Fails when a symbol, a symbol version or the SONAME was removed or changed, when
# a type the public header declares changed (a struct's size or members, a function's parameters or
# return type, an enumerator's value), or when a new symbol was put into a version node the baseline
# already has. New functions in a new node, new types and new enumerators pass and are listed.
# usage: bash abi/check.sh [BUILD_DIR]    (default: build, made with tools/build.sh if missing)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
source "$here/common.sh"
abi_open_build "${1:-}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
abi_dump "$lib" "$src/include/ember" "$tmp/current.abi"
abi_symbols "$lib" "$tmp/current.symbols"
status=0

# 1. Symbols, versions and SONAME, by name: everything in the baseline must still be there, exactly.
removed=$(LC_ALL=C comm -23 "$here/libember.symbols" "$tmp/current.symbols")
added=$(LC_ALL=C comm -13 "$here/libember.symbols" "$tmp/current.symbols")
if [ -n "$removed" ]; then
  echo "abi: FAIL: removed or changed since the baseline (SONAME, version nodes, symbol@version):"
  echo "$removed" | sed 's/^/  - /'
  status=1
fi
# A version node is closed once it is in the baseline: a program that needs a symbol added to it later
# would load against an older libember that has the node and then fail at the first call, instead of
# being refused at load time ("version EMBER_1.N not found").
old_nodes=$(sed -n 's/^A //p' "$here/libember.symbols")
while read -r kind sym; do
  [ "$kind" = A ] || [ "$kind" = SONAME ] || [ -z "$sym" ] && continue
  node=${sym##*@}
  [ "$node" = EMBER_EXPERIMENTAL ] && continue
  if echo "$old_nodes" | grep -qxF "$node"; then
    echo "abi: FAIL: $sym was added to version node $node, which the baseline already has;"
    echo "     put new functions into a new node (cmake/ember.map), see abi/README.md"
    status=1
  fi
done <<< "$added"

# 2. Types and functions, as the debug info describes them, with the baseline as the old side. Added
# functions are not changes (--no-added-syms); abi/suppressions.ini lists what else is not checked, and why.
if ! abidiff --no-added-syms --suppressions "$here/suppressions.ini" \
     "$here/libember.abi" "$tmp/current.abi" > "$tmp/report" 2>&1; then
  echo "abi: FAIL: abidiff (baseline -> $lib):"
  sed 's/^/  /' "$tmp/report"
  status=1
fi

if [ -n "$added" ]; then
  echo "abi: added since the baseline (fine in a new version node; abi/update.sh records them):"
  echo "$added" | sed 's/^/  + /'
fi
if [ $status -eq 0 ]; then
  echo "abi: OK: $lib keeps every symbol, version and type of the baseline"
else
  echo "abi: an intended change (abi/README.md says which are allowed) is recorded with: bash abi/update.sh"
fi
exit $status
