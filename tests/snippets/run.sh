#!/usr/bin/env bash
# test_snippets_<lang>: every code block of one language in the given Markdown files is compiled and run,
# from the repository root (so "models/..." paths work), and must exit 0 having printed something. The
# documentation cannot drift from the API this way.
#   c       README.md's ```c blocks: a block without main() is the body of one, after the includes
#   csharp  ```csharp blocks, with Ember.dll of this build: a block without Main is the body of one
#   rust    ```rust blocks: whole programs, built by cargo (offline) against bindings/rust/ember
#   go      ```go blocks, built against bindings/go: a block without func main is the body of one,
#           with the standard packages it names imported
# Markdown conventions, invisible when rendered:
#   <!-- snippet-setup          lines up to "-->" are put before the next block (e.g. the model load a
#   ...                          later block continues from); they are compiled, not shown
#   -->
#   <!-- snippet: skip REASON -->   the next block is not run (say why)
#   sh      the lines of ```sh blocks that call the ember CLI ("ember CMD ..."): one naming only real
#           files (the shipped models/) is run with this build's CLI; one with placeholders (MODEL,
#           PROMPT, ...) is a synopsis, and each option it shows must be in `ember help CMD`. Other
#           commands of sh blocks (installing, building) are not run here.
# Blocks of other languages (toml, xml) are configuration, not run here.
# Skips (77), saying why, where the language's toolchain is missing.
# usage: run.sh LANG SOURCE_DIR BUILD_DIR FILE...
set -euo pipefail
lang=$1; src=$(cd "$2" && pwd); build=$(cd "$3" && pwd); shift 3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

need() { command -v "$1" > /dev/null || { echo "SKIP: $1 not found: the $lang snippets are not run"; exit 77; }; }
case $lang in
  c) need cc ;;
  csharp) need mcs; need mono
          dll=$build/bindings/csharp/Ember.dll
          [ -f "$dll" ] || { echo "SKIP: $dll not built (the C# binding needs mcs and mono at configure time)"; exit 77; } ;;
  rust) cargo=$(command -v cargo || echo "$HOME/.cargo/bin/cargo")
        [ -x "$cargo" ] || { echo "SKIP: cargo not found (PATH, ~/.cargo/bin): the rust snippets are not run"; exit 77; } ;;
  go) need go ;;
  sh) cli=$build/tools/ember/ember
      [ -x "$cli" ] || { echo "SKIP: $cli not built (EMBER_BUILD_TOOLS=OFF)"; exit 77; } ;;
  *) echo "run.sh: unknown language $lang"; exit 2 ;;
esac

