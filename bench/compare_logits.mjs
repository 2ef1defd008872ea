#!/usr/bin/env node
// compare_logits.mjs — Ember's and llama.cpp's full-vocabulary logits, both against the fp64 reference,
// for every model family x weight type, on synthetic models (ember-synth --family F --type T: random
// weights, decisive logits). llama.cpp runs through node-llama-cpp in ../shared/peer (its prebuilt CPU
// binary, never downloaded or compiled), Ember and the reference through build/bench/ember-family-logits.
//
// Usage (from the repository root, after building ember_synth and ember_family_logits):
//   node bench/compare_logits.mjs [--build build] [--peer ../shared/peer] [--families a,b] [--types t,u]
//                                 [--threads 2] [--precision default|high] [--markdown]
//   node bench/compare_logits.mjs --table RESULTS.jsonl     (the markdown table of rows printed before)
//   node bench/compare_logits.mjs --reference-only [--families qwen35,qwen35moe,qwen3next] [--types f32,q8_0]
//                                 (llama.cpp against the fp64 reference alone, Ember not run: a family
//                                 Ember does not run yet, or a check of the reference itself)
//
// Without --markdown it prints one JSON line per model as it goes (keep them: a long run can be resumed
// family by family and the table made from the lines).
//
// Per model, teacher-forced on the same 12 tokens (the reference logits at every position):
//   rel_err   sqrt(sum (l - ref)^2 / sum ref^2) over every position and every token of the vocabulary;
//             Ember's from its prefill (all positions' logits from one batch, as llama.cpp computes
//             them here) and from its decode (one token per step);
//   argmax    positions whose argmax equals the reference's;
//   greedy    whether 32 greedy tokens after the prompt are the same in both (llama.cpp's are printed
//             as peer_greedy).
// The bar each row must meet (docs/model-families.md): Ember's rel_err <= llama.cpp's x 1.1 + 0.002 and its argmax agreement >= llama.cpp's.
//
// --reference-only: llama.cpp's 32 greedy tokens after the 12, then its logits teacher-forced on all 44
// (one batch) against the reference's on the same 44: rel_err and argmax agreement over all 44
// positions, and greedy_same: whether the reference's argmax after each prefix is llama.cpp's next
// greedy token (the reference would have generated the same 32).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import process from "node:process";
import { execFileSync } from "node:child_process";

process.env.NODE_LLAMA_CPP_SKIP_DOWNLOAD = "true";
process.env.NODE_LLAMA_CPP_POSTINSTALL ??= "skip";

const args = { build: "build", peer: "../shared/peer", families: null, types: null, threads: 2, precision: "default", markdown: false, table: null, referenceOnly: false };
for (let i = 2; i < process.argv.length; i++) {
    const k = process.argv[i], v = () => process.argv[++i];
    if (k === "--build") args.build = v();
    else if (k === "--peer") args.peer = v();
    else if (k === "--families") args.families = v().split(",");
    else if (k === "--types") args.types = v().split(",");
    else if (k === "--threads") args.threads = parseInt(v(), 10);
    else if (k === "--precision") args.precision = v();   // Ember's ember_precision (its session's setting)
    else if (k === "--markdown") args.markdown = true;
    else if (k === "--table") args.table = v();
    else if (k === "--reference-only") args.referenceOnly = true;
    else throw new Error(`unknown argument ${k}`);
}
const hybrids = ["qwen35", "qwen35moe", "qwen3next"];
const families = args.families ?? (args.referenceOnly ? hybrids
    : ["llama", "mixtral", "qwen2", "qwen3", "qwen3moe", "gemma2", "gemma3", "phi3", "granite", "olmo2", "gpt-oss", ...hybrids,
       "olmo3-yarn", "qwen3-yarn", "smollm3", "mistral3", "lfm2", "lfm2moe", "granitehybrid"]);
const types = args.types ?? ["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k"];
const synth = path.join(args.build, "bench", "ember-synth");
const logitsTool = path.join(args.build, "bench", "ember-family-logits");
const tokens = [1, 7, 3, 12, 40, 5, 9, 22, 31, 2, 17, 60];
const GREEDY = 32;

