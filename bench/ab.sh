#!/usr/bin/env bash
# A/B of two builds of ember (e.g. before and after a change) on one model, in one window: ROUNDS
# alternating runs of each `ember bench`, then the medians of prefill and decode tok/s and the ratio
# new/old. The machine is shared: only the ratio, taken in the same window, means anything.
#
# usage: bench/ab.sh OLD_BUILD NEW_BUILD MODEL [THREADS=2] [PROMPT_TOKENS=128] [GEN_TOKENS=64] [ROUNDS=5]
# OLD_BUILD and NEW_BUILD are build folders; each one's tools/ember/ember runs with its own libember and
# backend modules (LD_LIBRARY_PATH and EMBER_BACKEND_DIR: a copied build's RUNPATH still names the folder
# it was built in).
set -euo pipefail
old=${1:?usage: bench/ab.sh OLD_BUILD NEW_BUILD MODEL [THREADS] [P] [N] [ROUNDS]}
new=${2:?}; model=${3:?}; threads=${4:-2}; p=${5:-128}; n=${6:-64}; rounds=${7:-5}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((i = 1; i <= rounds; i++)); do
  for which in old new; do
    dir=$old; [ "$which" = new ] && dir=$new
    dir=$(cd "$dir" && pwd)
    line=$(LD_LIBRARY_PATH="$dir" EMBER_BACKEND_DIR="$dir" "$dir/tools/ember/ember" bench -m "$model" -t "$threads" \
             -p "$p" -n "$n" 2>/dev/null | tail -1)
    pf=$(sed -E 's/.*"prefill_tok_s":([0-9.]+).*/\1/' <<<"$line")
    dc=$(sed -E 's/.*"decode_tok_s":([0-9.]+).*/\1/' <<<"$line")
    echo "$which $pf $dc" >>"$out"
  done
done
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
for which in old new; do
  printf '%s prefill %s decode %s\n' "$which" \
    "$(awk -v w=$which '$1==w {print $2}' "$out" | median)" "$(awk -v w=$which '$1==w {print $3}' "$out" | median)"
done | awk -v model="$(basename "$model")" -v r="$rounds" '
  {name[NR]=$1; pf[NR]=$3; dc[NR]=$5; print "  " $0}
  END {printf "%s (%d rounds): new/old prefill %.3f, decode %.3f\n", model, r, pf[2]/pf[1], dc[2]/dc[1]}'
