#!/usr/bin/env node
// peer_cuda.mjs - llama.cpp reference numbers on an NVIDIA GPU, through node-llama-cpp's prebuilt
// CUDA binaries (@node-llama-cpp/linux-x64-cuda). CPU-only runs (--gpu false) are supported for
// checking the packaging on a machine without a GPU.
//
// Usage:
//   node bench/peer_cuda.mjs --model PATH [--prompt-tokens P] [--gen-tokens G] [--sequences N]
//                            [--gpu cuda|false] [--threads T] [--batch B] [--flash-attn auto|on|off]
//                            [--no-warmup] [--verbose]
//
//   node-llama-cpp is imported from $NODE_LLAMA_CPP_DIR (the package folder) when set, else by the
//   normal module resolution.
//
// Measurement (greedy, no speculative decoding, EOG does not stop generation):
//   N context sequences of one context, each with its own P-token prompt, evaluated concurrently so
//   node-llama-cpp puts them into the same llama_decode batches.
//   prefill_tok_s : N*P / wall time until every sequence has sampled its first token
//   decode_tok_s  : N*G / wall time of the G following decode steps of all sequences (aggregate)
//   load_s        : loadModel() + createContext(); init_s: getLlama() (binary load + backend init)
// A warm-up pass (prompt + 1 token on every sequence, then the history is cleared) runs first so
// CUDA module loading, cuBLAS handle creation and first-touch costs are not measured.
// --gpu cuda never falls back to the CPU: if the CUDA build cannot be loaded or sees no device it
// exits non-zero. Prints one JSON line on stdout.

import fs from "node:fs";
import path from "node:path";
import process from "node:process";
import { pathToFileURL } from "node:url";

process.env.NODE_LLAMA_CPP_SKIP_DOWNLOAD = "true";   // never download or build llama.cpp
process.env.NODE_LLAMA_CPP_POSTINSTALL ??= "skip";

const opts = {
    model: null, promptTokens: 512, genTokens: 128, sequences: 1, gpu: "cuda", threads: 0, batch: 0,
    flashAttn: "auto", warmup: true, verbose: false
};
{
    const argv = process.argv.slice(2);
    const next = (i) => {
        if (i + 1 >= argv.length) throw new Error(`missing value for ${argv[i]}`);
        return argv[i + 1];
    };
    for (let i = 0; i < argv.length; i++) {
        const k = argv[i];
        if (k === "--model") opts.model = next(i++);
        else if (k === "--prompt-tokens") opts.promptTokens = +next(i++);
        else if (k === "--gen-tokens") opts.genTokens = +next(i++);
        else if (k === "--sequences") opts.sequences = +next(i++);
        else if (k === "--gpu") opts.gpu = next(i++);
        else if (k === "--threads") opts.threads = +next(i++);
        else if (k === "--batch") opts.batch = +next(i++);
        else if (k === "--flash-attn") opts.flashAttn = next(i++);
        else if (k === "--gpu-layers") opts.gpuLayers = +next(i++);   // llama.cpp's -ngl (default: every layer)
        else if (k === "--no-warmup") opts.warmup = false;
        else if (k === "--verbose") opts.verbose = true;
        else throw new Error(`unknown argument ${k}`);
    }
    if (!opts.model) throw new Error("--model is required");
    for (const k of ["promptTokens", "genTokens", "sequences"])
        if (!(Number.isInteger(opts[k]) && opts[k] >= 1)) throw new Error(`bad value for ${k}`);
    if (!["cuda", "false"].includes(opts.gpu)) throw new Error("--gpu must be cuda or false");
}
const useCuda = opts.gpu === "cuda";
const fa = opts.flashAttn === "on" ? true : opts.flashAttn === "off" ? false : "auto";
const now = () => Number(process.hrtime.bigint()) / 1e9;
const round = (x, d = 2) => (Number.isFinite(x) ? Math.round(x * 10 ** d) / 10 ** d : null);

async function importNlc() {
    const dir = process.env.NODE_LLAMA_CPP_DIR;
    if (!dir) return { mod: await import("node-llama-cpp"), pkgDir: null };
    const pkg = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8"));
    const entry = path.join(dir, pkg.exports?.["."]?.import ?? pkg.main ?? "dist/index.js");
    return { mod: await import(pathToFileURL(entry).href), pkgDir: dir, version: pkg.version };
}

// Prompt of exactly n tokens: BOS, then a fixed English text repeated. Sequence i starts the text
// i tokens later, so no two sequences share a prompt.
function makePrompt(model, n, i) {
    const body = model.tokenize("The quick brown fox jumps over the lazy dog. In the beginning the model " +
        "was small and the weights were random, but every layer still had to be read from memory for each new token. ");
    const out = model.tokens.bos != null ? [model.tokens.bos] : [];
    let j = i % body.length;
    while (out.length < n) out.push(body[j++ % body.length]);
    return out.slice(0, n);
}

function mappedLibs() {
    try {
        return [...new Set(fs.readFileSync("/proc/self/maps", "utf8").split("\n")
            .map((l) => l.trim().split(/\s+/).slice(5).join(" "))
            .filter((p) => /\.(so|node)(\.\d+)*$/.test(p)))];
    } catch {
        return [];
    }
}

