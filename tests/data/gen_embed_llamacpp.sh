#!/usr/bin/env bash
# Writes tests/data/embed_llamacpp.inc: llama.cpp's embeddings, scores and tokens for the synthetic files of
# tests/test_embed.cpp, and tests/data/embed_arch_llamacpp.inc: the same for tests/test_embed_arch.cpp's
# nomic-bert and gemma-embedding files, through node-llama-cpp (a peer install beside the checkout: see
# ../shared/peer).
#   bash tests/data/gen_embed_llamacpp.sh BUILD_DIR PEER_DIR
# BUILD_DIR has bench/ember-synth; PEER_DIR is a directory where `npm install node-llama-cpp` has run.
set -euo pipefail
build=$(realpath "$1") peer=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
synth="$build/bench/ember-synth"
"$synth" -o "$tmp/mean.gguf" --preset bert-tiny > /dev/null
"$synth" -o "$tmp/cls.gguf" --preset bert-tiny --pooling 2 > /dev/null
"$synth" -o "$tmp/rank.gguf" --preset bert-tiny --pooling 4 > /dev/null
"$synth" -o "$tmp/qwen3.gguf" --family qwen3 --pooling 3 > /dev/null
"$synth" -o "$tmp/nomic.gguf" --preset nomic-bert-tiny > /dev/null
"$synth" -o "$tmp/gemma.gguf" --preset gemma-embedding-tiny > /dev/null
cat > "$peer/ember_embed_ref.mjs" <<'JS'
// MODEL embed|rank TEXT...: vectors (getEmbeddingFor) and tokens, or rankAll's scores for TEXT[0] as query.
import {getLlama} from "node-llama-cpp";
const [model, mode, ...rest] = process.argv.slice(2);
const llama = await getLlama({gpu: false, logLevel: "error"});
const m = await llama.loadModel({modelPath: model, gpuLayers: 0});
const out = {};
if (mode === "embed") {
  const ctx = await m.createEmbeddingContext({threads: 2});
  out.vectors = [];
  for (const t of rest) out.vectors.push(Array.from((await ctx.getEmbeddingFor(t)).vector));
  out.tokens = rest.map(t => Array.from(m.tokenize(t, true)));
} else {
  const ctx = await m.createRankingContext({threads: 2});
  const [q, ...docs] = rest;
  out.scores = await ctx.rankAll(q, docs);
}
console.log(JSON.stringify(out));
JS
texts=("hello world" "The cat sat on the mat." "Where is the dragon? North of the castle, by the river!"
       "a quest for gold: find the king's sword and shield")
for f in mean cls qwen3 nomic gemma; do (cd "$peer" && node ember_embed_ref.mjs "$tmp/$f.gguf" embed "${texts[@]}") > "$tmp/$f.json"; done
(cd "$peer" && node ember_embed_ref.mjs "$tmp/rank.gguf" rank "where is the dragon" "${texts[@]}") > "$tmp/rank.json"
rm -f "$peer/ember_embed_ref.mjs"
python3 - "$tmp" "$here/embed_llamacpp.inc" "$here/embed_arch_llamacpp.inc" "${texts[@]}" <<'PY'
import json, math, sys
tmp, dst, dst_arch, texts = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
load = lambda n: json.load(open(f"{tmp}/{n}.json"))
mean, cls, rank, qwen = load("mean"), load("cls"), load("rank"), load("qwen3")
arr = lambda v: "{" + ", ".join("%.9g" % x for x in v) + "}"
o = ["// embed_llamacpp.inc — llama.cpp's outputs for tests/test_embed.cpp's synthetic files (ember-synth --preset",
     "// bert-tiny with mean, CLS and rank pooling; --family qwen3 --pooling 3), from node-llama-cpp 3.22.1's prebuilt",
     "// CPU binaries: getEmbeddingFor (which adds [CLS]/[SEP], or BOS), rankAll (its sigmoid undone here into the raw",
     "// score). Written by tests/data/gen_embed_llamacpp.sh; pinned so that CI needs no peer.",
     "static const char *const kLlamaTexts[] = {" + ", ".join(json.dumps(t) for t in texts) + "};",
     "// The BERT file's tokens of each text without special tokens (llama.cpp's tokenize)."]
o += ["static const int32_t kLlamaTokens%d[] = %s;" % (i, arr(t)) for i, t in enumerate(mean["tokens"])]
o.append("static const float kLlamaMean[][64] = {" + ",\n    ".join(arr(v) for v in mean["vectors"]) + "};")
o.append("static const float kLlamaCls[][64] = {" + ",\n    ".join(arr(v) for v in cls["vectors"]) + "};")
o.append('// Each text as a document for the query "where is the dragon", pairs as llama.cpp forms them: [CLS] query [SEP] doc.')
o.append("static const double kLlamaRank[] = " + arr([math.log(p / (1 - p)) for p in rank["scores"]]) + ";")
o.append("// The qwen3 file (last-token pooling): vectors, and the tokens without BOS.")
o += ["static const int32_t kLlamaQwenTokens%d[] = %s;" % (i, arr(t)) for i, t in enumerate(qwen["tokens"])]
o.append("static const float kLlamaQwen[][256] = {" + ",\n    ".join(arr(v) for v in qwen["vectors"]) + "};")
open(dst, "w").write("\n".join(o) + "\n")
nomic, gemma = load("nomic"), load("gemma")
o = ["// embed_arch_llamacpp.inc — llama.cpp's outputs for tests/test_embed_arch.cpp's synthetic files (ember-synth",
     "// --preset nomic-bert-tiny and --preset gemma-embedding-tiny, both mean pooling), from node-llama-cpp 3.22.1's",
     "// prebuilt CPU binaries: getEmbeddingFor's vectors (unnormalised) for the texts of embed_llamacpp.inc, and each",
     "// text's tokens without special tokens (llama.cpp's tokenize). Written by tests/data/gen_embed_llamacpp.sh;",
     "// pinned so that CI needs no peer."]
o += ["static const int32_t kNomicTokens%d[] = %s;" % (i, arr(t)) for i, t in enumerate(nomic["tokens"])]
o.append("static const float kNomicMean[][64] = {" + ",\n    ".join(arr(v) for v in nomic["vectors"]) + "};")
o += ["static const int32_t kGemmaTokens%d[] = %s;" % (i, arr(t)) for i, t in enumerate(gemma["tokens"])]
o.append("static const float kGemmaMean[][256] = {" + ",\n    ".join(arr(v) for v in gemma["vectors"]) + "};")
open(dst_arch, "w").write("\n".join(o) + "\n")
PY
echo "wrote $here/embed_llamacpp.inc and $here/embed_arch_llamacpp.inc"
