#!/usr/bin/env bash
# test_readme_support: README.md's table of supported architectures, pre-tokenizers and
# weight types says what the code's own lists say:
#   architectures   build/generated/arch_list.inc (CMake writes one EMBER_ARCH(name) per src/model/arch_*.cpp),
#                   each by the GGUF name its spec gives
#   pre-tokenizers  src/tokenizer: the name table ({"name", PreTokenizer::...}) or, before it, the
#                   names BpeTokenizer compares with (pre == "name")
#   weight types    src/core/dtype.cpp: the rows of its table whose `supported` is true
# It fails when a list and the README differ, or when a list reads empty (the code's shape changed:
# update the extraction below). With --print it prints the table's rows from the code, to paste.
# usage: readme_support.sh SOURCE_DIR ARCH_LIST_INC [--print]
set -euo pipefail
src=$1; arch_inc=$2; mode=${3:-check}

# (grep finds nothing: an empty list, reported below rather than stopping the script)
# (LC_ALL=C: the README lists them in byte order; a UTF-8 locale sorts gpt3-finnish before gpt-4o.)
joined() { LC_ALL=C sort -u | awk 'NF' | sed 's/.*/`&`/' | paste -sd, - | sed 's/,/, /g'; }
# Each built spec's GGUF name: the string its arch_NAME.cpp gives (gpt_oss's is "gpt-oss").
archs=$(for a in $(sed -n 's/^EMBER_ARCH(\([a-z0-9_]*\))$/\1/p' "$arch_inc"); do
          grep -ho "arch_spec_$a *= *{\"[^\"]*\"" "$src/src/model/arch_$a.cpp" | sed 's/.*{"\([^"]*\)"/\1/' || true
        done | joined)
pre=$( { grep -ho '{"[^"]*", *PreTokenizer::' "$src"/src/tokenizer/*.cpp || true
         grep -ho 'pre == "[^"]*"' "$src"/src/tokenizer/*.cpp || true; } | sed 's/[^"]*"\([^"]*\)".*/\1/' | joined)
types=$( { grep -ho '{"[A-Z0-9_]*", *[0-9]*, *[0-9]*, *true}' "$src"/src/core/dtype.cpp || true; } |
        sed 's/{"\([^"]*\)".*/\1/' | joined)

rows=$(cat <<ROWS
| architectures (\`general.architecture\`) | $archs |
| pre-tokenizers (\`tokenizer.ggml.pre\`) | $pre |
| weight types | $types |
ROWS
)
if [ "$mode" = "--print" ]; then printf '%s\n' "$rows"; exit 0; fi

fail=0
for what in archs pre types; do
  [ -n "${!what}" ] || { echo "FAIL: no $what read from the code: its shape changed; update tests/readme_support.sh"; fail=1; }
done
# The README's rows: the lines of the table under the marker comment.
readme=$(awk '/<!-- support-table/ {on=1; next} on && /^\|/ {seen=1; if ($0 ~ /^\| (architectures|pre-tokenizers|weight types) /) print; next} on && seen {exit}' "$src/README.md")
if [ "$readme" != "$rows" ]; then
  echo "FAIL: README.md's table of supported files differs from the code (- README, + code):"
  diff <(printf '%s\n' "$readme") <(printf '%s\n' "$rows") | grep '^[<>]' | sed 's/^</-/; s/^>/+/' || true
  echo "      regenerate the rows with: bash tests/readme_support.sh . build/generated/arch_list.inc --print"
  fail=1
fi
[ $fail -eq 0 ] && echo "readme_support: README.md's table matches the code's lists"
exit $fail
