// cmd_info.cpp — `ember info`: metadata, tensor summary, memory needed.
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

std::string shorten(std::string s, size_t max) {
    for (char &c : s)
        if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    if (s.size() > max) s = s.substr(0, max) + "...";
    return s;
}
} // namespace

int cmd_info(int argc, char **argv) {
    const Args a = parse(argc, argv, 2, {"-m", "--model", "-c"}, {"--tensors"});
    const std::string model_path = a.has("--model") ? a.str("--model", "") : a.str("-m", "");
    if (model_path.empty()) return usage_error("info: -m MODEL is required");

    // Full load first (cheap: weights are mapped, not read); fall back to the vocabulary alone for
    // architectures this build cannot run, so their metadata can still be inspected.
    ember_model_params mp;
    ember_model_params_init(&mp);
    ember_model *model = nullptr;
    bool vocab_only = false;
    ember_status st = ember_model_load(model_path.c_str(), &mp, &model);
    if (st == EMBER_ERR_UNSUPPORTED) {
        std::fprintf(stderr, "ember: note: %s; showing metadata only\n", ember_last_error());
        mp.vocab_only = true;
        vocab_only = true;
        st = ember_model_load(model_path.c_str(), &mp, &model);
    }
    if (st != EMBER_OK) return fail("cannot load model", st);

    ember_model_info info;
    ember_model_info_init(&info);
    ember_model_get_info(model, &info);
    std::printf("file:          %s\n", model_path.c_str());
    std::printf("architecture:  %s%s\n", info.architecture, vocab_only ? " (not runnable by this build)" : "");
    if (*info.name) std::printf("name:          %s\n", info.name);
    std::printf("vocabulary:    %u tokens (tokenizer %s)\n", info.n_vocab, meta(model, "tokenizer.ggml.model").c_str());
    if (!vocab_only && info.n_layer) {
        std::printf("parameters:    %.2f M\n", info.n_params / 1e6);
        std::printf("shape:         %u layers, embedding %u, %u heads (%u KV heads), trained context %u\n",
                    info.n_layer, info.n_embd, info.n_head, info.n_head_kv, info.n_ctx_train);
    }

    size_t n_meta = 0;
    ember_model_meta_count(model, &n_meta);
    std::printf("\nmetadata (%zu keys):\n", n_meta);
    for (size_t i = 0; i < n_meta; ++i) {
        const char *key = nullptr;
        ember_model_meta_key(model, i, &key);
        std::printf("  %-40s %s\n", key, shorten(meta(model, key), 100).c_str());
    }

    size_t n_tensors = 0;
    ember_model_tensor_count(model, &n_tensors);
    std::map<std::string, std::pair<size_t, uint64_t>> by_type;
    for (size_t i = 0; i < n_tensors; ++i) {
        ember_tensor_info ti;
        ember_tensor_info_init(&ti);
        ember_model_tensor_info(model, i, &ti);
        auto &e = by_type[ti.type];
        e.first++;
        e.second += ti.n_bytes;
        if (a.flag("--tensors")) {
            std::printf(i == 0 ? "\ntensors:\n" : "");
            std::printf("  %-32s %-5s [", ti.name, ti.type);
            for (uint32_t d = 0; d < ti.n_dims; ++d) std::printf(d ? ", %lld" : "%lld", (long long)ti.dims[d]);
            std::printf("] %llu bytes\n", (unsigned long long)ti.n_bytes);
        }
    }
    std::printf("\ntensors: %zu, %.2f MiB\n", n_tensors, info.size_bytes / 1048576.0);
    for (const auto &[type, e] : by_type)
        std::printf("  %-6s %4zu tensors  %9.2f MiB\n", type.c_str(), e.first, e.second / 1048576.0);

    if (!vocab_only && info.n_layer) {
        uint32_t n_ctx = static_cast<uint32_t>(a.integer("-c", 0));
        if (n_ctx == 0) n_ctx = info.n_ctx_train && info.n_ctx_train < 4096 ? info.n_ctx_train : 4096;
        const double weights = info.size_bytes / 1048576.0;
        const double kv = static_cast<double>(info.kv_bytes_per_token) * n_ctx / 1048576.0;
        std::printf("\nmemory for one session of %u tokens (CPU): weights %.2f MiB (mapped from the file) + "
                    "KV cache %.2f MiB (f16) = %.2f MiB, plus activations\n", n_ctx, weights, kv, weights + kv);
    }
    ember_model_free(model);
    return 0;
}

} // namespace cli
