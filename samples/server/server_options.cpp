// server_options.cpp — the command line of ember-server: strict parsing, so that a typo is an error
// rather than a silently ignored option.
#include "server_options.hpp"

#include <charconv>
#include <cstdio>
#include <cstring>
#include <string_view>

namespace server {

namespace {
const char *const kUsage =
    "usage: ember-server -m MODEL [options]\n"
    "  -m, --model PATH     GGUF model to serve (required)\n"
    "  --host ADDR          address to listen on (default 127.0.0.1)\n"
    "  --port N             port (default 8080; 0: any free port, printed when listening)\n"
    "  --parallel N         requests generated together by the engine (default 8)\n"
    "  -c, --ctx-size N     context per request in tokens (default: the model's, at most 4096)\n"
    "  -t, --threads N      CPU threads (default: physical cores, at most 8)\n"
    "  --backend NAME       auto, cpu, vulkan or cuda (default auto)\n"
    "  --mtp                speculative decoding with the model's own multi-token-prediction layers\n"
    "                       (Qwen3.5 / 3.6 files carry them); the same tokens, fewer steps when drafts are kept\n"
    "  --lookup             speculative decoding with n-gram lookup in each request's own tokens\n"
    "  --draft-k K          tokens drafted per request and step with --mtp or --lookup, 1..8 (default 4)\n"
    "  --max-body BYTES     largest request body accepted, decompressed (default 1048576)\n"
    "  --max-pending N      generations held at once, running or queued; more get 503 (default 2 x parallel)\n"
    "  --header-timeout S   seconds a client has to send a request's line and headers (default 10)\n"
    "  --body-timeout S     seconds a client has to send a request's body (default 30)\n"
    "  --http-threads N     HTTP worker threads (default max-pending + 8)\n"
    "  --max-connections N  connections open at once; more get 503 (default 512)\n"
    "  --alias NAME         model id reported by /v1/models (default: the file name)\n"
    "  --chat-template-file FILE  a Jinja chat template used instead of the model's (tools need one that reads them)\n"
    "  -v, --verbose        log every request on stderr\n";

template <class T>
bool parse_uint(std::string_view name, std::string_view text, T max, T *out) {
    unsigned long long v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || v > static_cast<unsigned long long>(max)) {
        std::fprintf(stderr, "ember-server: %.*s wants a whole number up to %llu, not '%.*s'\n",
                     static_cast<int>(name.size()), name.data(), static_cast<unsigned long long>(max),
                     static_cast<int>(text.size()), text.data());
        return false;
    }
    *out = static_cast<T>(v);
    return true;
}

// Seconds, possibly fractional ("0.5"), from 0.001 to 3600, as milliseconds.
bool parse_seconds(std::string_view name, std::string_view text, uint32_t *out_ms) {
    double v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || !(v >= 0.001 && v <= 3600)) {
        std::fprintf(stderr, "ember-server: %.*s wants seconds from 0.001 to 3600, not '%.*s'\n",
                     static_cast<int>(name.size()), name.data(), static_cast<int>(text.size()), text.data());
        return false;
    }
    *out_ms = static_cast<uint32_t>(v * 1000 + 0.5);
    return true;
}

// A whole (small) text file, such as a chat template.
bool read_text_file(const std::string &path, std::string *out) {
    std::FILE *f = std::fopen(path.c_str(), "rb");
    if (!f) return false;
    char buf[4096];
    size_t n;
    out->clear();
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0 && out->size() < (size_t{1} << 20)) out->append(buf, n);
    std::fclose(f);
    return !out->empty();
}

std::string file_stem(const std::string &path) {
    const size_t slash = path.find_last_of('/');
    std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".gguf") == 0) name.resize(name.size() - 5);
    return name;
}
} // namespace

bool parse_options(int argc, char **argv, Options *o, bool *exit_now) {
    *exit_now = false;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        auto is = [&](const char *a, const char *b = nullptr) { return arg == a || (b && arg == b); };
        if (is("-h", "--help")) {
            std::fputs(kUsage, stdout);
            *exit_now = true;
            return true;
        }
        if (is("-v", "--verbose")) {
            o->verbose = true;
            continue;
        }
        if (is("--mtp") || is("--lookup")) {
            const ember_spec_mode mode = is("--mtp") ? EMBER_SPEC_MTP : EMBER_SPEC_LOOKUP;
            if (o->speculation != EMBER_SPEC_OFF && o->speculation != mode) {
                std::fprintf(stderr, "ember-server: --mtp and --lookup exclude each other\n");
                return false;
            }
            o->speculation = mode;
            continue;
        }
        if (i + 1 >= argc) {
            std::fprintf(stderr, "ember-server: unknown option or missing value: %s\n%s", argv[i], kUsage);
            return false;
        }
        const std::string_view val = argv[++i];
        bool ok = true;
        if (is("-m", "--model")) o->model_path = val;
        else if (is("--host")) o->host = val;
        else if (is("--port")) ok = parse_uint(arg, val, 65535, &o->port);
        else if (is("--parallel")) ok = parse_uint(arg, val, 256u, &o->n_parallel) && o->n_parallel > 0;
        else if (is("-c", "--ctx-size")) ok = parse_uint(arg, val, 1u << 20, &o->n_ctx);
        else if (is("-t", "--threads")) ok = parse_uint(arg, val, 256u, &o->n_threads);
        else if (is("--max-body")) ok = parse_uint(arg, val, size_t{1} << 32, &o->max_body) && o->max_body > 0;
        else if (is("--http-threads")) ok = parse_uint(arg, val, 1024u, &o->http_threads) && o->http_threads > 0;
        else if (is("--max-connections")) ok = parse_uint(arg, val, 65536u, &o->max_connections) && o->max_connections > 0;
        else if (is("--max-pending")) ok = parse_uint(arg, val, 65536u, &o->max_pending) && o->max_pending > 0;
        else if (is("--header-timeout")) ok = parse_seconds(arg, val, &o->header_timeout_ms);
        else if (is("--body-timeout")) ok = parse_seconds(arg, val, &o->body_timeout_ms);
        else if (is("--alias")) o->model_id = val;
        else if (is("--draft-k")) ok = parse_uint(arg, val, 8u, &o->spec_k) && o->spec_k > 0;
        else if (is("--chat-template-file")) ok = read_text_file(std::string(val), &o->chat_template);
        else if (is("--backend")) {
            if (val == "auto") o->backend = EMBER_BACKEND_AUTO;
            else if (val == "cpu") o->backend = EMBER_BACKEND_CPU;
            else if (val == "vulkan") o->backend = EMBER_BACKEND_VULKAN;
            else if (val == "cuda") o->backend = EMBER_BACKEND_CUDA;
            else {
                std::fprintf(stderr, "ember-server: --backend is auto, cpu, vulkan or cuda, not '%s'\n", argv[i]);
                return false;
            }
        } else {
            std::fprintf(stderr, "ember-server: unknown option: %s\n%s", argv[i - 1], kUsage);
            return false;
        }
        if (!ok) {
            std::fprintf(stderr, "ember-server: bad value for %s: '%s'\n", argv[i - 1], argv[i]);
            return false;
        }
    }
    if (o->model_path.empty()) {
        std::fprintf(stderr, "ember-server: -m MODEL is required\n%s", kUsage);
        return false;
    }
    if (o->model_id.empty()) o->model_id = file_stem(o->model_path);
    if (o->max_pending == 0) o->max_pending = 2 * o->n_parallel;
    if (o->http_threads == 0) o->http_threads = o->max_pending + 8;
    return true;
}

} // namespace server
