#!/usr/bin/env bash
# Every binding's chat-sample test: the sample, run in its greedy test mode, must print the same token
# ids as the C API's reference (ember-greedy-ref) for the same model, prompt and count.
# Usage: same_greedy_ids.sh LABEL SAMPLE_COMMAND...   where the words {model}, {prompt} and {n} in the
# command are replaced by the model path, the prompt and the token count this script uses.
# Environment (ctest gives it, bindings/README.md): EMBER_GREEDY_REF, EMBER_REPO_MODELS.
# Exits 77 (skip) when the model is missing.
set -euo pipefail
label=$1
shift
model=${EMBER_REPO_MODELS:-$(dirname "$0")/../../models}/stories15M-q8_0.gguf
prompt="One day, a little girl named Lily found a"
n=24
if [ ! -f "$model" ]; then echo "skipped: $model is missing"; exit 77; fi
: "${EMBER_GREEDY_REF:?set EMBER_GREEDY_REF (the ember-greedy-ref program)}"

cmd=()
for word in "$@"; do
  case $word in
    "{model}") cmd+=("$model") ;;
    "{prompt}") cmd+=("$prompt") ;;
    "{n}") cmd+=("$n") ;;
    *) cmd+=("$word") ;;
  esac
done
want=$("$EMBER_GREEDY_REF" "$model" "$prompt" "$n")
got=$("${cmd[@]}")
if [ -z "$want" ]; then echo "FAIL: ember-greedy-ref printed nothing"; exit 1; fi
if [ "$got" != "$want" ]; then
  echo "FAIL: the $label chat sample's greedy ids differ from ember-greedy-ref's (< reference, > $label):"
  diff <(printf '%s\n' "$want") <(printf '%s\n' "$got") || true
  exit 1
fi
echo "ok: the $label chat sample printed the same $(printf '%s\n' "$got" | wc -l) greedy ids as ember-greedy-ref"
