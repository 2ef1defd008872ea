#!/usr/bin/env python3
"""Writes docs/benchmarks.md's summary tables from the recorded results in bench/results/.

Each results file is JSON lines: one line per runtime and setting, with the fields `ember bench` and the
peer scripts print (runtime, model, threads, prompt_tokens, gen_tokens, prefill_tok_s, decode_tok_s)
plus where they come from: class (the device class: which table), date, window (UTC), machine (an id
from machines.jsonl), build (Ember's commit or version), rounds (medians of that many alternating
rounds), command, and optionally parallel, note, read_bw_gb_s with bytes_per_token_mb (decode's share
of the machine's measured read bandwidth). An Ember line and a llama.cpp line with the same class,
machine, date, window, model and token counts make one row.

The document holds each table between `<!-- bench-table CLASS -->` and `<!-- /bench-table -->`
(`machines` for the machines' table). Usage:
  tools/bench_tables.py [--check | --write] [DOC]   (default DOC: docs/benchmarks.md; default --check)
--check exits 1 and prints the first difference when the document's tables are not the script's output.
"""
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
BEGIN = re.compile(r"^<!-- bench-table ([a-z0-9-]+) -->$")
END = "<!-- /bench-table -->"


def load(name):
    rows = []
    for path in sorted(RESULTS.glob("*.jsonl")):
        if (path.name == "machines.jsonl") != (name == "machines"):
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    sys.exit(f"{path}:{n}: {e}")
    return rows


def num(x):
    """A figure as it was recorded (no digits added or dropped)."""
    return "—" if x is None else f"{x:g}"


def ratio(a, b):
    if a is None or b is None or b <= 0:
        return "—"
    return f"**{a / b:.0f}×**" if a / b >= 10 else f"**{a / b:.2f}×**"


def key(r):
    return (r["machine"], r["date"], r.get("window", ""), r["model"], r["threads"], r["prompt_tokens"],
            r["gen_tokens"], r.get("parallel", 1))


def machines_table():
    out = ["| machine | what it is |", "|---|---|"]
    for m in load("machines"):
        out.append(f"| `{m['machine']}` | {m['description']} |")
    return out


def class_table(cls):
    records = [r for r in load("results") if r["class"] == cls]
    if not records:
        sys.exit(f"no results of class {cls} in {RESULTS}")
    rows = {}
    for r in records:
        slot = rows.setdefault(key(r), {})
        if r["runtime"] in slot:
            sys.exit(f"two {r['runtime']} results for one row: {key(r)}")
        slot[r["runtime"]] = r
    with_bw = any("read_bw_gb_s" in r for r in records)
    head = ["model", "P / G / threads", "Ember prefill tok/s", "llama.cpp", "ratio",
            "Ember decode tok/s", "llama.cpp", "ratio"]
    if with_bw:
        head.append("decode / read bw")
    head += ["date (UTC)", "machine", "build", "run"]
    out = ["| " + " | ".join(head) + " |", "|" + "|".join(["---", "---"] + ["---:"] * (len(head) - 6)
                                                       + ["---", "---", "---", "---"]) + "|"]
    runs = []
    for k, slot in rows.items():
        e, p = slot.get("ember"), slot.get("llama.cpp")
        if e is None:
            sys.exit(f"a llama.cpp result without Ember's beside it: {k}")
        threads = e["threads"] or "device"
        par = f", {e['parallel']} seq." if e.get("parallel", 1) > 1 else ""
        cells = [e["model"], f"{e['prompt_tokens']} / {e['gen_tokens']} / {threads}{par}",
                 num(e.get("prefill_tok_s")), num(p and p.get("prefill_tok_s")),
                 ratio(e.get("prefill_tok_s"), p and p.get("prefill_tok_s")),
                 num(e.get("decode_tok_s")), num(p and p.get("decode_tok_s")),
                 ratio(e.get("decode_tok_s"), p and p.get("decode_tok_s"))]
        if with_bw:
            if "read_bw_gb_s" in e and e.get("decode_tok_s"):
                share = e["decode_tok_s"] * e["bytes_per_token_mb"] / 1000 / e["read_bw_gb_s"]
                cells.append(f"{share * 100:.0f} % of {e['read_bw_gb_s']:.1f} GB/s")
            else:
                cells.append("—")
        when = e["date"] + (f" {e['window']}" if e.get("window") else "")
        runs.append((e, p))
        cells += [when, f"`{e['machine']}`", e.get("build", "—"), f"[{len(runs)}](#{cls}-runs)"]
        out.append("| " + " | ".join(str(c) for c in cells) + " |")
    out += ["", f"<a id=\"{cls}-runs\"></a>Runs (medians of the rounds given; Ember and llama.cpp alternating):", ""]
    for n, (e, p) in enumerate(runs, 1):
        item = f"{n}. {e['rounds']} round{'s' if e['rounds'] != 1 else ''}: `{e['command']}`"
        if p is not None and p["command"] != e["command"]:
            item += f"; llama.cpp: `{p['command']}`"
        if e.get("note"):
            item += f". {e['note']}"
        out.append(item + ".")
    return out


def render(doc):
    lines, out, i = doc.splitlines(), [], 0
    while i < len(lines):
        out.append(lines[i])
        m = BEGIN.match(lines[i])
        if m:
            j = i + 1
            while j < len(lines) and lines[j] != END:
                j += 1
            if j == len(lines):
                sys.exit(f"line {i + 1}: {lines[i]} has no {END}")
            out += machines_table() if m.group(1) == "machines" else class_table(m.group(1))
            i = j
            out.append(END)
        i += 1
    return "\n".join(out) + "\n"


def main(argv):
    mode = "--check"
    doc = ROOT / "docs" / "benchmarks.md"
    for a in argv:
        if a in ("--check", "--write"):
            mode = a
        else:
            doc = pathlib.Path(a)
    text = doc.read_text()
    new = render(text)
    if mode == "--write":
        if new != text:
            doc.write_text(new)
        return 0
    if new != text:
        old_lines, new_lines = text.splitlines(), new.splitlines()
        for n, (a, b) in enumerate(zip(old_lines, new_lines), 1):
            if a != b:
                print(f"{doc}:{n}: the table differs from bench/results/ (run tools/bench_tables.py --write)")
                print(f"  doc:    {a}\n  script: {b}")
                break
        else:
            print(f"{doc}: {len(old_lines)} lines, the script gives {len(new_lines)} (run tools/bench_tables.py --write)")
        return 1
    print(f"bench_tables: the tables of {doc.name} match bench/results/")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
