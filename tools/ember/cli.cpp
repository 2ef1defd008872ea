#include "cli.hpp"
#include "progress.hpp"

#include <algorithm>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

namespace cli {

bool Args::has(const std::string &name) const { return opts.count(name) > 0; }

std::string Args::str(const std::string &name, const std::string &fallback) const {
    auto it = opts.find(name);
    return it == opts.end() ? fallback : it->second;
}

long Args::integer(const std::string &name, long fallback) const {
    auto it = opts.find(name);
    if (it == opts.end()) return fallback;
    errno = 0;
    char *end = nullptr;
    long v = std::strtol(it->second.c_str(), &end, 10);
    if (errno || end == it->second.c_str() || *end) {
        std::fprintf(stderr, "ember: %s expects an integer, got '%s'\n", name.c_str(), it->second.c_str());
        std::exit(2);
    }
    return v;
}

double Args::number(const std::string &name, double fallback) const {
    auto it = opts.find(name);
    if (it == opts.end()) return fallback;
    errno = 0;
    char *end = nullptr;
    double v = std::strtod(it->second.c_str(), &end);
    if (errno || end == it->second.c_str() || *end) {
        std::fprintf(stderr, "ember: %s expects a number, got '%s'\n", name.c_str(), it->second.c_str());
        std::exit(2);
    }
    return v;
}

bool Args::flag(const std::string &name) const {
    for (const auto &f : flags)
        if (f == name) return true;
    return false;
}

std::vector<std::string> Args::all(const std::string &name) const {
    std::vector<std::string> out;
    for (const auto &[k, v] : values)
        if (k == name) out.push_back(v);
    return out;
}

Args parse(int argc, char **argv, int first, const std::vector<std::string> &value_opts,
           const std::vector<std::string> &flag_opts) {
    Args a;
    auto is_in = [](const std::vector<std::string> &v, const std::string &s) {
        for (const auto &x : v)
            if (x == s) return true;
        return false;
    };
    for (int i = first; i < argc; ++i) {
        std::string s = argv[i];
        if (s == "--") {
            for (++i; i < argc; ++i) a.positional.push_back(argv[i]);
            break;
        }
        if (s.size() > 1 && s[0] == '-' && !(s.size() > 1 && (std::isdigit((unsigned char)s[1]) || s[1] == '.'))) {
            std::string value;
            bool inline_value = false;
            if (auto eq = s.find('='); s.rfind("--", 0) == 0 && eq != std::string::npos) {
                value = s.substr(eq + 1);
                s = s.substr(0, eq);
                inline_value = true;
            }
            if (is_in(value_opts, s)) {
                if (!inline_value) {
                    if (i + 1 >= argc) {
                        std::fprintf(stderr, "ember: option %s needs a value\n", s.c_str());
                        std::exit(2);
                    }
                    value = argv[++i];
                }
                a.opts[s] = value;
                a.values.emplace_back(s, value);
            } else if (is_in(flag_opts, s)) {
                a.flags.push_back(s);
            } else {
                std::fprintf(stderr, "ember: unknown option %s (see 'ember help')\n", s.c_str());
                std::exit(2);
            }
        } else {
            a.positional.push_back(s);
        }
    }
    return a;
}

int fail(const char *what, ember_status status) {
    std::fprintf(stderr, "ember: %s: %s (%s)\n", what, ember_last_error(), ember_status_string(status));
    return 1;
}

int usage_error(const std::string &message) {
    std::fprintf(stderr, "ember: %s (see 'ember help')\n", message.c_str());
    return 2;
}

namespace {
bool load_progress(float f, void *ud) {
    static_cast<Progress *>(ud)->update(f);
    return true;
}
} // namespace

ember_model *load_model(const std::string &path, bool vocab_only, bool progress) {
    ember_model_params mp;
    ember_model_params_init(&mp);
    mp.vocab_only = vocab_only;
    Progress bar("loading");
    if (progress && bar.enabled()) {
        mp.progress = load_progress;
        mp.progress_user_data = &bar;
    }
    ember_model *model = nullptr;
    ember_status st = ember_model_load(path.c_str(), &mp, &model);
    if (st != EMBER_OK) {
        fail("cannot load model", st);
        return nullptr;
    }
    return model;
}

} // namespace cli