const { getLlama, LlamaLogLevel } = await import(path.resolve(args.peer, "node_modules", "node-llama-cpp", "dist", "index.js"));
const llama = await getLlama({
    gpu: false, build: "never", skipDownload: true, usePrebuiltBinaries: true,
    existingPrebuiltBinaryMustMatchBuildOptions: false, progressLogs: false, maxThreads: args.threads,
    logLevel: LlamaLogLevel.error
});

// llama.cpp: every position's logits from one batch (teacher-forced on `forced`, the prompt by default),
// and a greedy continuation of the prompt.
async function peerLogits(modelPath, nv, forced = tokens) {
    const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
    try {
        const context = await model.createContext({ contextSize: 256, batchSize: 64, threads: { ideal: args.threads, min: args.threads }, sequences: 1 });
        const seq = context.getSequence();
        const items = forced.map((t) => [t, { generateNext: { logits: true } }]);
        const res = await seq.controlledEvaluate(items);
        const rows = res.map((r) => {
            const row = new Float64Array(nv).fill(-Infinity);
            for (const [tok, l] of r.next.logits) row[tok] = l;
            return row;
        });
        await seq.clearHistory();
        const greedy = [];
        const gen = seq.evaluate(tokens, { temperature: 0, yieldEogToken: true });
        for (let i = 0; i < GREEDY; i++) {
            const n = await gen.next();
            if (n.done) break;
            greedy.push(n.value);
        }
        await gen.return();
        await context.dispose();
        return { rows, greedy };
    } finally {
        await model.dispose();
    }
}

function metrics(rows, ref) {
    let num = 0, den = 0, agree = 0;
    for (let p = 0; p < ref.length; p++) {
        let best = 0, ours = 0;
        for (let i = 0; i < ref[p].length; i++) {
            const d = rows[p][i] - ref[p][i];
            num += d * d, den += ref[p][i] * ref[p][i];
            if (ref[p][i] > ref[p][best]) best = i;
            if (rows[p][i] > rows[p][ours]) ours = i;
        }
        agree += best === ours;
    }
    return { rel: Math.sqrt(num / den), agree };
}

// The results as a markdown table, with the totals.
function printTable(results) {
    const n = tokens.length, f = (x) => x.toExponential(2);
    if (results.every((r) => r.positions || r.error)) {   // --reference-only rows
        console.log("| family | type | positions | llama.cpp rel err vs fp64 | argmax same | fp64 greedy = llama.cpp greedy (32) |");
        console.log("|---|---|---|---|---|---|");
        for (const r of results)
            console.log(r.error ? `| ${r.family} | ${r.type} | error: ${r.error} | | | |`
                : `| ${r.family} | ${r.type} | ${r.positions} | ${f(r.peer.rel)} | ${r.peer.agree}/${r.positions} | ${r.greedy_same ? "yes" : "no"} |`);
        return;
    }
    console.log("| family | type | Ember prefill rel err | Ember decode rel err | llama.cpp rel err | argmax Ember (prefill/decode) | argmax llama.cpp | bar met | greedy 32 same |");
    console.log("|---|---|---|---|---|---|---|---|---|");
    for (const r of results) {
        if (r.error) { console.log(`| ${r.family} | ${r.type} | error: ${r.error} | | | | | | |`); continue; }
        const peer = r.peer ? f(r.peer.rel) : `not run: ${r.peer_error}`;
        const bar = r.peer ? (Math.max(r.ember_prefill.rel, r.ember_decode.rel) <= r.peer.rel * 1.1 + 0.002 &&
            Math.min(r.ember_prefill.agree, r.ember_decode.agree) >= r.peer.agree ? "yes" : "no") : "-";
        console.log(`| ${r.family} | ${r.type} | ${f(r.ember_prefill.rel)} | ${f(r.ember_decode.rel)} | ${peer} | ` +
            `${r.ember_prefill.agree}/${n}, ${r.ember_decode.agree}/${n} | ${r.peer ? `${r.peer.agree}/${n}` : "-"} | ${bar} | ` +
            `${r.greedy_same === undefined ? "" : r.greedy_same ? "yes" : "no"} |`);
    }
    const done = results.filter((r) => r.peer);
    const sum = (f) => done.reduce((a, r) => a + f(r), 0);
    const met = done.filter((r) => Math.max(r.ember_prefill.rel, r.ember_decode.rel) <= r.peer.rel * 1.1 + 0.002 &&
        Math.min(r.ember_prefill.agree, r.ember_decode.agree) >= r.peer.agree).length;
    console.log(`\n${done.length} models compared: the bar met in ${met}; argmax agreement over all positions: Ember ` +
        `${sum((r) => r.ember_prefill.agree)} (prefill), ${sum((r) => r.ember_decode.agree)} (decode), llama.cpp ` +
        `${sum((r) => r.peer.agree)} of ${done.length * tokens.length}; greedy 32 tokens the same in ` +
        `${results.filter((r) => r.greedy_same).length} of ${results.filter((r) => r.greedy_same !== undefined).length}.`);
}