# Extracts the blocks: $tmp/block-N.txt (the code) and $tmp/setup-N.txt (its setup, maybe empty).
extract() {
  awk -v lang="$lang" -v out="$tmp" -v file="$1" '
    function fence_lang(s) { sub(/^```/, "", s); return s == "cs" ? "csharp" : s }
    /^<!-- snippet-setup[ \t]*$/ { insetup = 1; setup = ""; next }
    insetup && /^-->[ \t]*$/ { insetup = 0; next }
    insetup { setup = setup $0 "\n"; next }
    /^<!-- snippet: skip/ { skip = 1; next }
    !inblock && /^```[a-z]+[ \t]*$/ {
      inblock = 1; mine = fence_lang($1) == lang && !skip; skip = 0; code = ""; start = NR; next
    }
    inblock && /^```[ \t]*$/ {
      inblock = 0
      if (mine) {
        n++
        printf "%s", code > (out "/block-" n ".txt"); close(out "/block-" n ".txt")
        printf "%s", setup > (out "/setup-" n ".txt"); close(out "/setup-" n ".txt")
        print file ":" start > (out "/where-" n ".txt"); close(out "/where-" n ".txt")
      }
      setup = ""; next
    }
    inblock { code = code $0 "\n" }
    END { print n + 0 > (out "/count.txt") }
  ' "$1"
}

build_c() {  # $1 block, $2 setup, $3 exe
  local f=$tmp/snippet.c
  if grep -q 'int main' "$1"; then cat "$2" "$1" > "$f"
  else
    { printf '#include <ember/ember.h>\n#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n\n'
      printf 'int main(void) {\n'; cat "$2" "$1"; printf 'return 0;\n}\n'; } > "$f"
  fi
  cc -std=c11 -Wall -Werror=implicit-function-declaration -Werror=incompatible-pointer-types -I"$src/include" "$f" \
     -L"$build" -lember -Wl,-rpath,"$build" -o "$3"
}

build_csharp() {
  local f=$tmp/snippet.cs
  if grep -q 'static void Main' "$1"; then cat "$2" "$1" > "$f"
  else
    { printf 'using System;\nusing System.Collections.Generic;\nusing System.Linq;\nusing Ember;\n\nstatic class Snippet {\nstatic void Main() {\n'
      cat "$2" "$1"; printf '}\n}\n'; } > "$f"
  fi
  mcs -langversion:7 -r:"$dll" -r:System.Core.dll -out:"$3" "$f" > "$tmp/mcs.log" || { cat "$tmp/mcs.log"; return 1; }
  cp "$dll" "$(dirname "$3")/"
  # mono runs the .exe; libember is found through LD_LIBRARY_PATH (DllImport("ember")).
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec mono %s "$@"\n' "$build" "$3" > "$3.sh"
}

build_rust() {
  local proj=$tmp/rust
  mkdir -p "$proj/src"
  cat "$2" "$1" > "$proj/src/main.rs"
  cat > "$proj/Cargo.toml" <<TOML
[package]
name = "snippet"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
ember = { path = "$src/bindings/rust/ember" }

[workspace]
TOML
  # The target folder stays in the build tree, so a second run compiles the crates again only if they changed.
  EMBER_LIB_DIR=$build CARGO_TARGET_DIR=$build/snippets/rust-target "$cargo" build --offline --quiet \
    --manifest-path "$proj/Cargo.toml"
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$build" "$build/snippets/rust-target/debug/snippet" > "$3.sh"
}

build_go() {
  local proj=$tmp/go f
  mkdir -p "$proj"
  f=$proj/main.go
  if grep -q 'func main' "$1"; then cat "$2" "$1" > "$f"
  else
    local body imports=() pkg
    body=$(cat "$2" "$1")
    # The standard packages the body names (an unused import is a Go compile error).
    for pkg in context errors fmt io log os strings time; do
      if grep -q "\b$pkg\." <<< "$body"; then imports+=("\"$pkg\""); fi
    done
    { printf 'package main\n\nimport (\n'; printf '\t%s\n' "${imports[@]}"; printf '\t"ember.dev/go/ember"\n)\n\nfunc main() {\n'
      printf '%s\n}\n' "$body"; } > "$f"
  fi
  printf 'module snippet\n\ngo 1.19\n\nrequire ember.dev/go/ember v0.0.0\n\nreplace ember.dev/go/ember => %s/bindings/go\n' "$src" > "$proj/go.mod"
  ( cd "$proj" && CGO_ENABLED=1 CGO_CFLAGS="-O2 -g -I$src/include" CGO_LDFLAGS="-L$build -Wl,-rpath,$build" \
      GOCACHE=$build/bindings/go/go-cache GOPATH=$build/bindings/go/gopath GOPROXY=off GOFLAGS="-mod=mod -buildvcs=false" \
      GOTELEMETRY=off go build -o "$3" . )
}

# sh: the ember command lines of each block (continuation lines joined, comments dropped).
check_sh_block() {  # $1 block, $2 where
  local line cmd words w help
  while IFS= read -r line; do
    line=${line%%  #*}
    [[ $line =~ ^ember\ ([a-z]+) ]] || continue
    cmd=${BASH_REMATCH[1]}
    read -r -a words <<< "$line"
    if grep -qwE '[A-Z][A-Z_]{2,}|[A-Z]' <<< "${line//\"*\"/}" ; then
      help=$("$cli" help "$cmd") || { echo "FAIL: $2: 'ember $cmd' is not a command"; return 1; }
      for w in "${words[@]}"; do
        w=${w#[}; w=${w%]}; w=${w%%=*}
        [[ $w == -* ]] || continue
        grep -qF -- "$w" <<< "$help" || { echo "FAIL: $2: '$w' of 'ember $cmd' is not in 'ember help $cmd'"; return 1; }
      done
      echo "ok: $2: synopsis of ember $cmd: every option is in its help"
    else
      local out
      if ! out=$(cd "$src" && eval "\"$cli\" ${line#ember }" 2>&1); then
        echo "FAIL: $2: '$line' exits non-zero:"; echo "$out"; return 1
      fi
      echo "ok: $2: ran '$line': $(printf '%s' "$out" | head -c 100 | tr '\n' ' ')"
    fi
  done < <(sed -e ':a' -e '/\\$/N; s/\\\n */ /; ta' "$1")
}

total=0
for md in "$@"; do
  extract "$md"
  n=$(cat "$tmp/count.txt")
  for i in $(seq 1 "$n"); do
    total=$((total + 1))
    where=$(cat "$tmp/where-$i.txt")
    if [ "$lang" = sh ]; then
      check_sh_block "$tmp/block-$i.txt" "${where#$src/}" || exit 1
      continue
    fi
    exe=$tmp/snippet-$total
    if ! "build_$lang" "$tmp/block-$i.txt" "$tmp/setup-$i.txt" "$exe"; then
      echo "FAIL: the $lang block at ${where#$src/} does not compile"; exit 1
    fi
    run=$exe; [ -f "$exe.sh" ] && run="sh $exe.sh"
    if ! out=$(cd "$src" && timeout 120 $run 2>&1); then
      echo "FAIL: the $lang block at ${where#$src/} exits non-zero:"; echo "$out"; exit 1
    fi
    [ -n "$out" ] || { echo "FAIL: the $lang block at ${where#$src/} printed nothing"; exit 1; }
    echo "ok: ${where#$src/}: $(printf '%s' "$out" | head -c 160 | tr '\n' ' ')"
  done
done
[ $total -gt 0 ] || { echo "FAIL: no $lang blocks found in $*"; exit 1; }
echo "snippets: $total $lang block(s) checked (code compiled and run; sh: the ember lines run or their options found in the help)"
