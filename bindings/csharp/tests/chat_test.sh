#!/usr/bin/env bash
# test_binding_csharp_chat: the chat sample (examples/Chat.cs) in its greedy test mode prints the same
# token ids as the C API's reference (ember-greedy-ref) for the same model, prompt and count.
# Usage: chat_test.sh MONO CHAT_EXE   (environment: EMBER_REPO_MODELS, EMBER_GREEDY_REF, LD_LIBRARY_PATH)
set -euo pipefail
mono=$1
chat=$2
model=${EMBER_REPO_MODELS:-}/stories15M-q8_0.gguf
if [ ! -f "$model" ]; then echo "skipped: $model is missing"; exit 77; fi
prompt="One day, a little girl named Lily found a"
n=16

want=$("$EMBER_GREEDY_REF" "$model" "$prompt" "$n")
got=$("$mono" --debug "$chat" -m "$model" --prompt "$prompt" -n "$n" --print-ids)
if [ -z "$got" ]; then echo "FAIL: Chat.exe printed no ids"; exit 1; fi
if [ "$want" != "$got" ]; then
  echo "FAIL: Chat.exe's ids differ from ember-greedy-ref's (< reference, > Chat.exe):"
  diff <(printf '%s\n' "$want") <(printf '%s\n' "$got") || true
  exit 1
fi
echo "PASS: Chat.exe printed the same $(printf '%s\n' "$got" | wc -l) ids as ember-greedy-ref"
