#!/usr/bin/env node
// llamacpp_bench.mjs — llama.cpp (node-llama-cpp's prebuilt CPU binary) measured the way `ember bench`
// measures ember, for bench/compare_llamacpp.sh: the prompt is BOS + the same fixed English text,
// tokenized, repeated and cut to P tokens; one warm-up run (the prompt and one token) first; prefill = the
// P-token prompt evaluated and the first token sampled; decode = G more tokens, greedy, one at a time.
//
// usage: node bench/llamacpp_bench.mjs --peer DIR --model M [--threads T] [--prompt-tokens P] [--gen-tokens G]
// DIR holds node_modules with node-llama-cpp (compare_llamacpp.sh installs it). Prints one JSON line.
import path from "node:path";
import process from "node:process";
import { createRequire } from "node:module";

process.env.NODE_LLAMA_CPP_SKIP_DOWNLOAD = "true";
const args = { threads: 2, promptTokens: 128, genTokens: 64, model: null, peer: null };
for (let i = 2; i < process.argv.length; i += 2) {
    const k = process.argv[i], v = process.argv[i + 1];
    if (k === "--model") args.model = v;
    else if (k === "--threads") args.threads = +v;
    else if (k === "--prompt-tokens") args.promptTokens = +v;
    else if (k === "--gen-tokens") args.genTokens = +v;
    else if (k === "--peer") args.peer = v;
    else throw new Error(`unknown argument ${k}`);
}
if (!args.model || !args.peer) throw new Error("--model and --peer are required");
const require = createRequire(path.resolve(args.peer, "package.json"));
const { getLlama } = await import(require.resolve("node-llama-cpp"));
const now = () => Number(process.hrtime.bigint()) / 1e9;

const t0 = now();
const llama = await getLlama({ gpu: false, build: "never", skipDownload: true, usePrebuiltBinaries: true,
                               existingPrebuiltBinaryMustMatchBuildOptions: false, progressLogs: false,
                               maxThreads: args.threads });
const model = await llama.loadModel({ modelPath: path.resolve(args.model), gpuLayers: 0 });
const P = args.promptTokens, G = args.genTokens;
const context = await model.createContext({ contextSize: Math.ceil((P + G + 8) / 256) * 256, sequences: 1,
                                            threads: { ideal: args.threads, min: args.threads }, batchSize: 512 });
const loadS = now() - t0;
const body = model.tokenize("The quick brown fox jumps over the lazy dog. In the beginning the model was small and the " +
    "weights were random, but every layer still had to be read from memory for each new token. ");
const prompt = model.tokens.bos != null ? [model.tokens.bos] : [];
while (prompt.length < P) prompt.push(...body);
prompt.length = P;

const seq = context.getSequence();
let prefillS = 0, decodeS = 0, first = -1, tokens = [];
for (let run = 0; run < 2; run++) {  // run 0 warms up, run 1 is measured
    await seq.clearHistory();
    const steps = run === 0 ? 1 : G;
    const start = now();
    let tFirst = 0, n = 0;
    tokens = [];
    for await (const tok of seq.evaluate(prompt, { temperature: 0, yieldEogToken: true })) {
        if (n === 0) tFirst = now(), first = tok;
        else tokens.push(tok);
        if (n++ >= steps) break;
    }
    prefillS = tFirst - start;
    decodeS = now() - tFirst;
}
const r2 = (x) => Math.round(x * 100) / 100;
process.stdout.write(JSON.stringify({
    runtime: "llama.cpp", node_llama_cpp: "3.22.1", model: path.resolve(args.model), threads: args.threads,
    prompt_tokens: P, gen_tokens: G, prefill_tok_s: r2(P / prefillS), decode_tok_s: r2(G / decodeS),
    load_s: Math.round(loadS * 1e3) / 1e3, peak_rss_mb: r2(process.resourceUsage().maxRSS / 1024),
    first_token: first, decode_tokens: tokens
}) + "\n");
await context.dispose();
await model.dispose();
await llama.dispose();
