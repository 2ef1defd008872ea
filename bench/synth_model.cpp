// synth_model.cpp — `ember-synth`: writes a GGUF model of a given shape with random weights, for speed
// measurements on realistic shapes without downloading anything (the weights mean nothing; the speed
// does). Uses the core's synthetic-model writer, so it links the internals, unlike the ember CLI.
//
//   ember-synth -o OUT.gguf [--preset tinyllama|llama3-8b|stories15m|qwen35-2b|qwen36-35b-a3b|gemma4-e4b|
//               gemma4-26b-a4b|lfm2-1.2b|lfm2-8b-a1b|granite-4-h-tiny|bert-tiny|bge-small|qwen3-embedding-0.6b|
//               qwen3-30b-a3b|llama4-scout]
//               [--family NAME]
//               [--arch llama|qwen2] [--type TYPE] [--embd N] [--layers N] [--heads N] [--kv-heads N] [--ff N]
//               [--vocab N] [--ctx N] [--seed N] [--window N] [--repeat-layers 1] [--rope-sections A,B,C,D]
//               [--ssm-in 0|1] [--mtp N]
//
// --family: a small model of that family with all its parts (llama, mixtral, qwen2, qwen3, qwen3moe,
// gemma2, gemma3, phi3, granite, olmo2, gpt-oss, qwen35, qwen35moe, qwen3next, smollm3, mistral3, gemma4,
// gemma4moe, lfm2, lfm2moe, granitehybrid, llama4, and the metadata combinations olmo3-yarn, qwen3-yarn,
// gemma3-p2, gemma3-layers, gemma3-global and llama4-chunked; see src/testing/synthetic.cpp) and decisive
// logits.
//
// The hybrid presets, for speed tests (their shapes from the checkpoints' config.json; the vocabulary
// the real 248,320 tokens, since the output product's cost matters):
//   qwen35-2b       Qwen3.5-2B (qwen35): 24 layers of width 2048, full attention every 4th (8 heads,
//                   2 KV heads, head width 256, rope on 64 dims, sections 11/11/10, base 1e7), Gated
//                   DeltaNet in the others (16 key heads, 16 value heads, width 128, conv 4), FFN 6144,
//                   output tied to the embedding. With --type q4_k_m: 1,279,260,864 bytes (the published
//                   Qwen3.5-2B Q4_K_M file: 1,280,835,840), written in 2 min 49 s with --repeat-layers 1
//                   on 2 busy vCPUs (3 GB peak memory).
//   qwen36-35b-a3b  Qwen3.6-35B-A3B (qwen35moe; the same shape as Qwen3.5-35B-A3B): 40 layers of width
//                   2048, full attention every 4th (16 heads, 2 KV heads, head width 256, rope on 64
//                   dims), DeltaNet 16 key heads / 32 value heads of width 128, 256 experts (8 used) of
//                   width 512 and a gated shared expert of 512, separate output matrix. With --type q4_k_m
//                   about 21 GB (a 4-layer cut, --layers 4: 2.13 GB, 46 s on 2 vCPUs); the writer holds
//                   the file in memory twice, so it needs about 45 GB (a 128 GiB GPU machine, not a
//                   24 GiB one). --repeat-layers 1 encodes one layer's matrices and copies them.
//   lfm2-1.2b       LFM2-1.2B (lfm2): 16 layers of width 2048, attention in layers 2, 5, 8, 10, 12 and 14 (32
//                   heads, 8 KV heads, width 64), gated short convolutions of 3 taps in the others, FFN
//                   8192, 65,536 tokens, output tied to the embedding.
//   lfm2-8b-a1b     LFM2-8B-A1B (lfm2moe): 24 layers of width 2048, attention in layers 2, 6, 10, 14, 18 and
//                   21, the first 2 layers dense (FFN 7168), 32 experts (4 used) of width 1792 in the others.
//   granite-4-h-tiny Granite-4.0-H-Tiny (granitehybrid): 40 layers of width 1536, attention (12 heads, 4 KV
//                   heads, no rope) in layers 5, 15, 25 and 35, Mamba-2 in the others (48 heads of 64, one
//                   group, state 128, conv 4), 64 experts (6 used) of width 512 and a shared expert of 1024,
//                   100,352 tokens.
// e.g. ember-synth -o qwen35-2b.gguf --preset qwen35-2b --type q4_k_m --repeat-layers 1
//
// The embedding presets (docs/embeddings.md):
//   bert-tiny               the embedding tests' BERT (testing/synthetic_bert.hpp's defaults: width 64, 2 layers)
//   bge-small               bge-small-en-v1.5's shape (bert, 33M): 12 layers of width 384, 12 heads, FFN 1536,
//                           512 positions, the 30,522-token vocabulary size, mean pooling (--pooling 2: CLS,
//                           4: a ranking head). Our own small WordPiece vocabulary, padded to that size.
//   qwen3-embedding-0.6b    Qwen3-Embedding-0.6B's shape (qwen3 with last-token pooling): 28 layers of width
//                           1024, 16 heads, 8 KV heads of width 128, FFN 3072, 151,669 tokens, tied output.
//   nomic-bert-tiny         the tests' nomic-bert (BERT-tiny's shape with rotary positions of base 1000, fused
//                           QKV, a gated SiLU FFN).
//   nomic-embed-text-v1.5   nomic-embed-text-v1.5's shape (nomic-bert, 137M): 12 layers of width 768, 12 heads,
//                           FFN 3072, 2048 positions, rope base 1000, the 30,522-token vocabulary size.
//   gemma-embedding-tiny    the tests' gemma-embedding (--family gemma-embedding: gemma3's small shape, window
//                           128, mean pooling, dense projections 256 -> 512 -> 256).
//   embeddinggemma-300m     EmbeddingGemma-300M's shape (gemma-embedding): 24 layers of width 768, 3 heads and 1
//                           KV head of width 256, FFN 1152, window 512 in five layers of six, rope bases 1e6
//                           and 1e4, 262,144 tokens, mean pooling, dense projections 768 -> 3072 -> 768.
//      ember-synth -o qwen36-35b-a3b.gguf --preset qwen36-35b-a3b --type q4_k_m --repeat-layers 1
// --rope-sections: rope.dimension_sections (4 counts of rotary pairs); --ssm-in 0|1: Qwen3-Next's
// DeltaNet input as attn_qkv + attn_gate (0, what current converters write) or the older fused ssm_in (1).
// --mtp N (qwen35, qwen35moe): N multi-token-prediction blocks after the layers (nextn_predict_layers, as
// the published Qwen3.5 / Qwen3.6 checkpoints carry one), for the MTP draft (ember run --mtp); 0: none.
// e.g. ember-synth -o qwen35-2b-mtp.gguf --preset qwen35-2b --type q4_k_m --repeat-layers 1 --mtp 1
// TYPE: any weight type of this build by its GGUF name (f32, f16, bf16, q8_0, q4_0, q4_k, ...), or the mix
// q4_k_m (Q4_K with Q6_K where it matters most; the recipe is in src/testing/synthetic.cpp). Matrices whose rows are not whole
// 256-element super-blocks get a legacy format instead of a K-quant (e.g. stories15m's 288).
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "testing/synthetic.hpp"
#include "testing/synthetic_bert.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