namespace cli {

bool tokenize(const ember_model *model, const std::string &text, uint32_t flags, std::vector<ember_token> &out) {
    size_t n = 0;
    ember_status st = ember_tokenize(model, text.data(), text.size(), flags, nullptr, 0, &n);
    if (st != EMBER_OK) return fail("tokenize", st), false;
    out.resize(n);
    st = ember_tokenize(model, text.data(), text.size(), flags, out.data(), out.size(), &n);
    if (st != EMBER_OK) return fail("tokenize", st), false;
    return true;
}

bool kv_type_option(const Args &a, const char *name, ember_kv_type *out) {
    const std::string v = a.str(name, kv_type_name(*out));
    if (v == "f16") *out = EMBER_KV_F16;
    else if (v == "q8_0") *out = EMBER_KV_Q8_0;
    else if (v == "q4_0") *out = EMBER_KV_Q4_0;
    else return usage_error(std::string(name) + " must be f16, q8_0 or q4_0"), false;
    return true;
}

const char *kv_type_name(ember_kv_type t) { return t == EMBER_KV_Q8_0 ? "q8_0" : t == EMBER_KV_Q4_0 ? "q4_0" : "f16"; }

const char *backend_name(ember_backend_kind kind) {
    switch (kind) {
    case EMBER_BACKEND_CPU: return "cpu";
    case EMBER_BACKEND_CUDA: return "cuda";
    case EMBER_BACKEND_VULKAN: return "vulkan";
    default: return "auto";
    }
}

std::string session_backend_text(const ember_session *s) {
    ember_backend_kind kind = EMBER_BACKEND_AUTO;
    uint32_t threads = 0;
    if (ember_session_backend(s, &kind, &threads) != EMBER_OK) return "unknown";
    std::string out = backend_name(kind);
    if (kind == EMBER_BACKEND_CPU) out += ", " + std::to_string(threads) + (threads == 1 ? " thread" : " threads");
    return out;
}

ember_status feed_prompt(ember_session *s, const std::vector<ember_token> &tokens) {
    const size_t chunk = 256;
    Progress progress("prompt");
    if (!progress.enabled() || tokens.size() <= 4 * chunk) return ember_session_feed(s, tokens.data(), tokens.size());
    // In chunks, so the bar moves; a failure leaves the chunks before it evaluated (the CLI then exits).
    for (size_t i = 0; i < tokens.size(); i += chunk) {
        progress.update(static_cast<double>(i) / static_cast<double>(tokens.size()));
        const ember_status st = ember_session_feed(s, tokens.data() + i, std::min(chunk, tokens.size() - i));
        if (st != EMBER_OK) return st;
    }
    return EMBER_OK;
}

namespace {
// The fields for a device handle (ember_session_device / ember_engine_device): its backend and, on a GPU
// backend, its name; the backend alone where the device is the application's own (no handle).
std::string device_json(const ember_device *dev, ember_backend_kind kind) {
    ember_device_info info;
    ember_device_info_init(&info);
    if (dev && ember_device_get_info(dev, &info, &kind) != EMBER_OK) return "";
    std::string out = std::string("\"backend\":\"") + backend_name(kind) + "\",";
    if (kind == EMBER_BACKEND_CPU || !dev) return out;
    std::string name;
    for (const char *c = info.name; *c; ++c)
        if (*c != '"' && *c != '\\' && static_cast<unsigned char>(*c) >= 0x20) name += *c;
    return out + "\"device\":\"" + name + "\",";
}
} // namespace

std::string backend_json(const ember_session *s) {
    ember_backend_kind kind = EMBER_BACKEND_CPU;
    const ember_device *dev = nullptr;
    if (ember_session_backend(s, &kind, nullptr) != EMBER_OK || ember_session_device(s, &dev) != EMBER_OK) return "";
    return device_json(dev, kind);
}

std::string backend_json(const ember_engine *e) {
    const ember_device *dev = nullptr;
    if (ember_engine_device(e, &dev) != EMBER_OK || !dev) return "";
    return device_json(dev, EMBER_BACKEND_CPU);
}

bool backend_option(const Args &a, ember_backend_kind *out) {
    const std::string backend = a.str("--backend", "auto");
    if (backend == "auto") *out = EMBER_BACKEND_AUTO;
    else if (backend == "cpu") *out = EMBER_BACKEND_CPU;
    else if (backend == "cuda") *out = EMBER_BACKEND_CUDA;
    else if (backend == "vulkan") *out = EMBER_BACKEND_VULKAN;
    else return usage_error("--backend must be auto, cpu, cuda or vulkan"), false;
    return true;
}

namespace {
// A layer count, "all" or (where `auto_ok`) "auto".
bool layers_value(const Args &a, const char *name, bool auto_ok, int32_t *out) {
    const std::string v = a.str(name, "");
    if (v == "all") return *out = EMBER_GPU_LAYERS_ALL, true;
    if (auto_ok && v == "auto") return *out = EMBER_GPU_LAYERS_AUTO, true;
    char *end = nullptr;
    const long n = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end || n < 0 || n > 100000)
        return usage_error(std::string(name) + (auto_ok ? " must be a layer count, auto or all" : " must be a layer count or all")), false;
    *out = static_cast<int32_t>(n);
    return true;
}
} // namespace

