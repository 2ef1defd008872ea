#!/usr/bin/env bash
# test_doc_narration: the docs, tools, benchmarks, tests, samples, bindings, the sources (src/, include/,
# cuda/, vulkan/: their comments) and every README speak of the product and its measurements, not of how
# the work was organised: no tracker numbers, no account of who did what or when, no numbered rounds of
# work. The patterns (below) are narrow enough to leave the product's own vocabulary alone: its sessions,
# forks and worker threads.
# Recorded outputs (docs/gpu-runs/*/run*/) are left as they came.
# usage: doc_narration.sh SOURCE_DIR
set -euo pipefail
cd "$1"
pattern='issues? #?[0-9]+|the issue.s\b|\blease[sd]?\b|this session.s (run|window|start|builds?|changes?)\b|(earlier|previous|seventh|eighth|ninth|tenth) sessions?\b|sessions. builds|\bhelpers?'"'"'? (build|fix|wrote|ran)|(second|third|fourth|fifth|sixth|margin) pass\b|/work/notes'
hits=$(grep -rniIE "$pattern" docs tools bench tests samples bindings src include cuda vulkan README.md abi/README.md \
         --exclude-dir='run[0-9]*' --exclude-dir=target --exclude-dir=node_modules --exclude=doc_narration.sh 2>/dev/null || true)
if [ -n "$hits" ]; then
  echo "FAIL: narration of how the project was made (say what the code does and why instead):"
  printf '%s\n' "$hits"
  exit 1
fi
echo "doc_narration: no tracker numbers or work history in docs/, tools/, bench/, tests/, samples/, bindings/, src/, include/, cuda/, vulkan/, READMEs"