using namespace ember;

// Any weight type of the dtype table this build supports, by its name in any case ("q4_k", "Q8_0").
static DType parse_type(const std::string &s) {
    for (uint32_t id = 0; id < 64; ++id) {
        const DTypeInfo &i = dtype_info(id);
        if (!i.name || !i.supported || s.size() != std::strlen(i.name)) continue;
        bool same = true;
        for (size_t k = 0; k < s.size(); ++k)
            same &= std::tolower(static_cast<unsigned char>(s[k])) == std::tolower(static_cast<unsigned char>(i.name[k]));
        if (same) return static_cast<DType>(id);
    }
    std::fprintf(stderr, "ember-synth: unknown or unsupported type '%s'\n", s.c_str());
    std::exit(2);
}

// The Qwen3.5 / Qwen3.6 hybrids' common shape at width 2048 (see the presets above).
static void qwen35_shape(SyntheticSpec &s) {
    const uint64_t seed = s.seed;
    s = synthetic_family("qwen35");
    s.seed = seed;
    s.n_embd = 2048, s.n_vocab = 248320, s.n_ctx = 262144;
    s.head_dim = 256, s.n_head_kv = 2, s.n_rot = 64, s.rope_sections = {11, 11, 10, 0};
    s.rope_theta = 10000000.0f;
    s.ssm_groups = 16, s.ssm_state = 128, s.ssm_conv = 4;
    s.n_nextn = 0;   // no MTP block: the files people run mostly have none, and the forward pass skips it
}

