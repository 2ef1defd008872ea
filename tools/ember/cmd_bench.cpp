// cmd_bench.cpp — `ember bench`: prefill and decode speed, load time and peak memory, as one JSON line.
//
// Measured the way the peer script (../shared/peer/bench.mjs) measures llama.cpp, so the figures compare:
// the prompt is BOS + a fixed English text, tokenized, repeated and cut to P tokens; one warm-up run
// (P-token prompt + 1 token) is done and rolled back first; prefill = P tokens evaluated and the first
// token sampled; decode = G steps of one token each, greedy, end-of-generation tokens not stopping it.
#include "background_load.hpp"
#include "cli.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <sys/resource.h>

namespace cli {

namespace {
double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The benchmark prompt as the peer script builds it: BOS + a fixed English text, tokenized, repeated and
// cut to n tokens. variant >= 0 puts a different word right after BOS, so such prompts share no block.
// --text replaces the English text (e.g. a repetitive one, for lookup decoding).
const char *const kBenchText = "The quick brown fox jumps over the lazy dog. In the beginning the model was small and the "
                     "weights were random, but every layer still had to be read from memory for each new token. ";

bool bench_prompt(const ember_model *model, const Args &a, long n, long variant, std::vector<ember_token> &out) {
    std::vector<ember_token> body;
    const std::string text = a.has("--text") ? a.str("--text", "") + " " : kBenchText;
    if (!tokenize(model, text, 0, body) || body.empty()) return false;
    out.clear();
    if (ember_token_bos(model) >= 0) out.push_back(ember_token_bos(model));
    if (variant >= 0) out.push_back(body[static_cast<size_t>(variant) % body.size()]);
    while (out.size() < static_cast<size_t>(n)) out.insert(out.end(), body.begin(), body.end());
    out.resize(static_cast<size_t>(n));
    return true;
}

// Engine params from the common options (-t, --backend, --kv-type).
bool engine_params(const Args &a, ember_engine_params *ep) {
    ember_engine_params_init(ep);
    ep->n_threads = static_cast<uint32_t>(a.integer("-t", 0));
    return backend_option(a, &ep->backend) && kv_type_option(a, "--kv-type", &ep->kv_type) &&
           placement_options(a, &ep->gpu_layers, &ep->experts_on_cpu, &ep->gpu_budget_bytes);
}

// The CPU threads an engine made from `a` runs (-t, or the library's default for 0).
long engine_threads(const Args &a) {
    const long t = a.integer("-t", 0);
    return t > 0 ? t : static_cast<long>(ember_default_thread_count());
}

bool greedy(ember_session *s, ember_sampler *sampler, ember_token *out) {
    const float *logits = nullptr;
    size_t n = 0;
    ember_status st = ember_session_logits(s, &logits, &n);
    if (st == EMBER_OK) st = ember_sampler_sample(sampler, logits, n, out);
    if (st != EMBER_OK) return fail("sample", st), false;
    return true;
}
} // namespace

namespace {
// --parallel N: N requests with different prompts of P tokens run through one engine at once. Reports
// the aggregate decode rate (N * G tokens over the time from the last first token to the end) and the
// mean time to first token. With --mtp or --lookup (--draft-k K) every request speculates, and the
// drafts and accepted ones of all requests are reported too.
int bench_parallel(const Args &a, const std::string &model_path, long P, long G, long N) {
    if (a.has("--draft")) return usage_error("bench: --parallel speculates with --mtp or --lookup (an engine takes no draft model)");
    const double t_load0 = now();
    ember_model *model = load_model(model_path, false, false);
    if (!model) return 1;
    ember_engine_params ep;
    if (!engine_params(a, &ep)) return ember_model_free(model), 2;
    ep.n_seq_max = static_cast<uint32_t>(N);
    const bool mtp = a.flag("--mtp"), lookup = a.flag("--lookup");
    if (mtp && lookup) return usage_error("bench: --lookup and --mtp exclude each other"), ember_model_free(model), 2;
    ep.speculation = mtp ? EMBER_SPEC_MTP : lookup ? EMBER_SPEC_LOOKUP : EMBER_SPEC_OFF;
    ep.spec_k = static_cast<uint32_t>(a.integer("--draft-k", 4));
    ep.n_ctx = static_cast<uint32_t>(a.integer("-c", ((P + G + 8 + 255) / 256) * 256));
    ember_engine *engine = nullptr;
    ember_status st = ember_engine_create(model, &ep, &engine);
    if (st != EMBER_OK) return fail("cannot create engine", st), ember_model_free(model), 1;
    const double load_s = now() - t_load0;

    // A different first word per request, so no request reuses another's prompt blocks.
    std::vector<std::vector<ember_token>> prompts(static_cast<size_t>(N));
    for (long i = 0; i < N; ++i)
        if (!bench_prompt(model, a, P, i, prompts[static_cast<size_t>(i)]))
            return ember_engine_free(engine), ember_model_free(model), 1;
    // Times come from the streaming callback (on the engine's thread) and the main thread blocks in
    // ember_request_wait: a polling loop here would compete with the engine's threads for the cores.
    struct Track {
        double first = 0;
        size_t n = 0;
    };
    std::vector<Track> track(static_cast<size_t>(N));
    auto on_token = [](ember_request *, ember_token, const char *, size_t, void *ud) {
        Track *t = static_cast<Track *>(ud);
        if (t->n++ == 0) t->first = now();
        return true;
    };
    {
        // Warm-up, as the single-sequence bench does: first touches of weights and of the threads' caches
        // are not charged to the measured run. Its prompt shares no full block with the measured ones.
        std::vector<ember_token> warm(prompts[0].rbegin(), prompts[0].rend());
        ember_request_params rp;
        ember_request_params_init(&rp);
        rp.prompt = warm.data();
        rp.n_prompt = warm.size();
        rp.max_tokens = 8;
        ember_request *r = nullptr;
        if (ember_request_submit(engine, &rp, &r) == EMBER_OK) ember_request_wait(r, UINT32_MAX);
        ember_request_free(r);
    }
    std::vector<ember_request *> reqs(static_cast<size_t>(N), nullptr);
    const double t0 = now();
    for (long i = 0; i < N; ++i) {
        ember_request_params rp;
        ember_request_params_init(&rp);
        rp.prompt = prompts[static_cast<size_t>(i)].data();
        rp.n_prompt = prompts[static_cast<size_t>(i)].size();
        rp.max_tokens = static_cast<uint32_t>(G);
        rp.on_token = on_token;
        rp.user_data = &track[static_cast<size_t>(i)];
        if ((st = ember_request_submit(engine, &rp, &reqs[static_cast<size_t>(i)])) != EMBER_OK) {
            fail("submit", st);
            break;
        }
    }
    for (ember_request *r : reqs)
        if (r) ember_request_wait(r, UINT32_MAX);
    const double t_end = now();
    size_t generated = 0;
    double last_first = t0, ttft = 0;
    uint64_t drafted = 0, accepted = 0, steps = 0;
    for (long i = 0; i < N; ++i) {
        const Track &t = track[static_cast<size_t>(i)];
        generated += t.n;
        last_first = std::max(last_first, t.first);
        ttft += t.first - t0;
        ember_request_stats rs;
        ember_request_stats_init(&rs);
        if (ember_request_get_stats(reqs[static_cast<size_t>(i)], &rs) == EMBER_OK)
            drafted += rs.drafted, accepted += rs.accepted, steps += rs.decode_steps;
        ember_request_free(reqs[static_cast<size_t>(i)]);
    }
    char spec_json[256] = "";
    if (ep.speculation != EMBER_SPEC_OFF)
        std::snprintf(spec_json, sizeof spec_json, "\"speculation\":\"%s\",\"draft_k\":%u,\"drafted\":%llu,\"accepted\":%llu,\"acceptance\":%.3f,"
                        "\"tokens_per_step\":%.3f,", mtp ? "mtp" : "lookup", ep.spec_k, (unsigned long long)drafted,
                        (unsigned long long)accepted, drafted ? static_cast<double>(accepted) / drafted : 0.0,
                        steps ? static_cast<double>(generated - static_cast<size_t>(N)) / steps : 0.0);
    struct rusage ru {};
    getrusage(RUSAGE_SELF, &ru);
    std::printf("{\"runtime\":\"ember\",\"version\":\"%s\",\"model\":\"%s\",%s\"threads\":%ld,\"parallel\":%ld,%s"
                "\"prompt_tokens\":%ld,\"gen_tokens\":%ld,\"generated_total\":%zu,\"decode_tok_s_total\":%.2f,"
                "\"mean_ttft_s\":%.4f,\"wall_s\":%.3f,\"load_s\":%.3f,\"peak_rss_mb\":%.1f}\n",
                ember_version(), model_path.c_str(), backend_json(engine).c_str(), engine_threads(a), N, spec_json, P, G,
                generated,
                (generated - static_cast<size_t>(N)) / std::max(1e-9, t_end - last_first), ttft / N, t_end - t0, load_s,
                ru.ru_maxrss / 1024.0);
    ember_engine_free(engine);
    ember_model_free(model);
    return st == EMBER_OK ? 0 : 1;
}
// --prefix-reuse: two requests whose prompts share their first P tokens, one after the other. The second
// adopts the first's cached KV blocks; reports both times to first token.
int bench_prefix_reuse(const Args &a, const std::string &model_path, long P) {
    ember_model *model = load_model(model_path, false, false);
    if (!model) return 1;
    ember_engine_params ep;
    if (!engine_params(a, &ep)) return ember_model_free(model), 2;
    ep.n_ctx = static_cast<uint32_t>(a.integer("-c", ((P + 64 + 255) / 256) * 256));
    ep.n_batch = 512;
    ember_engine *engine = nullptr;
    ember_status st = ember_engine_create(model, &ep, &engine);
    if (st != EMBER_OK) return fail("cannot create engine", st), ember_model_free(model), 1;
    std::vector<ember_token> prompt;
    if (!bench_prompt(model, a, P + 1, -1, prompt)) return ember_engine_free(engine), ember_model_free(model), 1;
    double ttft[2] = {0, 0};
    for (int i = 0; i < 2 && st == EMBER_OK; ++i) {
        std::vector<ember_token> p = prompt;
        p.back() = prompt[static_cast<size_t>(i + 1)];  // a different last token: a new turn on the same prefix
        ember_request_params rp;
        ember_request_params_init(&rp);
        rp.prompt = p.data();
        rp.n_prompt = p.size();
        rp.max_tokens = 1;
        ember_request *r = nullptr;
        const double t0 = now();
        if ((st = ember_request_submit(engine, &rp, &r)) != EMBER_OK) break;
        ember_request_wait(r, UINT32_MAX);
        ttft[i] = now() - t0;
        ember_request_free(r);
    }
    if (st != EMBER_OK) fail("prefix reuse", st);
    else
        std::printf("{\"runtime\":\"ember\",\"model\":\"%s\",\"threads\":%ld,\"shared_prefix_tokens\":%ld,"
                    "\"ttft_first_s\":%.4f,\"ttft_second_s\":%.4f,\"ratio\":%.4f}\n",
                    model_path.c_str(), engine_threads(a), P, ttft[0], ttft[1], ttft[1] / ttft[0]);
    ember_engine_free(engine);
    ember_model_free(model);
    return st == EMBER_OK ? 0 : 1;
}
} // namespace

namespace {
struct RunResult {
    double prefill_s = 0, decode_s = 0;
    ember_token first = 0;
    std::vector<ember_token> out;   // the decoded tokens, after the first
};

// One run on s from an empty context: prefill the prompt and sample the first token, then n_gen tokens
// through ember_generate (which speculates when speculation is attached; its first token comes from the
// logits prefill left, so n_gen + 1 tokens cost n_gen steps).
bool bench_run(ember_session *s, ember_sampler *sampler, const std::vector<ember_token> &prompt, uint32_t n_gen, RunResult &r) {
    ember_sampler_reset(sampler);
    ember_status st = ember_session_truncate(s, 0);
    const double t0 = now();
    if (st == EMBER_OK) st = ember_session_feed(s, prompt.data(), prompt.size());
    if (st != EMBER_OK) return fail("prefill", st), false;
    if (!greedy(s, sampler, &r.first)) return false;
    const double t1 = now();
    ember_sampler_reset(sampler);
    r.out.clear();
    ember_generate_params gp;
    ember_generate_params_init(&gp);
    gp.max_tokens = n_gen + 1;
    gp.user_data = &r.out;
    gp.on_token = [](ember_token t, const char *, size_t, void *ud) {
        static_cast<std::vector<ember_token> *>(ud)->push_back(t);
        return true;
    };
    // Bench text is arbitrary: end-of-generation tokens do not stop it, they are just counted.
    while (r.out.size() < gp.max_tokens) {
        gp.max_tokens -= static_cast<uint32_t>(r.out.size());
        const size_t before = r.out.size();
        st = ember_generate(s, sampler, &gp, nullptr);
        gp.max_tokens += static_cast<uint32_t>(before);
        if (st < 0) return fail("decode", st), false;
        if (st != EMBER_END_OF_GENERATION) break;
        ember_session_feed(s, &r.out.back(), 1);  // carry on past it, as the peer does
    }
    r.prefill_s = t1 - t0;
    r.decode_s = now() - t1;
    if (!r.out.empty()) r.out.erase(r.out.begin());   // the token prefill already sampled
    return true;
}

// The threads the session started (0 on a GPU backend), as the library resolved -t.
long session_threads(const ember_session *s) {
    uint32_t n = 0;
    ember_session_backend(s, nullptr, &n);
    return static_cast<long>(n);
}

} // namespace

bool bench_sampler_params(const Args &a, ember_sampler_params *sp) {
    ember_sampler_params_init(sp);
    sp->temperature = static_cast<float>(a.number("--temp", 0.0));
    sp->top_k = static_cast<int32_t>(a.integer("--top-k", 40));
    sp->top_p = static_cast<float>(a.number("--top-p", 1.0));
    sp->min_p = static_cast<float>(a.number("--min-p", 0.0));
    sp->repeat_penalty = static_cast<float>(a.number("--repeat-penalty", 1.0));
    sp->seed = static_cast<uint64_t>(a.integer("--seed", 1));
    ember_sampler *probe = nullptr;
    if (ember_sampler_create(sp, &probe) != EMBER_OK) {
        std::fprintf(stderr, "ember: bench: %s\n", ember_last_error());
        return false;
    }
    ember_sampler_free(probe);
    return true;
}

namespace {
double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
} // namespace

int cmd_bench(int argc, char **argv) {
    const Args a = parse(argc, argv, 2, {"-m", "--model", "-t", "-p", "-n", "-c", "--backend", "--kv-type", "--parallel", EMBER_CLI_PLACEMENT_OPTIONS,
                                        "--draft", "--draft-k", "--temp", "--seed", "--text", "--rounds", "--background-load",
                                        "--json-schema", "--grammar", "--grammar-vocab", "--top-k", "--top-p", "--min-p",
                                        "--repeat-penalty", "--precision"},
                            {"--prefix-reuse", "--lookup", "--mtp", "--draft-fixed", "--fresh-grammar"});
    const std::string model_path = a.has("--model") ? a.str("--model", "") : a.str("-m", "");
    if (model_path.empty()) return usage_error("bench: -m MODEL is required");
    const long P = a.integer("-p", 128), G = a.integer("-n", 64), N = a.integer("--parallel", 0);
    if (P < 1 || G < 1) return usage_error("bench: -p and -n must be >= 1");
    if (N < 0 || N > 1024) return usage_error("bench: --parallel must be in 1..1024");
    const long busy = a.integer("--background-load", 0);
    if (busy < 0 || busy > 256) return usage_error("bench: --background-load must be in 0..256");
    const BackgroundLoad load(busy);  // N busy threads for the whole run, model load included
    if (a.flag("--prefix-reuse")) return bench_prefix_reuse(a, model_path, P);
    if (a.has("--json-schema") || a.has("--grammar")) return bench_grammar(a, model_path, G);
    if (N > 0) return bench_parallel(a, model_path, P, G, N);
    const bool speculating = a.has("--draft") || a.flag("--lookup") || a.flag("--mtp");
    const long rounds = a.integer("--rounds", speculating ? 3 : 1);
    if (rounds < 1 || rounds > 100) return usage_error("bench: --rounds must be in 1..100");
    Args sa = a;
    if (!a.has("-c")) sa.opts["-c"] = std::to_string(((P + G + 8 + 255) / 256) * 256);

    const double t_load0 = now();
    ember_model *model = load_model(model_path, false, false);
    if (!model) return 1;
    ember_session *s = create_session(model, sa);
    if (!s) return ember_model_free(model), 1;
    const double load_s = now() - t_load0;

    // Greedy by default; --temp T samples (top-k 40 unless --top-k says otherwise, the given --seed),
    // for speculation's sampled case.
    ember_sampler_params spp;
    if (!bench_sampler_params(a, &spp)) return ember_session_free(s), ember_model_free(model), 2;
    ember_sampler *sampler = nullptr;
    ember_model *draft = nullptr;
    ember_session *base = nullptr;   // with speculation: the same target without it, measured in turn
    std::vector<ember_token> prompt;
    int rc = 1;
    RunResult r, rb;
    std::vector<double> prefill, decode, base_decode, speedup;
    ember_spec_stats warm, ss;
    ember_spec_stats_init(&warm);
    ember_spec_stats_init(&ss);
    bool spec = false, same_tokens = true;
    if (ember_sampler_create(&spp, &sampler) != EMBER_OK) { fail("bad --temp", EMBER_ERR_INVALID_ARGUMENT); goto done; }
    if (!attach_speculation(s, sa, &draft)) goto done;
    if (speculating && !(base = create_session(model, sa))) goto done;
    if (!bench_prompt(model, a, P, -1, prompt)) goto done;

    // A warm-up run each (page faults, first touch), then the measured rounds, alternating the plain
    // session and the speculating one so that both see the same machine (a shared one drifts).
    if (!bench_run(s, sampler, prompt, 1, r) || (base && !bench_run(base, sampler, prompt, 1, rb))) goto done;
    spec = ember_session_spec_stats(s, &warm) == EMBER_OK;
    for (long i = 0; i < rounds; ++i) {
        if (base) {
            if (!bench_run(base, sampler, prompt, static_cast<uint32_t>(G), rb)) goto done;
            base_decode.push_back(G / rb.decode_s);
        }
        if (!bench_run(s, sampler, prompt, static_cast<uint32_t>(G), r)) goto done;
        prefill.push_back(P / r.prefill_s);
        decode.push_back(G / r.decode_s);
        if (base) {
            speedup.push_back(rb.decode_s / r.decode_s);
            same_tokens = same_tokens && rb.first == r.first && rb.out == r.out;
        }
    }
    if (spec) ember_session_spec_stats(s, &ss);
    {
        struct rusage ru {};
        getrusage(RUSAGE_SELF, &ru);
        ember_model_info info;
        ember_model_info_init(&info);
        ember_model_get_info(model, &info);
        uint32_t n_ctx = 0;
        ember_session_context_length(s, &n_ctx);
        std::printf("{\"runtime\":\"ember\",\"version\":\"%s\",\"model\":\"%s\",\"architecture\":\"%s\",%s\"threads\":%ld,"
                    "\"context_size\":%u,\"kv_type\":\"%s\",\"precision\":\"%s\",\"prompt_tokens\":%ld,\"gen_tokens\":%ld,\"temperature\":%g,"
                    "\"rounds\":%ld,\"prefill_tok_s\":%.2f,\"decode_tok_s\":%.2f,\"load_s\":%.3f,\"peak_rss_mb\":%.1f,",
                    ember_version(), model_path.c_str(), info.architecture, backend_json(s).c_str(), session_threads(s), n_ctx,
                    a.str("--kv-type", "f16").c_str(), a.str("--precision", "default").c_str(), P, G, spp.temperature, rounds, median(prefill), median(decode), load_s,
                    ru.ru_maxrss / 1024.0);
        if (spec) {
            // Medians over the rounds; the speedup is the median of each round's ratio to the plain
            // session's run just before it. With sampling both draw from the same seed, but speculation
            // consumes random numbers differently, so only greedy output is expected to be identical.
            const double drafted = static_cast<double>(ss.drafted - warm.drafted);
            const double passes = static_cast<double>(ss.target_passes - warm.target_passes);
            std::printf("\"speculation\":{\"mode\":\"%s\",\"k_final\":%u,\"drafted\":%.0f,\"acceptance_rate\":%.4f,"
                        "\"tokens_per_target_pass\":%.3f,\"baseline_decode_tok_s\":%.2f,\"speedup\":%.3f,"
                        "\"same_tokens_as_baseline\":%s},",
                        a.flag("--mtp") ? "mtp" : a.flag("--lookup") ? "lookup" : "draft", ss.k, drafted,
                        drafted > 0 ? static_cast<double>(ss.accepted - warm.accepted) / drafted : 0.0,
                        passes > 0 ? static_cast<double>(ss.generated - warm.generated) / passes : 0.0, median(base_decode),
                        median(speedup), same_tokens ? "true" : "false");
        }
        std::printf("\"first_token\":%d,\"decode_tokens\":[", r.first);
        for (size_t i = 0; i < r.out.size(); ++i) std::printf(i ? ",%d" : "%d", r.out[i]);
        std::printf("]}\n");
        rc = 0;
    }
done:
    ember_sampler_free(sampler);
    ember_session_free(base);
    ember_session_free(s);
    ember_model_free(draft);
    ember_model_free(model);
    return rc;
}

} // namespace cli
