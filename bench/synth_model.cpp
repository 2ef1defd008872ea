// synth_model.cpp — `ember-synth`: writes a GGUF model of a given shape with random weights, for speed
// measurements on realistic shapes without downloading anything (the weights mean nothing; the speed
// does). Uses the core's synthetic-model writer, so it links the internals, unlike the ember CLI.
//
//   ember-synth -o OUT.gguf [--preset tinyllama|llama3-8b|stories15m|qwen35-2b|qwen36-35b-a3b|qwen3-30b-a3b]
//               [--family NAME]
//               [--arch llama|qwen2] [--type TYPE] [--embd N] [--layers N] [--heads N] [--kv-heads N] [--ff N]
//               [--vocab N] [--ctx N] [--seed N] [--window N] [--repeat-layers 1] [--rope-sections A,B,C,D]
//               [--ssm-in 0|1]
//
// --family: a small model of that family with all its parts (llama, mixtral, qwen2, qwen3, qwen3moe,
// gemma2, gemma3, phi3, granite, olmo2, gpt-oss, qwen35, qwen35moe, qwen3next; see
// src/testing/synthetic.cpp) and decisive logits.
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
// e.g. ember-synth -o qwen35-2b.gguf --preset qwen35-2b --type q4_k_m --repeat-layers 1
//      ember-synth -o qwen36-35b-a3b.gguf --preset qwen36-35b-a3b --type q4_k_m --repeat-layers 1
// --rope-sections: rope.dimension_sections (4 counts of rotary pairs); --ssm-in 0|1: Qwen3-Next's
// DeltaNet input as attn_qkv + attn_gate (0, what current converters write) or the older fused ssm_in (1).
// TYPE: any weight type of this build by its GGUF name (f32, f16, bf16, q8_0, q4_0, q4_k, ...), or the mix
// q4_k_m (Q4_K with Q6_K where it matters most; the recipe is in src/testing/synthetic.cpp). Matrices whose rows are not whole
// 256-element super-blocks get a legacy format instead of a K-quant (e.g. stories15m's 288).
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "testing/synthetic.hpp"

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
        } else if (k == "--preset" && v == "qwen3-30b-a3b") {
            // Qwen3-30B-A3B's shape (qwen3moe): 48 layers of width 2048, 32 heads / 4 KV heads of width 128
            // with per-head q/k norms, 128 experts (8 used) of width 768, 151,936 tokens, theta 1e6. For
            // placement across devices (docs/offload.md): experts on the CPU, the rest on the GPU.
            s = synthetic_family("qwen3moe");
            s.n_embd = 2048, s.n_layer = 48, s.n_head = 32, s.n_head_kv = 4, s.head_dim = 128, s.n_vocab = 151936;
            s.n_expert = 128, s.n_expert_used = 8, s.n_ff_exp = 768, s.n_ff = 768;
            s.tied_output = false, s.rope_theta = 1000000.0f, s.n_ctx = 40960;
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
            // after it still apply.
            const uint64_t seed = s.seed;
            s = synthetic_family(v);
            s.seed = seed;
        } else if (k == "--arch") {
            s.arch = v;
            s.qkv_bias = v == "qwen2";
        } else if (k == "--type") {
            if (v == "q4_k_m") s.mix = WeightMix::Q4_K_M;
            else s.type = parse_type(v);
        }
        else if (k == "--embd") s.n_embd = n;
        else if (k == "--layers") s.n_layer = n, s.recurrent_layers.clear();   // the interval places the attention layers
        else if (k == "--heads") s.n_head = n;
        else if (k == "--kv-heads") s.n_head_kv = n;
        else if (k == "--ff") s.n_ff = n;
        else if (k == "--vocab") s.n_vocab = n;
        else if (k == "--ctx") s.n_ctx = n;
        else if (k == "--seed") s.seed = n;
        else if (k == "--window") s.window = n;
        else if (k == "--repeat-layers") s.repeat_layers = n != 0;
        else {
            std::fprintf(stderr, "ember-synth: unknown option %s\n", k.c_str());
            return 2;
        }
    }
    if (out.empty()) {
        std::fprintf(stderr, "usage: ember-synth -o OUT.gguf [--preset tinyllama|llama3-8b|stories15m|qwen35-2b|qwen36-35b-a3b|qwen3-30b-a3b]\n"
                             "       [--family NAME] [--type q4_0|q4_k_m|...]\n"
                             "       [--repeat-layers 1 (every layer the first's bytes: speed tests)] ...\n");
        return 2;
    }
    try {
        const auto bytes = synthetic_model_gguf(s);
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
