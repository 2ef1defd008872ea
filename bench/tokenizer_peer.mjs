#!/usr/bin/env node
// tokenizer_peer.mjs — llama.cpp's token ids (node-llama-cpp's prebuilt binary, vocabulary only) for the
// pre-tokenizer test texts, on the vocabulary files test_tokenizer_pre writes; stored in
// tests/data/tokenizer_pre so that the test compares Ember with llama.cpp without the peer.
//
// usage: build/tests/test_tokenizer_pre --write /tmp/tokvar > /tmp/tokvar/list.txt
//        node bench/tokenizer_peer.mjs --list /tmp/tokvar/list.txt [--peer ../shared/peer]
//             [--texts tests/data/tokenizer_pre/texts.txt] [--out tests/data/tokenizer_pre]
// Each line of the list is a GGUF path, followed by " special" where the file also gets ids with special
// tokens parsed (<name>.special.out) and " random" where it also gets ids for the random texts
// (<name>.random.out). Writes <name>.out per file: a "# add_bos N" line (whether llama.cpp
// starts a text with BOS by default), "# eog ID..." (the tokens that end generation) and one line of ids
// per text, tokenized without BOS.
//
// Checks on more random texts than are stored (docs/models.md, "Tokenizers against llama.cpp"): write the
// texts with bench/tokenizer_random_texts.py --count N --wide, pass them as --random with an --out folder
// of their own and " random" on every line of the list, then `test_tokenizer_pre --compare OUT TEXTS`.
import fs from "node:fs";
import path from "node:path";
import process from "node:process";
import { createRequire } from "node:module";

const args = { peer: "../shared/peer", texts: "tests/data/tokenizer_pre/texts.txt",
               random: "tests/data/tokenizer_pre/texts_random.txt", out: "tests/data/tokenizer_pre", list: null };
for (let i = 2; i < process.argv.length; i++) {
    const k = process.argv[i], v = () => process.argv[++i];
    if (k === "--peer") args.peer = v();
    else if (k === "--texts") args.texts = v();
    else if (k === "--random") args.random = v();
    else if (k === "--out") args.out = v();
    else if (k === "--list") args.list = v();
    else throw new Error(`unknown argument ${k}`);
}
if (!args.list) throw new Error("usage: tokenizer_peer.mjs --list LIST");
process.env.NODE_LLAMA_CPP_SKIP_DOWNLOAD = "true";
const require = createRequire(path.resolve(args.peer, "package.json"));
const { getLlama } = await import(require.resolve("node-llama-cpp"));
const peerVersion = JSON.parse(fs.readFileSync(path.resolve(args.peer, "node_modules/node-llama-cpp/package.json"),
                                               "utf8")).version;

const llama = await getLlama({ gpu: false, build: "never", skipDownload: true, usePrebuiltBinaries: true,
                               existingPrebuiltBinaryMustMatchBuildOptions: false, progressLogs: false,
                               logLevel: "error" });
// Texts separated by a marker line, which also ends the file (llama.cpp's .inp layout).
const readTexts = (file) => fs.readFileSync(file, "utf8").split("\n__ggml_vocab_test__\n").slice(0, -1);
const texts = readTexts(args.texts), randomTexts = readTexts(args.random);

for (const line of fs.readFileSync(args.list, "utf8").split("\n").filter(Boolean)) {
    const [file, ...flags] = line.split(" ");
    const name = path.basename(file, ".gguf");
    const model = await llama.loadModel({ modelPath: file, vocabOnly: true, gpuLayers: 0 });
    // The tokens that end generation (its metadata's and those llama.cpp finds by their text).
    const eog = [];
    const nVocab = model.fileInfo.metadata.tokenizer.ggml.tokens.length;
    for (let id = 0; id < nVocab; id++) if (model.isEogToken(id)) eog.push(id);
    const modes = [["", false, texts]];
    if (flags.includes("special")) modes.push([".special", true, texts]);
    if (flags.includes("random")) modes.push([".random", false, randomTexts]);
    for (const [suffix, special, list] of modes) {
        const lines = [`# llama.cpp via node-llama-cpp ${peerVersion}; ${list.length} texts; special tokens ${special ? "parsed" : "not parsed"}`,
                       `# add_bos ${model.tokens.shouldPrependBosToken ? 1 : 0}`,
                       `# eog ${eog.join(" ")}`];
        for (const t of list) lines.push(Array.from(model.tokenize(t, special)).join(" "));
        fs.writeFileSync(path.join(args.out, `${name}${suffix}.out`), lines.join("\n") + "\n");
    }
    await model.dispose();
    console.log(name);
}
