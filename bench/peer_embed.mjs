// peer_embed.mjs — llama.cpp's texts per second on the texts bench/embed_speed.c embeds, through
// node-llama-cpp's embedding context (one getEmbeddingFor per text: the API evaluates a text per call).
//   node peer_embed.mjs MODEL THREADS N_TEXTS TOKENS_PER_TEXT ROUNDS [letters]   (run from the peer's directory)
// letters: runs of lowercase letters instead of words, as ember-embed-speed's.
import {getLlama} from "node-llama-cpp";
const [model, threads, n, tokens, rounds, mode] = process.argv.slice(2);
const words = ["the", "of", "and", "to", "in", "is", "was", "it", "for", "on", "with", "hello", "world", "cat", "dog",
               "sat", "mat", "run", "walk", "tree", "river", "stone", "light", "dark", "city", "game", "player",
               "sword", "shield", "king"];
const texts = [];
for (let i = 0; i < +n; ++i) {
  const w = [];
  for (let k = 0; k < +tokens - 2; ++k)
    w.push(mode === "letters" ? String.fromCharCode(97 + (i * 7 + k) % 26) : words[(i * 7 + k) % words.length]);
  texts.push(w.join(mode === "letters" ? "" : " "));
}
const llama = await getLlama({gpu: false, logLevel: "error"});
const m = await llama.loadModel({modelPath: model, gpuLayers: 0});
// Room for the longest text as this vocabulary tokenizes it (a synthetic one may take more tokens per word).
const longest = Math.max(...texts.map(t => m.tokenize(t).length)) + 8;
const ctx = await m.createEmbeddingContext({threads: +threads, contextSize: Math.max(512, longest), batchSize: Math.max(512, longest)});
const times = [];
for (let r = 0; r < +rounds; ++r) {
  const t0 = process.hrtime.bigint();
  for (const t of texts) await ctx.getEmbeddingFor(t);
  times.push(Number(process.hrtime.bigint() - t0) / 1e9);
}
times.sort((a, b) => a - b);
const s = times[Math.floor(times.length / 2)];
console.log(JSON.stringify({runtime: "llama.cpp", model, threads: +threads, texts: +n,
                            tokens_per_text: m.tokenize(texts[0]).length + 2, rounds: +rounds,
                            texts_s: +(+n / s).toFixed(2), seconds: +s.toFixed(4)}));
