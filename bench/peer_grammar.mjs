#!/usr/bin/env node
// peer_grammar.mjs — llama.cpp (node-llama-cpp's prebuilt CPU binary) generating greedily under a GBNF
// grammar, for comparing Ember's constrained output and grammar cost with the peer's.
//
// usage: node bench/peer_grammar.mjs --model MODEL.gguf [--peer ../shared/peer] [--threads 2]
//            [--prompt TEXT] [--max N] [--timing] GRAMMAR.gbnf|SCHEMA.json...
// Prints one JSON line per grammar: the generated text and token ids (BOS + prompt, greedy, until an
// end-of-generation token or N tokens); a .json file is a JSON Schema, given to node-llama-cpp's own
// converter (createGrammarForJsonSchema: its grammar differs from Ember's in layout). With --timing, also the time per token with the grammar and
// without it on the same prompt and token count: llama.cpp's grammar cost per token.
import fs from "node:fs";
import path from "node:path";
import process from "node:process";
import { createRequire } from "node:module";

const args = { threads: 2, prompt: "Once upon a time", max: 64, timing: false, model: null, peer: "../shared/peer", grammars: [] };
for (let i = 2; i < process.argv.length; i++) {
    const k = process.argv[i], v = () => process.argv[++i];
    if (k === "--model") args.model = v();
    else if (k === "--peer") args.peer = v();
    else if (k === "--threads") args.threads = parseInt(v(), 10);
    else if (k === "--prompt") args.prompt = v();
    else if (k === "--max") args.max = parseInt(v(), 10);
    else if (k === "--timing") args.timing = true;
    else args.grammars.push(k);
}
if (!args.model || args.grammars.length === 0) throw new Error("usage: peer_grammar.mjs --model MODEL GRAMMAR.gbnf...");
process.env.NODE_LLAMA_CPP_SKIP_DOWNLOAD = "true";
const require = createRequire(path.resolve(args.peer, "package.json"));
const { getLlama, LlamaGrammarEvaluationState } = await import(require.resolve("node-llama-cpp"));
const now = () => Number(process.hrtime.bigint()) / 1e9;

const llama = await getLlama({ gpu: false, build: "never", skipDownload: true, usePrebuiltBinaries: true,
                               existingPrebuiltBinaryMustMatchBuildOptions: false, progressLogs: false,
                               maxThreads: args.threads });
const model = await llama.loadModel({ modelPath: path.resolve(args.model), gpuLayers: 0 });
const context = await model.createContext({ contextSize: 512, threads: { ideal: args.threads, min: args.threads } });
const prompt = [model.tokens.bos, ...model.tokenize(args.prompt)];

// Greedy generation from the prompt; with a grammar, constrained by it. Returns tokens and seconds.
async function generate(grammar, limit) {
    const seq = context.getSequence();
    const out = [];
    const opts = { temperature: 0, yieldEogToken: true };
    if (grammar) opts.grammarEvaluationState = new LlamaGrammarEvaluationState({ model, grammar });
    let start = 0;
    for await (const tok of seq.evaluate(prompt, opts)) {
        if (out.length === 0) start = now();   // decode steps only: the prompt's evaluation is not timed
        if (model.isEogToken(tok)) break;
        out.push(tok);
        if (out.length >= limit) break;
    }
    const s = now() - start;
    seq.dispose();
    return { tokens: out, seconds: s };
}

for (const file of args.grammars) {
    const text = fs.readFileSync(file, "utf8");
    const grammar = file.endsWith(".json") ? await llama.createGrammarForJsonSchema(JSON.parse(text))
                                           : await llama.createGrammar({ grammar: text });
    const g = await generate(grammar, args.max);
    const line = { peer: "llama.cpp", node_llama_cpp: "3.22.1", grammar: file, text: model.detokenize(g.tokens), tokens: g.tokens };
    if (args.timing && g.tokens.length > 1) {
        const rounds = 3, withG = [], without = [];
        for (let r = 0; r < rounds; r++) {
            withG.push((await generate(grammar, g.tokens.length)).seconds / (g.tokens.length - 1));
            without.push((await generate(null, g.tokens.length)).seconds / (g.tokens.length - 1));
        }
        const med = (v) => v.sort((a, b) => a - b)[Math.floor(v.length / 2)];
        line.ms_per_token_grammar = Math.round(med(withG) * 1e6) / 1e3;
        line.ms_per_token_plain = Math.round(med(without) * 1e6) / 1e3;
        line.overhead_pct = Math.round((med(withG) / med(without) - 1) * 1e4) / 100;
    }
    process.stdout.write(JSON.stringify(line) + "\n");
}
await context.dispose();
await model.dispose();
