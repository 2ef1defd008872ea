#!/usr/bin/env bash
# test_sample_game_loop: runs ember-game-loop for 3 s and checks its closing statistics line.
#
# The sample's goal is at most 1 ms of Ember calls per frame at p99, and it meets that on an idle machine
# (samples/README.md has the figures). CI runs on two cores shared with other builds and tests, where the
# game thread can be descheduled in the middle of a call and the call then "takes" a time slice; so this
# test asserts a looser p99 (EMBER_GAME_LOOP_P99_MS, default 5 ms) — still far below what a call that
# waited for a forward pass would take (tens of ms on such a machine). Set EMBER_GAME_LOOP_P99_MS=1 on an
# idle machine to check the real budget.
set -u
bin=$1
model=${EMBER_REPO_MODELS:-}/stories15M-q8_0.gguf
if [[ -z ${EMBER_REPO_MODELS:-} || ! -f $model ]]; then
  echo "SKIP: $model not found (EMBER_REPO_MODELS)"
  exit 77
fi
p99_limit=${EMBER_GAME_LOOP_P99_MS:-5}
seconds=3

out=$("$bin" -m "$model" --seconds $seconds --npcs 8 -t 1 --quiet 2>&1)
rc=$?
echo "$out"
if [[ $rc -ne 0 ]]; then
  echo "FAIL: ember-game-loop exited with $rc"
  exit 1
fi
stats=$(grep '^stats: ' <<<"$out" | tail -1)
if [[ -z $stats ]]; then
  echo "FAIL: no 'stats:' line in the output"
  exit 1
fi
field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" <<<" ${stats#stats: }"; }
frames=$(field frames); secs=$(field seconds); p99=$(field p99_ms); mx=$(field max_ms); tokens=$(field tokens)
progress=$(grep -c '^t=' <<<"$out")
echo "checking: frames=$frames seconds=$secs p99_ms=$p99 (limit $p99_limit) max_ms=$mx tokens=$tokens progress_lines=$progress"

ok=1
# About 60 frames a second: a loop that did not sleep would count thousands, one that stalled far fewer.
awk -v f="$frames" -v s="$secs" 'BEGIN { r = f / s; exit !(r >= 50 && r <= 61.5) }' ||
  { echo "FAIL: $frames frames in $secs s is not about 60 per second"; ok=0; }
awk -v p="$p99" -v l="$p99_limit" 'BEGIN { exit !(p <= l) }' ||
  { echo "FAIL: p99 of Ember time per frame is $p99 ms, over $p99_limit ms"; ok=0; }
[[ $tokens -gt 0 ]] || { echo "FAIL: no tokens generated"; ok=0; }
# One progress line a second.
[[ $progress -ge $((seconds - 1)) && $progress -le $((seconds + 1)) ]] ||
  { echo "FAIL: $progress progress lines in $seconds s"; ok=0; }
# --json: every NPC line is a JSON action under a schema grammar; lines that ended on their own carry an
# action (the counter), and a 64-token limit leaves room for most of them. Long enough for a few lines at
# the rate the first run measured (2 s on a release build; a sanitizer build on a slow machine made 57
# tokens in 2 s, no line complete): 512 tokens' worth, 2 to 12 s.
jsecs=$(awk -v t="$(field tok_per_s)" 'BEGIN { s = t > 0 ? int(512 / t) + 1 : 12; print (s < 2 ? 2 : (s > 12 ? 12 : s)) }')
jout=$("$bin" -m "$model" --seconds "$jsecs" --npcs 4 -t 1 --json 2>&1)
jstats=$(grep '^stats: ' <<<"$jout" | tail -1)
jlines=$(sed -n 's/.* lines=\([0-9]*\).*/\1/p' <<<"$jstats"); jcomplete=$(sed -n 's/.* json_complete=\([0-9]*\).*/\1/p' <<<"$jstats")
echo "checking --json: lines=$jlines json_complete=$jcomplete"
[[ -n $jcomplete && $jcomplete -gt 0 && $((2 * jcomplete)) -ge $jlines ]] ||
  { echo "FAIL: --json gave $jcomplete complete actions in $jlines lines"; echo "$jout" | tail -5; ok=0; }
bad=$(grep '^  \[' <<<"$jout" | grep -vc '^  \[[a-z]* [0-9]*\] {' || true)
[[ $bad -eq 0 ]] || { echo "FAIL: $bad --json lines do not start with {"; ok=0; }
# --tools: every NPC line is a call of one of the game's tools (the tool-call grammar, parsed back by
# ember_chat_parser); the printed lines of complete calls name a tool and carry JSON arguments.
tout=$("$bin" -m "$model" --seconds "$jsecs" --npcs 4 -t 1 --tools 2>&1)
tstats=$(grep '^stats: ' <<<"$tout" | tail -1)
tlines=$(sed -n 's/.* lines=\([0-9]*\).*/\1/p' <<<"$tstats"); tcomplete=$(sed -n 's/.* json_complete=\([0-9]*\).*/\1/p' <<<"$tstats")
echo "checking --tools: lines=$tlines calls=$tcomplete"
[[ -n $tcomplete && $tcomplete -gt 0 && $((2 * tcomplete)) -ge $tlines ]] ||
  { echo "FAIL: --tools gave $tcomplete complete calls in $tlines lines"; echo "$tout" | tail -5; ok=0; }
calls=$(grep -c '^  \[[a-z]* [0-9]*\] \(open_door\|say\|attack\|flee\)({.*})$' <<<"$tout" || true)
[[ $calls -eq $tcomplete ]] || { echo "FAIL: $calls printed calls, $tcomplete counted"; ok=0; }
[[ $ok -eq 1 ]] && echo "PASS" && exit 0
exit 1
