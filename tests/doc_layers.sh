#!/usr/bin/env bash
# test_doc_layers: docs/architecture.md's table of which folder may include which is the table that
# tools/check_layers.sh enforces (its `allowed` array), row for row, so the documented picture of the
# layers cannot drift from the rule the build checks.
# usage: doc_layers.sh SOURCE_DIR
set -euo pipefail
src=$1
# The script's rows: [folder]="a b c" → "folder|a b c" ("nothing" for an empty list).
script=$(sed -n 's/^ *\[\([a-z_/]*\)\]="\([a-z_ ]*\)"$/\1|\2/p' "$src/tools/check_layers.sh" |
         awk -F'|' '{ print $1 "|" ($2 == "" ? "nothing" : $2) }' | sort)
# The document's rows: | `folder` | a b c |, under the layer-table marker.
doc=$(awk '/<!-- layer-table/ {on=1; next} on && /^\| `/ {print; seen=1; next} on && seen && !/^\|/ {exit}' \
        "$src/docs/architecture.md" | sed 's/^| `\([^`]*\)` | \(.*\) |$/\1|\2/' | sort)
[ -n "$script" ] || { echo "FAIL: no rows read from tools/check_layers.sh (its table changed shape: update tests/doc_layers.sh)"; exit 1; }
if [ "$script" != "$doc" ]; then
  echo "FAIL: docs/architecture.md's layer table differs from tools/check_layers.sh (- doc, + script):"
  diff <(printf '%s\n' "$doc") <(printf '%s\n' "$script") | grep '^[<>]' | sed 's/^</-/; s/^>/+/' || true
  exit 1
fi
echo "doc_layers: docs/architecture.md's $(printf '%s\n' "$script" | wc -l) rows match tools/check_layers.sh"
