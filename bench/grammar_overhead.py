#!/usr/bin/env python3
"""The grammar's cost per token as a share of a decode step, for several grammars and sampler settings,
as medians over alternating rounds (docs/benchmarks.md, "Structured output").

Each round runs `ember bench --grammar G | --json-schema S` once per (grammar, setting), in turn, so a
change of load hits every configuration alike; each run reports the first generation (every grammar
state new) and the warm ones (caches filled). With several builds (--ember A --ember B), each round runs
them one after the other for every configuration: before/after figures from the same window.

usage: bench/grammar_overhead.py -m MODEL [--ember PATH]... [--rounds 5] [--threads 2] [-n 64] [--bench-rounds 4]
         [--grammar-vocab VOCAB.gguf] [--setting "--temp 1 --top-k 40"]... GRAMMAR_OR_SCHEMA...
(run it under `chrt -f 50` on a shared machine; prints one markdown row per build, grammar and setting)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--ember", action="append", help="ember binaries to compare (default build/tools/ember/ember)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("--bench-rounds", type=int, default=4, help="generations per run: the first, then warm ones")
    ap.add_argument("--grammar-vocab")
    ap.add_argument("--setting", action="append", help='sampler flags, e.g. "--temp 1 --top-k 40" (default: greedy)')
    ap.add_argument("grammars", nargs="+")
    a = ap.parse_args()
    embers = a.ember or ["build/tools/ember/ember"]
    settings = a.setting or ["--temp 0"]
    results = {}
    for _ in range(a.rounds):
        for g in a.grammars:
            kind = "--json-schema" if g.endswith(".json") else "--grammar"
            for s in settings:
                for e in embers:
                    cmd = [e, "bench", "-m", a.model, "-t", str(a.threads), "-n", str(a.n), "--rounds", str(a.bench_rounds), kind, g] + s.split()
                    if a.grammar_vocab:
                        cmd += ["--grammar-vocab", a.grammar_vocab]
                    out = subprocess.run(cmd, capture_output=True, text=True)
                    if out.returncode != 0:
                        sys.exit(f"{' '.join(cmd)}: {out.stderr.strip()}")
                    r = json.loads(out.stdout.strip().splitlines()[-1])
                    results.setdefault((e, g, s), []).append(r)
    print("| build | grammar | setting | decode step | sample | grammar, first | % | grammar, warm | % |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for (e, g, s), rs in results.items():
        med = lambda key: statistics.median(r.get(key, float("nan")) for r in rs)
        print(f"| {e} | {os.path.basename(g)} | {s} | {med('decode_step_ms'):.3f} ms | {med('sample_ms'):.4f} ms | "
              f"{med('grammar_ms_first'):.4f} ms | {med('overhead_pct_first'):.1f} | {med('grammar_ms_warm'):.4f} ms | "
              f"{med('overhead_pct_warm'):.1f} |")


if __name__ == "__main__":
    main()