bool placement_options(const Args &a, int32_t *gpu_layers, int32_t *experts_on_cpu, uint64_t *gpu_budget_bytes) {
    if (a.has("--gpu-layers") && !layers_value(a, "--gpu-layers", true, gpu_layers)) return false;
    if (a.has("--experts-on-cpu") && !layers_value(a, "--experts-on-cpu", false, experts_on_cpu)) return false;
    if (a.has("--vram-budget")) {
        const long mib = a.integer("--vram-budget", 0);
        if (mib <= 0) return usage_error("--vram-budget must be a positive number of MiB"), false;
        *gpu_budget_bytes = static_cast<uint64_t>(mib) << 20;
    }
    return true;
}

ember_session *create_session(const ember_model *model, const Args &a) {
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.n_threads = static_cast<uint32_t>(a.integer("-t", 0));
    sp.n_ctx = static_cast<uint32_t>(a.integer("-c", 0));
    if (!backend_option(a, &sp.backend) || !kv_type_option(a, "--kv-type", &sp.kv_type) ||
        !placement_options(a, &sp.gpu_layers, &sp.experts_on_cpu, &sp.gpu_budget_bytes))
        return nullptr;
    const std::string precision = a.str("--precision", "default");
    if (precision != "default" && precision != "high")
        return usage_error("--precision must be default or high"), nullptr;
    ember_session *s = nullptr;
    ember_status st = ember_session_create(model, &sp, &s);
    if (st != EMBER_OK) fail("cannot create session", st);
    if (precision == "high" && (st = ember_session_set_precision(s, EMBER_PRECISION_HIGH)) != EMBER_OK) {
        ember_session_free(s);
        fail("--precision high", st);
        return nullptr;
    }
    return s;
}

bool attach_speculation(ember_session *s, const Args &a, ember_model **draft) {
    *draft = nullptr;
    const bool lookup = a.flag("--lookup"), mtp = a.flag("--mtp");
    if (!a.has("--draft") && !lookup && !mtp) return true;
    if (a.has("--draft") + lookup + mtp > 1) return usage_error("--draft, --lookup and --mtp exclude each other"), false;
    ember_spec_params p;
    ember_spec_params_init(&p);
    p.mode = mtp ? EMBER_SPEC_MTP : lookup ? EMBER_SPEC_LOOKUP : EMBER_SPEC_DRAFT;
    p.k = static_cast<uint32_t>(a.integer("--draft-k", 4));
    p.adaptive = !a.flag("--draft-fixed");
    p.k_max = std::max<uint32_t>(p.k, 8);
    p.n_threads = static_cast<uint32_t>(a.integer("-t", 0));
    if (a.has("--draft")) {
        *draft = load_model(a.str("--draft", ""), false, false);
        if (!*draft) return false;
        p.draft_model = *draft;
    }
    const ember_status st = ember_session_set_speculation(s, &p);
    if (st != EMBER_OK) {
        fail("cannot attach speculation", st);
        ember_model_free(*draft);
        *draft = nullptr;
        return false;
    }
    return true;
}

} // namespace cli
