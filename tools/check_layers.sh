#!/usr/bin/env bash
# The dependency rules of docs/architecture.md, enforced: every #include "folder/..." of a source folder
# must name a folder that folder may use; backends must not know architectures. Run by ctest
# (test_layers) and by hand: bash tools/check_layers.sh [repo root]. Prints each violation; exit 1 on any.
set -uo pipefail
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
cd "$root"

# folder -> the src/ folders it may include (besides itself). Lower layers first.
declare -A allowed=(
  [src/core]=""
  [src/gguf]="core"
  [src/tokenizer]="core gguf"
  [src/grammar]="core tokenizer"
  [src/backend]="core"
  [src/cpu]="core backend"
  [src/kv]="core"
  [src/sampler]="core tokenizer grammar"
  [src/chat]="core"
  [src/tools]="core grammar chat"
  [src/model]="core gguf tokenizer backend"
  [src/session]="core gguf tokenizer grammar backend model kv sampler"
  [src/spec]="core gguf tokenizer grammar backend model kv sampler session"
  [src/engine]="core gguf tokenizer grammar backend model kv sampler session spec embed"
  [src/embed]="core gguf tokenizer backend model"
  [src/abi]="core gguf tokenizer grammar backend model kv sampler session spec engine chat tools embed"
  [src/testing]="core gguf tokenizer backend cpu model"
  [cuda]="core backend"
  [vulkan]="core backend"
  [tools/convert]="core gguf"
  [bench]="core testing"
  [tools/ember]=""
  [samples]=""
)
# Every src/ folder must be in the table: a new folder needs its rule.
status=0
for d in src/*/; do
  d="${d%/}"
  [[ -v allowed[$d] ]] || { echo "check_layers: $d has no rule in tools/check_layers.sh"; status=1; }
done
for dir in "${!allowed[@]}"; do
  [ -d "$dir" ] || continue
  own="${dir#src/}"
  while IFS= read -r line; do
    file="${line%%:*}"
    inc=$(sed -E 's/.*#include "([a-z_]+)\/.*/\1/' <<<"$line")
    [ "$inc" = "$own" ] && continue
    [ "$inc" = "ember" ] && continue   # the public header
    # Only folders of src/ are layers; a module's or a tool's own subfolders are its own business.
    [ -d "src/$inc" ] || continue
    case " ${allowed[$dir]} " in
      *" $inc "*) ;;
      *) echo "check_layers: $file includes $inc/ (allowed for $dir: ${allowed[$dir]:-none})"; status=1 ;;
    esac
  done < <(grep -rHE '^#include "[a-z_]+/' "$dir" --include='*.c' --include='*.cpp' --include='*.h' --include='*.hpp' --include='*.cu' --include='*.cuh' 2>/dev/null)
done
# Backends run programs of ops: no architecture names or flags in them.
# (llama.cpp, the peer we measure against, may be named in comments.)
if hits=$(grep -rnwiE 'llama|qwen2|qwen3|rope_neox|qkv_bias|gemma|phi3|mixtral' src/cpu cuda vulkan \
            --include='*.c' --include='*.cpp' --include='*.h' --include='*.hpp' --include='*.cu' --include='*.cuh' \
            --include='*.comp' --include='*.glsl' 2>/dev/null | grep -viE 'llama\.cpp'); then
  echo "check_layers: architecture knowledge in a backend:"
  echo "$hits"
  status=1
fi
[ $status -eq 0 ] && echo "check_layers: every include follows the layer rules; no backend names an architecture"
exit $status
