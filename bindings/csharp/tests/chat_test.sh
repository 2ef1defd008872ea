#!/usr/bin/env bash
# test_binding_csharp_chat: the chat sample (examples/Chat.cs) in its greedy test mode prints the same
# token ids as the C API's reference (ember-greedy-ref) for the same model, prompt and count.
# Usage: chat_test.sh MONO CHAT_EXE   (environment: EMBER_REPO_MODELS, EMBER_GREEDY_REF, LD_LIBRARY_PATH)
set -euo pipefail
mono=$1
chat=$2
exec bash "$(dirname "$0")/../../reference/same_greedy_ids.sh" C# \
  "$mono" --debug "$chat" -m {model} --prompt {prompt} -n {n} --print-ids
