#!/usr/bin/env node
// peer_parallel.mjs — llama.cpp (node-llama-cpp's prebuilt CPU binary) decoding N sequences at once in
// one context, for comparison with `ember bench --parallel N`. node-llama-cpp batches the concurrent
// evaluations of a context's sequences into shared decode calls.
//
// usage: NODE_PATH=<dir with node_modules of ../shared/peer> node bench/peer_parallel.mjs \
//          --model M --threads T --parallel N --prompt-tokens P --gen-tokens G
// Prints one JSON line: decode_tok_s_total (N*G over the time from the last first token to the end),
// mean_ttft_s, wall_s. Prompts: BOS + a different first word per sequence + a fixed English text.
import path from "node:path";
import process from "node:process";
import { createRequire } from "node:module";

process.env.NODE_LLAMA_CPP_SKIP_DOWNLOAD = "true";
const args = { threads: 2, parallel: 4, promptTokens: 64, genTokens: 32, model: null, peer: "../shared/peer" };
for (let i = 2; i < process.argv.length; i += 2) {
    const k = process.argv[i], v = process.argv[i + 1];
    if (k === "--model") args.model = v;
    else if (k === "--threads") args.threads = +v;
    else if (k === "--parallel") args.parallel = +v;
    else if (k === "--prompt-tokens") args.promptTokens = +v;
    else if (k === "--gen-tokens") args.genTokens = +v;
    else if (k === "--peer") args.peer = v;
    else throw new Error(`unknown argument ${k}`);
}
const require = createRequire(path.resolve(args.peer, "package.json"));
const { getLlama } = await import(require.resolve("node-llama-cpp"));
const now = () => Number(process.hrtime.bigint()) / 1e9;

const llama = await getLlama({ gpu: false, build: "never", skipDownload: true, usePrebuiltBinaries: true,
                               existingPrebuiltBinaryMustMatchBuildOptions: false, progressLogs: false,
                               maxThreads: args.threads });
const t0 = now();
const model = await llama.loadModel({ modelPath: path.resolve(args.model), gpuLayers: 0 });
const N = args.parallel, P = args.promptTokens, G = args.genTokens;
const context = await model.createContext({ contextSize: N * Math.ceil((P + G + 8) / 256) * 256, sequences: N,
                                            threads: { ideal: args.threads, min: args.threads }, batchSize: 512 });
const loadS = now() - t0;
const body = model.tokenize("The quick brown fox jumps over the lazy dog. In the beginning the model was small and the " +
    "weights were random, but every layer still had to be read from memory for each new token. ");
const prompts = [];
for (let i = 0; i < N; i++) {
    const p = model.tokens.bos != null ? [model.tokens.bos] : [];
    p.push(body[i % body.length]);
    while (p.length < P) p.push(...body);
    prompts.push(p.slice(0, P));
}
const start = now();
const first = new Array(N).fill(0);
let generated = 0;
await Promise.all(prompts.map(async (tokens, i) => {
    const seq = context.getSequence();
    let n = 0;
    for await (const tok of seq.evaluate(tokens, { temperature: 0, yieldEogToken: true })) {
        if (n === 0) first[i] = now();
        if (++n >= G) break;
    }
    generated += n;
}));
const end = now();
const lastFirst = Math.max(...first);
process.stdout.write(JSON.stringify({
    peer: "llama.cpp", node_llama_cpp: "3.22.1", model: path.resolve(args.model), threads: args.threads, parallel: N,
    prompt_tokens: P, gen_tokens: G, generated_total: generated,
    decode_tok_s_total: Math.round((generated - N) / (end - lastFirst) * 100) / 100,
    mean_ttft_s: Math.round(first.reduce((a, f) => a + (f - start), 0) / N * 1e4) / 1e4,
    wall_s: Math.round((end - start) * 1e3) / 1e3, load_s: Math.round(loadS * 1e3) / 1e3
}) + "\n");
await context.dispose();
await model.dispose();
await llama.dispose();