int main(int argc, char **argv) {
    SyntheticSpec s;
    s.n_ctx = 2048;
    std::string out;
    bool bert = false, seed_given = false;
    BertSpec bs;
    for (int i = 1; i < argc; ++i) {
        const std::string k = argv[i];
        if (i + 1 >= argc) {
            std::fprintf(stderr, "ember-synth: %s needs a value\n", k.c_str());
            return 2;
        }
        const std::string v = argv[++i];
        const uint32_t n = static_cast<uint32_t>(std::strtoul(v.c_str(), nullptr, 10));
        if (k == "-o") out = v;
        else if (k == "--preset" && v == "tinyllama") {
            // TinyLlama-1.1B's shape (llama, GQA 32/4).
            s.n_embd = 2048, s.n_layer = 22, s.n_head = 32, s.n_head_kv = 4, s.n_ff = 5632, s.n_vocab = 32000;
            s.tied_output = false;
        } else if (k == "--preset" && v == "llama3-8b") {
            // Llama-3-8B's shape (llama, GQA 32/8, 128k vocabulary, theta 500000, rope frequency factors).
            s.n_embd = 4096, s.n_layer = 32, s.n_head = 32, s.n_head_kv = 8, s.n_ff = 14336, s.n_vocab = 128256;
            s.tied_output = false, s.rope_theta = 500000.0f, s.rope_freqs = true;
        } else if (k == "--preset" && v == "stories15m") {
            s.n_embd = 288, s.n_layer = 6, s.n_head = 6, s.n_head_kv = 6, s.n_ff = 768, s.n_vocab = 32000;
            s.tied_output = false;
        } else if (k == "--preset" && v == "qwen35-2b") {
            qwen35_shape(s);
            s.n_layer = 24, s.n_head = 8, s.ssm_heads = 16, s.n_ff = 6144, s.tied_output = true;
        } else if (k == "--preset" && v == "qwen36-35b-a3b") {
            qwen35_shape(s);
            s.arch = "qwen35moe";
            s.n_layer = 40, s.n_head = 16, s.ssm_heads = 32, s.tied_output = false;
            s.n_expert = 256, s.n_expert_used = 8, s.n_ff_exp = 512, s.n_ff_shexp = 512, s.n_ff = 512;
        } else if (k == "--preset" && (v == "gemma4-e4b" || v == "gemma4-26b-a4b")) {
            // Gemma 4's shapes (config.json of the checkpoints): five window layers (head 256, base 1e4) to
            // each global one (head 512, base 1e6 divided by rope_freqs), softcap 30, the real 262,144-token
            // vocabulary tied to the output (--vocab after the preset makes it smaller).
            const uint64_t seed = s.seed;
            s = synthetic_family(v == "gemma4-e4b" ? "gemma4" : "gemma4moe");
            s.seed = seed;
            s.n_vocab = 262144, s.n_ctx = 131072, s.window = 512, s.logit_std = 0, s.tied_output = true;
            s.head_dim = 512, s.head_dim_swa = 256;
            const bool e4b = v == "gemma4-e4b";
            // E4B: 42 layers of width 2560, 8 heads / 2 KV heads, FFN 10240, per-layer embeddings of 256,
            // the last 18 layers reading layers 22's and 23's caches. 26B-A4B: 30 layers of width 2816, 16
            // heads / 8 KV heads, a dense FFN of 2112 beside 128 experts of 704 (8 used); --layers cuts it.
            s.n_layer = e4b ? 42 : 30, s.n_embd = e4b ? 2560 : 2816, s.n_head = e4b ? 8 : 16, s.n_head_kv = e4b ? 2 : 8;
            s.n_ff = e4b ? 10240 : 2112;
            if (e4b) s.shared_kv_layers = 18, s.n_embd_per_layer = 256;
            else s.n_expert = 128, s.n_expert_used = 8, s.n_ff_exp = 704;
            s.swa_layers.assign(s.n_layer, true);
            for (uint32_t l = 5; l < s.n_layer; l += 6) s.swa_layers[l] = false;
        } else if (k == "--preset" && v == "bert-tiny") {
            bert = true;   // testing/synthetic_bert.hpp's defaults: the embedding tests' file
        } else if (k == "--preset" && v == "bge-small") {
            bert = true;
            bs.n_vocab = 30522, bs.n_embd = 384, bs.n_layer = 12, bs.n_head = 12, bs.n_ff = 1536, bs.n_ctx = 512;
        } else if (k == "--preset" && v == "qwen3-embedding-0.6b") {
            s = synthetic_family("qwen3");
            s.n_embd = 1024, s.n_layer = 28, s.n_head = 16, s.n_head_kv = 8, s.head_dim = 128, s.n_ff = 3072;
            s.n_vocab = 151669, s.tied_output = true, s.logit_std = 0, s.rope_theta = 1000000.0f, s.n_ctx = 32768;
            s.pooling_type = 3;
        } else if (k == "--preset" && (v == "nomic-bert-tiny" || v == "nomic-embed-text-v1.5")) {
            bert = true;
            bs.arch = "nomic-bert";
            if (v == "nomic-embed-text-v1.5")
                bs.n_vocab = 30522, bs.n_embd = 768, bs.n_layer = 12, bs.n_head = 12, bs.n_ff = 3072, bs.n_ctx = 2048;
        } else if (k == "--preset" && (v == "gemma-embedding-tiny" || v == "embeddinggemma-300m")) {
            const uint64_t seed = s.seed;
            s = synthetic_family("gemma-embedding");
            s.seed = seed;
            if (v == "embeddinggemma-300m") {
                s.n_embd = 768, s.n_layer = 24, s.n_head = 3, s.n_head_kv = 1, s.head_dim = 256, s.n_ff = 1152;
                s.n_vocab = 262144, s.n_ctx = 2048, s.window = 512, s.rope_theta = 1000000.0f, s.dense_features = 3072;
            }
        } else if (k == "--pooling") {
            bs.pooling_type = n, s.pooling_type = n;
        } else if (k == "--preset" && v == "lfm2-1.2b") {
            s = synthetic_family("lfm2");
            s.n_embd = 2048, s.n_layer = 16, s.n_head = 32, s.n_head_kv = 8, s.n_ff = 8192, s.n_vocab = 65536;
            s.n_ctx = 128000, s.rope_theta = 1000000.0f, s.tied_output = true, s.logit_std = 0;
            s.recurrent_layers.assign(16, true);
            for (uint32_t l : {2, 5, 8, 10, 12, 14}) s.recurrent_layers[l] = false;
        } else if (k == "--preset" && v == "lfm2-8b-a1b") {
            s = synthetic_family("lfm2moe");
            s.n_embd = 2048, s.n_layer = 24, s.n_head = 32, s.n_head_kv = 8, s.n_ff = 7168, s.n_vocab = 65536;
            s.n_ctx = 128000, s.rope_theta = 1000000.0f, s.tied_output = true, s.logit_std = 0;
            s.n_expert = 32, s.n_expert_used = 4, s.n_ff_exp = 1792, s.n_dense_lead = 2;
            s.recurrent_layers.assign(24, true);
            for (uint32_t l : {2, 6, 10, 14, 18, 21}) s.recurrent_layers[l] = false;
        } else if (k == "--preset" && v == "granite-4-h-tiny") {
            s = synthetic_family("granitehybrid");
            s.n_embd = 1536, s.n_layer = 40, s.n_head = 12, s.n_head_kv = 4, s.n_vocab = 100352, s.n_ctx = 131072;
            s.head_dim = 128, s.tied_output = true, s.logit_std = 0;
            s.ssm_inner = 3072, s.ssm_heads = 48, s.ssm_groups = 1, s.ssm_state = 128, s.ssm_conv = 4;
            s.n_expert = 64, s.n_expert_used = 6, s.n_ff = 512, s.n_ff_shexp = 1024;
            s.recurrent_layers.assign(40, true);
            for (uint32_t l : {5, 15, 25, 35}) s.recurrent_layers[l] = false;
        } else if (k == "--preset" && v == "qwen3-30b-a3b") {
            // Qwen3-30B-A3B's shape (qwen3moe): 48 layers of width 2048, 32 heads / 4 KV heads of width 128
            // with per-head q/k norms, 128 experts (8 used) of width 768, 151,936 tokens, theta 1e6. For
            // placement across devices (docs/offload.md): experts on the CPU, the rest on the GPU.
            s = synthetic_family("qwen3moe");
            s.n_embd = 2048, s.n_layer = 48, s.n_head = 32, s.n_head_kv = 4, s.head_dim = 128, s.n_vocab = 151936;
            s.n_expert = 128, s.n_expert_used = 8, s.n_ff_exp = 768, s.n_ff = 768;
            s.tied_output = false, s.rope_theta = 1000000.0f, s.n_ctx = 40960;
        } else if (k == "--preset" && v == "llama4-scout") {
            // Llama-4-Scout-17B-16E's text model (llama4): 48 layers of width 5120, 40 heads / 8 KV heads of
            // width 128, 16 experts (1 used) of width 8192 and a shared expert of 8192 in every layer
            // (interleave_moe_layer_step 1), 202,048 tokens, theta 5e5 with Llama-3 rope factors. About
            // 60 GB in Q4_K_M: cut it with --layers for a machine of less memory.
            s = synthetic_family("llama4");
            s.n_embd = 5120, s.n_layer = 48, s.n_head = 40, s.n_head_kv = 8, s.head_dim = 128, s.n_vocab = 202048;
            s.n_expert = 16, s.n_expert_used = 1, s.n_ff_exp = 8192, s.n_ff_shexp = 8192, s.n_ff = 16384;
            s.moe_layer_step = 1, s.n_ctx = 262144, s.logit_std = 0;
        } else if (k == "--rope-sections") {
            s.rope_sections.clear();
            for (const char *q = v.c_str(); *q;) {
                char *end;
                s.rope_sections.push_back(static_cast<int32_t>(std::strtol(q, &end, 10)));
                if (end == q) break;
                q = *end == ',' ? end + 1 : end;
            }
        } else if (k == "--ssm-in") {
            s.ssm_fused_in = n != 0;
        } else if (k == "--family") {
            // Every part of the family switched on (testing/synthetic.hpp's synthetic_family); options
            // after it still apply, and a --seed before it (else the family's own: the tests' file).
            const uint64_t seed = s.seed;
            s = synthetic_family(v);
            if (seed_given) s.seed = seed;
        } else if (k == "--arch") {
            s.arch = v;
            s.qkv_bias = v == "qwen2";
        } else if (k == "--type") {
            if (v == "q4_k_m") s.mix = WeightMix::Q4_K_M;
            else s.type = bs.type = parse_type(v);
        }
        else if (k == "--embd") s.n_embd = n;
        else if (k == "--layers") {
            s.n_layer = n, bs.n_layer = n, s.recurrent_layers.clear();   // the interval places the attention layers
            if (!s.swa_layers.empty()) s.swa_layers.resize(n, true);   // (a per-layer window pattern: cut, or window layers added)
            s.shared_kv_layers = std::min(s.shared_kv_layers, n > 2 ? n / 2 : 0u);
        }
        else if (k == "--heads") s.n_head = n;
        else if (k == "--kv-heads") s.n_head_kv = n;
        else if (k == "--ff") s.n_ff = n;
        else if (k == "--vocab") s.n_vocab = n;
        else if (k == "--ctx") s.n_ctx = n;
        else if (k == "--seed") s.seed = bs.seed = n, seed_given = true;
        else if (k == "--window") s.window = n;
        else if (k == "--repeat-layers") s.repeat_layers = n != 0;
        else if (k == "--mtp") s.n_nextn = n;
        else {
            std::fprintf(stderr, "ember-synth: unknown option %s\n", k.c_str());
            return 2;
        }
    }
    if (out.empty()) {
        std::fprintf(stderr, "usage: ember-synth -o OUT.gguf [--preset tinyllama|llama3-8b|stories15m|qwen35-2b|qwen36-35b-a3b|"
                     "lfm2-1.2b|lfm2-8b-a1b|granite-4-h-tiny|qwen3-30b-a3b|...]\n"
                             "       [--family NAME] [--type q4_0|q4_k_m|...]\n"
                             "       [--repeat-layers 1 (every layer the first's bytes: speed tests)] ...\n");
        return 2;
    }
    // A layer list given by the family covers the MTP blocks too (they are attention blocks).
    if (!s.recurrent_layers.empty()) s.recurrent_layers.resize(s.n_layer + s.n_nextn, false);
    try {
        const auto bytes = bert ? synthetic_bert_gguf(bs) : synthetic_model_gguf(s);
        std::ofstream f(out, std::ios::binary);
        f.write(reinterpret_cast<const char *>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
        if (!f) fail(EMBER_ERR_IO, "cannot write '%s'", out.c_str());
        std::printf("wrote %s: %s, %zu bytes\n", out.c_str(), s.mix == WeightMix::Q4_K_M ? "Q4_K_M" : dtype_name(s.type),
                    bytes.size());
    } catch (const Error &e) {
        std::fprintf(stderr, "ember-synth: %s\n", e.what());
        return 1;
    }
    return 0;
}