if (args.table) {
    printTable(fs.readFileSync(args.table, "utf8").split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l)));
    process.exit(0);
}

// The reference alone against llama.cpp, over the prompt and llama.cpp's greedy continuation.
function referenceOnlyRow(file, row) {
    const refOf = (toks) => JSON.parse(execFileSync(logitsTool, [file, toks.join(","), "--reference-only", "1"],
        { maxBuffer: 1 << 28, encoding: "utf8" })).ref;
    const nv = refOf(tokens.slice(0, 1))[0].length;
    return peerLogits(file, nv).then(async (first) => {
        const all = tokens.concat(first.greedy);
        const peer = await peerLogits(file, nv, all);
        const ref = refOf(all);
        row.peer = metrics(peer.rows, ref);
        row.positions = all.length;
        let same = true;
        for (let p = tokens.length - 1; p + 1 < all.length; p++) {
            let best = 0;
            for (let i = 0; i < nv; i++) if (ref[p][i] > ref[p][best]) best = i;
            same &&= best === all[p + 1];
        }
        row.greedy_same = same && first.greedy.length === GREEDY;
    });
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ember-logits-"));
const results = [];
for (const family of families) {
    for (const type of types) {
        const file = path.join(dir, `${family}-${type}.gguf`);
        const row = { family, type, precision: args.precision };
        try {
            execFileSync(synth, ["-o", file, "--family", family, "--type", type], { stdio: ["ignore", "ignore", "pipe"] });
            if (args.referenceOnly) {
                await referenceOnlyRow(file, row);
                results.push(row);
                if (!args.markdown) process.stdout.write(JSON.stringify(row) + "\n");
                continue;
            }
            const ember = JSON.parse(execFileSync(logitsTool, [file, tokens.join(","), "--greedy", String(GREEDY), "--threads", String(args.threads), "--precision", args.precision],
                { maxBuffer: 1 << 28, encoding: "utf8" }));
            const nv = ember.ref[0].length;
            Object.assign(row, { ember_prefill: metrics(ember.prefill, ember.ref), ember_decode: metrics(ember.decode, ember.ref) });
            try {
                const peer = await peerLogits(file, nv);
                row.peer = metrics(peer.rows, ember.ref);
                row.greedy_same = JSON.stringify(peer.greedy) === JSON.stringify(ember.greedy);
                row.peer_greedy = peer.greedy;   // what tests pin (test_forward's llama.cpp continuations)
            } catch (e) {
                row.peer_error = String(e.message ?? e).split("\n")[0];
            }
        } catch (e) {
            row.error = String(e.stderr ?? e.message ?? e).split("\n")[0];
        } finally {
            fs.rmSync(file, { force: true });
        }
        results.push(row);
        if (!args.markdown) process.stdout.write(JSON.stringify(row) + "\n");
    }
}
fs.rmSync(dir, { recursive: true, force: true });

if (args.markdown) printTable(results);
process.exit(0);