async function main() {
    const { mod, version } = await importNlc();
    const { getLlama, LlamaLogLevel } = mod;
    const log = (level, msg) => {
        if (opts.verbose || level === LlamaLogLevel.error || level === LlamaLogLevel.fatal)
            process.stderr.write(`[llama ${level}] ${msg}\n`);
    };
    const llamaOpts = {
        gpu: useCuda ? "cuda" : false,     // one GPU type only: no silent fallback to another backend
        build: "never",
        skipDownload: true,
        usePrebuiltBinaries: true,
        existingPrebuiltBinaryMustMatchBuildOptions: false,
        progressLogs: opts.verbose,
        ...(opts.threads ? { maxThreads: opts.threads } : {}),
        logLevel: opts.verbose ? LlamaLogLevel.debug : LlamaLogLevel.warn,
        logger: log
    };
    const t0 = now();
    let llama;
    try {
        llama = await getLlama(llamaOpts);
    } catch (err) {
        // node-llama-cpp tests the binary in a child process and hides why it failed; rerun that
        // test with its output shown (internal API, so only when the package folder is known).
        if (process.env.NODE_LLAMA_CPP_DIR) {
            process.stderr.write("peer_cuda.mjs: getLlama failed; binary test output follows\n");
            try {
                const internal = await import(pathToFileURL(path.join(process.env.NODE_LLAMA_CPP_DIR, "dist", "bindings", "getLlama.js")).href);
                await internal.getLlamaForOptions({ ...llamaOpts, progressLogs: "stderr" }, { pipeBinaryTestErrorLogs: true });
            } catch { /* the original error is reported below */ }
        }
        throw err;
    }
    const initS = now() - t0;
    const gpuDevices = llama.gpu ? await llama.getGpuDeviceNames() : [];
    if (useCuda && (llama.gpu !== "cuda" || gpuDevices.length === 0))
        throw new Error(`CUDA requested but got gpu=${llama.gpu} devices=${JSON.stringify(gpuDevices)}`);

    const P = opts.promptTokens, G = opts.genTokens, N = opts.sequences;
    const t1 = now();
    const model = await llama.loadModel({
        modelPath: path.resolve(opts.model),
        gpuLayers: useCuda ? (Number.isInteger(opts.gpuLayers) ? opts.gpuLayers : "max") : 0,
        defaultContextFlashAttention: fa
    });
    const contextSize = Math.ceil((P + G + 8) / 256) * 256;   // per sequence
    const context = await model.createContext({
        contextSize,
        sequences: N,
        batchSize: opts.batch || Math.min(P * N, 2048),
        flashAttention: fa,
        ...(opts.threads ? { threads: { ideal: opts.threads, min: opts.threads } } : {})
    });
    const loadS = now() - t1;
    if (useCuda && model.gpuLayers === 0) throw new Error("CUDA requested but no layer was offloaded");

    const seqs = Array.from({ length: N }, () => context.getSequence());
    const prompts = seqs.map((_, i) => makePrompt(model, P, i));
    const evalOpts = { temperature: 0, yieldEogToken: true };

    async function pass(nGen) {
        const gens = seqs.map((s, i) => s.evaluate(prompts[i], evalOpts));
        const ts = now();
        const outs = (await Promise.all(gens.map((g) => g.next()))).map((r) => [r.value]);
        const tp = now();
        await Promise.all(gens.map(async (g, i) => {
            for (let k = 0; k < nGen; k++) {
                const r = await g.next();
                if (r.done) break;
                outs[i].push(r.value);
            }
        }));
        const td = now();
        await Promise.all(gens.map((g) => g.return()));
        return { prefillS: tp - ts, decodeS: td - tp, outs };
    }

    if (opts.warmup) {
        await pass(1);
        await Promise.all(seqs.map((s) => s.clearHistory()));
    }
    const res = await pass(G);
    const steps = res.outs.reduce((a, o) => a + o.length - 1, 0);

    const out = {
        peer: "llama.cpp via node-llama-cpp",
        model: path.resolve(opts.model),
        gpu: llama.gpu === false ? false : llama.gpu,
        gpu_devices: gpuDevices,
        gpu_layers: model.gpuLayers,
        sequences: N,
        prompt_tokens: P,
        gen_tokens: G,
        decode_steps_total: steps,
        prefill_tok_s: round((N * P) / res.prefillS),
        decode_tok_s: round(steps / res.decodeS),
        decode_tok_s_per_seq: round(steps / N / res.decodeS),
        prefill_s: round(res.prefillS, 4),
        decode_s: round(res.decodeS, 4),
        load_s: round(loadS, 3),
        init_s: round(initS, 3),
        flash_attn: context.flashAttention,
        context_size_per_seq: context.contextSize,
        batch_size: context.batchSize,
        threads: context.currentThreads,
        vram: useCuda ? await llama.getVramState().catch(() => null) : null,
        node_llama_cpp: version ?? null,
        llama_cpp_release: llama.llamaCppRelease?.release ?? null,
        backend_libs: mappedLibs().map((p) => path.basename(p)).filter((b) => /^libggml-|^libcu|^libllama/.test(b)),
        peak_rss_mb: round(process.resourceUsage().maxRSS / 1024, 1),
        first_tokens: res.outs.map((o) => o[0]),
        decode_text_seq0: model.detokenize(res.outs[0].slice(1))
    };
    process.stdout.write(JSON.stringify(out) + "\n");
    await context.dispose();
    await model.dispose();
    await llama.dispose();
}

main().catch((err) => {
    process.stderr.write(`peer_cuda.mjs: FAILED: ${err?.stack ?? err}\n`);
    process.stdout.write(JSON.stringify({ error: String(err?.message ?? err), gpu_requested: opts.gpu }) + "\n");
    process.exit(1);
});
