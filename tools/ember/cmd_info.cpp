// cmd_info.cpp — `ember info`: what a GGUF file is (architecture, parameters, weight types), whether this
// build runs it and why not (the library's own answer: a load and a small session), metadata, memory.
#include "cli.hpp"

#include <cstdio>
#include <map>
#include <string>

namespace cli {

namespace {
std::string meta(const ember_model *model, const char *key) {
    size_t len = 0;
    if (ember_model_meta_string(model, key, nullptr, 0, &len) != EMBER_OK) return "";
    std::string s(len + 1, '\0');
    if (ember_model_meta_string(model, key, s.data(), s.size(), &len) != EMBER_OK) return "";
    s.resize(len);
    return s;
}

// The full load's refusal, as the CLI's errors are written (stderr, exit 1).
int fail_with(const std::string &why) {
    std::fprintf(stderr, "ember: cannot load model: %s\n", why.c_str());
    return 1;
}

// An integer metadata value, 0 when absent or not an integer.
int64_t meta_int(const ember_model *model, const std::string &key) {
    int64_t v = 0;
    return ember_model_meta_int(model, key.c_str(), &v) == EMBER_OK ? v : 0;
}

std::string shorten(std::string s, size_t max) {
    for (char &c : s)
        if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    if (s.size() > max) s = s.substr(0, max) + "...";
    return s;
}
} // namespace

namespace {
// Whether this build runs the loaded model: a small session on the backend asked for (default the CPU),
// which checks every weight type, the KV cache's needs and the memory available. "" when it runs, else
// the library's reason.
std::string run_check(const ember_model *model, const Args &a, std::string *where) {
    Args sa = a;
    if (!a.has("--backend")) sa.opts["--backend"] = "cpu";
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.n_ctx = 32;
    if (!backend_option(sa, &sp.backend)) return "bad --backend";
    ember_session *s = nullptr;
    const ember_status st = ember_session_create(model, &sp, &s);
    if (st != EMBER_OK) return std::string(ember_last_error()) + " (" + ember_status_string(st) + ")";
    *where = session_backend_text(s);
    ember_session_free(s);
    return "";
}
// --fit: the placement an engine of one sequence (n_ctx -c) would run on the backend asked for (default
// the best), chosen by the library before anything is allocated (ember_estimate_placement), with the
// memory per device. Default --gpu-layers auto. False when it cannot fit (the reason printed).
bool print_fit(const ember_model *model, const Args &a) {
    ember_engine_params ep;
    ember_engine_params_init(&ep);
    ep.n_seq_max = 1;
    ep.n_ctx = static_cast<uint32_t>(a.integer("-c", 0));
    ep.gpu_layers = EMBER_GPU_LAYERS_AUTO;
    if (!backend_option(a, &ep.backend) || !placement_options(a, &ep.gpu_layers, &ep.experts_on_cpu, &ep.gpu_budget_bytes))
        return false;
    ember_placement pl;
    ember_placement_init(&pl);
    const ember_status st = ember_estimate_placement(model, &ep, &pl);
    if (st != EMBER_OK) {
        std::printf("placement:     does not fit: %s (%s)\n", ember_last_error(), ember_status_string(st));
        return false;
    }
    std::printf("placement:     %u of %u layers on the GPU%s%s\n", pl.gpu_layers, pl.n_layer,
                pl.experts_on_cpu ? ", experts of the first of them on the CPU" : "", pl.automatic ? " (auto)" : "");
    std::printf("               %s\n", pl.description);
    if (pl.gpu_bytes || pl.cpu_bytes)
        std::printf("memory:        gpu %.1f MiB, cpu %.1f MiB\n", pl.gpu_bytes / 1048576.0, pl.cpu_bytes / 1048576.0);
    return true;
}
} // namespace

int cmd_info(int argc, char **argv) {
    const Args a = parse(argc, argv, 2, {"-m", "--model", "-c", "--backend", EMBER_CLI_PLACEMENT_OPTIONS},
                         {"--tensors", "--fit"});
    const std::string model_path = a.has("--model") ? a.str("--model", "") : a.str("-m", "");
    if (model_path.empty()) return usage_error("info: -m MODEL is required");

    // Full load first (cheap: weights are mapped, not read). What it refuses (an architecture, a tokenizer
    // or pre-tokenizer, a weight type, a malformed part) is still described from a metadata-only load,
    // which builds neither tokenizer nor weights, with the full load's refusal as the reason.
    ember_model_params mp;
    ember_model_params_init(&mp);
    ember_model *model = nullptr;
    std::string why_not;
    const ember_status full = ember_model_load(model_path.c_str(), &mp, &model);
    if (full == EMBER_ERR_IO || full == EMBER_ERR_OUT_OF_MEMORY) return fail("cannot load model", full);
    const bool described_only = full != EMBER_OK;
    if (described_only) {
        why_not = std::string(ember_last_error()) + " (" + ember_status_string(full) + ")";
        // Not even the metadata loads: a malformed file, or not a GGUF file at all.
        if (ember_model_load_metadata(model_path.c_str(), &mp, &model) != EMBER_OK) return fail_with(why_not);
    }

    ember_model_info info;
    ember_model_info_init(&info);
    ember_model_get_info(model, &info);

    // The weights by type (the "quant mix"), and the parameter count from the tensor table, which a
    // vocab-only load has too.
    size_t n_tensors = 0;
    ember_model_tensor_count(model, &n_tensors);
    std::map<std::string, std::pair<size_t, uint64_t>> by_type;
    std::map<std::string, uint64_t> params_by_type;
    uint64_t n_params = 0;
    for (size_t i = 0; i < n_tensors; ++i) {
        ember_tensor_info ti;
        ember_tensor_info_init(&ti);
        ember_model_tensor_info(model, i, &ti);
        auto &e = by_type[ti.type];
        e.first++;
        e.second += ti.n_bytes;
        uint64_t n = 1;
        for (uint32_t d = 0; d < ti.n_dims; ++d) n *= static_cast<uint64_t>(ti.dims[d]);
        params_by_type[ti.type] += n;
        n_params += n;
    }

    std::printf("file:          %s\n", model_path.c_str());
    std::printf("architecture:  %s\n", info.architecture);
    if (*info.name) std::printf("name:          %s\n", info.name);
    const std::string pre = meta(model, "tokenizer.ggml.pre");
    std::printf("vocabulary:    %u tokens (tokenizer %s%s%s)\n", info.n_vocab, meta(model, "tokenizer.ggml.model").c_str(),
                pre.empty() ? "" : ", pre-tokenizer ", pre.c_str());
    if (n_params) {
        std::printf("parameters:    %.2f M, %.2f MiB of tensor data, by type:", n_params / 1e6, info.size_bytes / 1048576.0);
        for (const auto &[type, n] : params_by_type)
            std::printf(" %s %.1f%%", type.c_str(), 100.0 * static_cast<double>(n) / static_cast<double>(n_params));
        std::printf("\n");
    }
    if (described_only) {
        // The shape as the file states it (GGUF's <arch>.* keys), where it does: nothing was built from it.
        const std::string arch = info.architecture;
        info.n_layer = static_cast<uint32_t>(meta_int(model, arch + ".block_count"));
        info.n_embd = static_cast<uint32_t>(meta_int(model, arch + ".embedding_length"));
        info.n_head = static_cast<uint32_t>(meta_int(model, arch + ".attention.head_count"));
        info.n_head_kv = static_cast<uint32_t>(meta_int(model, arch + ".attention.head_count_kv"));
        info.n_ctx_train = static_cast<uint32_t>(meta_int(model, arch + ".context_length"));
    }
    if (info.n_layer)
        std::printf("shape:         %u layers, embedding %u, %u heads (%u KV heads), trained context %u\n",
                    info.n_layer, info.n_embd, info.n_head, info.n_head_kv, info.n_ctx_train);
    if (info.n_recurrent_layers)
        std::printf("memory kinds:  KV rows in %u attention layers (%llu bytes a token, f16), a recurrent state in %u "
                    "layers (%.2f MiB a sequence, whatever its length)\n",
                    info.n_kv_layers, (unsigned long long)info.kv_bytes_per_token, info.n_recurrent_layers,
                    static_cast<double>(info.state_bytes_per_sequence) / 1048576.0);
    {
        // What the shape line does not say of Gemma 4's files (0 where a key is absent).
        const std::string arch = info.architecture;
        const int64_t shared = meta_int(model, arch + ".attention.shared_kv_layers");
        const int64_t per_layer = meta_int(model, arch + ".embedding_length_per_layer_input");
        const int64_t hd = meta_int(model, arch + ".attention.key_length");
        const int64_t hd_swa = meta_int(model, arch + ".attention.key_length_swa");
        if (shared > 0)
            std::printf("KV cache:      the last %lld layers read an earlier layer's K/V and keep none of their own\n",
                        static_cast<long long>(shared));
        if (per_layer > 0)
            std::printf("embeddings:    per-layer embeddings of %lld values per layer besides the token embedding\n",
                        static_cast<long long>(per_layer));
        if (hd_swa > 0 && hd_swa != hd)
            std::printf("heads:         %lld wide in the sliding-window layers, %lld in the global ones\n",
                        static_cast<long long>(hd_swa), static_cast<long long>(hd));
    }
    {
        // Multi-token-prediction layers: the file's own speculative draft (ember run --mtp).
        const std::string key = std::string(info.architecture) + ".nextn_predict_layers";
        int64_t n_mtp = 0;
        if (ember_model_meta_int(model, key.c_str(), &n_mtp) == EMBER_OK)
            std::printf("mtp layers:    %lld%s\n", (long long)n_mtp,
                    n_mtp > 0 ? " (multi-token prediction: a built-in speculative draft, ember run --mtp)" : "");
    }
    std::string where;
    if (described_only) {
        std::printf("runs here:     no: %s\n", why_not.c_str());
    } else if (const std::string why = run_check(model, a, &where); !why.empty()) {
        std::printf("runs here:     no: %s\n", why.c_str());
    } else {
        std::printf("runs here:     yes (%s%s)\n", where.c_str(),
                    a.has("--backend") ? "" : "; --backend vulkan|cuda checks a GPU backend");
    }

    if (a.flag("--fit") && !described_only && !print_fit(model, a)) {
        ember_model_free(model);
        return 1;
    }

    size_t n_meta = 0;
    ember_model_meta_count(model, &n_meta);
    std::printf("\nmetadata (%zu keys):\n", n_meta);
    for (size_t i = 0; i < n_meta; ++i) {
        const char *key = nullptr;
        ember_model_meta_key(model, i, &key);
        std::printf("  %-40s %s\n", key, shorten(meta(model, key), 100).c_str());
    }

    if (a.flag("--tensors")) {
        std::printf("\ntensors:\n");
        for (size_t i = 0; i < n_tensors; ++i) {
            ember_tensor_info ti;
            ember_tensor_info_init(&ti);
            ember_model_tensor_info(model, i, &ti);
            std::printf("  %-32s %-5s [", ti.name, ti.type);
            for (uint32_t d = 0; d < ti.n_dims; ++d) std::printf(d ? ", %lld" : "%lld", (long long)ti.dims[d]);
            std::printf("] %llu bytes\n", (unsigned long long)ti.n_bytes);
        }
    }
    std::printf("\ntensors: %zu, %.2f MiB\n", n_tensors, info.size_bytes / 1048576.0);
    for (const auto &[type, e] : by_type)
        std::printf("  %-6s %4zu tensors  %9.2f MiB\n", type.c_str(), e.first, e.second / 1048576.0);

    if (!described_only && info.n_layer) {
        uint32_t n_ctx = static_cast<uint32_t>(a.integer("-c", 0));
        if (n_ctx == 0) n_ctx = info.n_ctx_train && info.n_ctx_train < 4096 ? info.n_ctx_train : 4096;
        const double weights = info.size_bytes / 1048576.0;
        const double kv = static_cast<double>(info.kv_bytes_per_token) * n_ctx / 1048576.0;
        // A session keeps 2 + EMBER_SESSION_KEPT_STATES states of its recurrent layers (the current one, the
        // one a feed writes, and those a speculative verifying pass keeps: ember.h).
        const unsigned copies = 2 + EMBER_SESSION_KEPT_STATES;
        const double state = copies * static_cast<double>(info.state_bytes_per_sequence) / 1048576.0;
        std::printf("\nmemory for one session of %u tokens (CPU): weights %.2f MiB (mapped, or copied into huge pages) + "
                    "KV cache %.2f MiB (f16)", n_ctx, weights, kv);
        if (state > 0) std::printf(" + recurrent state %.2f MiB (%u copies: 2 + %u a verifying pass keeps)", state, copies,
                                   copies - 2);
        std::printf(" = %.2f MiB, plus activations\n", weights + kv + state);
    }
    ember_model_free(model);
    // A file this build does not support is described, and that is the answer (exit 0); a malformed one
    // is described as far as it can be, and is an error.
    return described_only && full != EMBER_ERR_UNSUPPORTED ? fail_with(why_not) : 0;
}

} // namespace cli
