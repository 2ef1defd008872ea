// cmd_run.cpp — `ember run`: print the prompt, stream the continuation.
#include "cli.hpp"

#include <chrono>
#include <cstdio>
#include <random>

namespace cli {

namespace {
struct StreamState {
    size_t n = 0;
    ember_chat_parser *parser = nullptr;   // --tools: the reply goes through it
};
bool on_token(ember_token, const char *text, size_t len, void *ud) {
    StreamState &s = *static_cast<StreamState *>(ud);
    s.n++;
    if (s.parser) return tools_print(s.parser, text, len, false), true;
    std::fwrite(text, 1, len, stdout);
    std::fflush(stdout);
    return true;
}
} // namespace

int cmd_run(int argc, char **argv) {
    const Args a = parse(argc, argv, 2,
                         {"-m", "--model", "-p", "--prompt", "-n", "--n-predict", "--temp", "--seed", "--top-k",
                          "--top-p", "--min-p", "--repeat-penalty", "--repeat-last-n", "--frequency-penalty",
                          "--presence-penalty", "-t", "--threads", "-c", "--ctx-size", "--backend", "--kv-type", "--precision", "--draft",
                          "--draft-k", "--grammar", "--json-schema", "--stop", "--tools", "--tool-choice",
                          "--chat-template", EMBER_CLI_PLACEMENT_OPTIONS},
                         {"--no-bos", "--special", "--stats", "--lookup", "--mtp", "--draft-fixed"});
    auto alias = [&](const char *s, const char *l) { return a.has(l) ? a.str(l, "") : a.str(s, ""); };
    const std::string model_path = alias("-m", "--model");
    if (model_path.empty()) return usage_error("run: -m MODEL is required");
    if (!a.has("-p") && !a.has("--prompt")) return usage_error("run: -p PROMPT is required");
    std::string prompt = alias("-p", "--prompt");
    if (a.has("--tools") && (a.has("--grammar") || a.has("--json-schema")))
        return usage_error("run: --tools brings its own grammar: not with --grammar or --json-schema");
    Args sa = a;  // session options under their short names
    if (a.has("--threads")) sa.opts["-t"] = a.str("--threads", "");
    if (a.has("--ctx-size")) sa.opts["-c"] = a.str("--ctx-size", "");
    const long n_predict = a.has("--n-predict") ? a.integer("--n-predict", 128) : a.integer("-n", 128);
    if (n_predict < 0) return usage_error("run: -n must be >= 0");

    ember_sampler_params sp;
    ember_sampler_params_init(&sp);
    sp.temperature = static_cast<float>(a.number("--temp", 0.8));
    sp.top_k = static_cast<int32_t>(a.integer("--top-k", 40));
    sp.top_p = static_cast<float>(a.number("--top-p", 0.95));
    sp.min_p = static_cast<float>(a.number("--min-p", 0.05));
    sp.repeat_penalty = static_cast<float>(a.number("--repeat-penalty", 1.0));
    sp.penalty_last_n = static_cast<int32_t>(a.integer("--repeat-last-n", 64));
    sp.frequency_penalty = static_cast<float>(a.number("--frequency-penalty", 0.0));
    sp.presence_penalty = static_cast<float>(a.number("--presence-penalty", 0.0));
    sp.seed = a.has("--seed") ? static_cast<uint64_t>(a.integer("--seed", 0)) : std::random_device{}();
    ember_sampler *sampler = nullptr;
    ember_status st = ember_sampler_create(&sp, &sampler);
    if (st != EMBER_OK) return fail("bad sampling options", st);

    int rc = 1;
    ember_model *model = load_model(model_path, false, true);
    ember_session *session = nullptr;
    ember_model *draft = nullptr;
    ember_grammar *grammar = nullptr;
    ToolRun tools;
    const std::vector<std::string> stops = a.all("--stop");
    std::vector<const char *> stop_ptrs;
    for (const std::string &s : stops) stop_ptrs.push_back(s.c_str());
    std::vector<ember_token> tokens;
    uint32_t flags = (a.flag("--no-bos") ? 0u : EMBER_TOKENIZE_ADD_SPECIAL) |
                     (a.flag("--special") ? EMBER_TOKENIZE_PARSE_SPECIAL : 0u);
    if (model && a.has("--tools")) {
        // The prompt is the user's message, rendered with the tools; the template writes the specials.
        if (!tools_option(a, model, prompt, &tools)) goto done;
        prompt = tools.prompt;
        flags = EMBER_TOKENIZE_PARSE_SPECIAL;
    }
    if (model && grammar_option(a, model, &grammar) && (session = create_session(model, sa)) &&
        attach_speculation(session, sa, &draft) && tokenize(model, prompt, flags, tokens)) {
        if (tokens.empty()) {
            // Nothing to condition on: start from BOS if the model has one.
            if (ember_token_bos(model) < 0) {
                std::fprintf(stderr, "ember: the prompt is empty and the model has no BOS token\n");
                goto done;
            }
            tokens.push_back(ember_token_bos(model));
        }
        std::fwrite(prompt.data(), 1, prompt.size(), stdout);
        std::fflush(stdout);
        const auto t0 = std::chrono::steady_clock::now();
        st = feed_prompt(session, tokens);
        if (st != EMBER_OK) {
            fail("prompt", st);
            goto done;
        }
        const auto t1 = std::chrono::steady_clock::now();
        StreamState state;
        ember_generate_params gp;
        ember_generate_params_init(&gp);
        gp.max_tokens = static_cast<uint32_t>(n_predict);
        gp.on_token = on_token;
        gp.user_data = &state;
        gp.grammar = tools.grammar ? tools.grammar : grammar;
        state.parser = tools.parser;
        gp.stop = stop_ptrs.data();
        gp.n_stop = stop_ptrs.size();
        st = n_predict > 0 ? ember_generate(session, sampler, &gp, nullptr) : EMBER_OK;
        const auto t2 = std::chrono::steady_clock::now();
        if (tools.parser) tools_print(tools.parser, nullptr, 0, true);
        std::printf("\n");
        if (st < 0 && st != EMBER_ERR_CONTEXT_FULL) {
            fail("generation", st);
            goto done;
        }
        if ((grammar || tools.grammar) && st == EMBER_OK)
            std::fprintf(stderr, "ember: stopped at -n %ld tokens: the output may be incomplete for the grammar\n", n_predict);
        if (st == EMBER_ERR_CONTEXT_FULL) std::fprintf(stderr, "ember: stopped: the context is full\n");
        if (a.flag("--stats")) {
            const double tp = std::chrono::duration<double>(t1 - t0).count();
            const double tg = std::chrono::duration<double>(t2 - t1).count();
            std::fprintf(stderr, "prompt: %zu tokens, %.1f tok/s; generated: %zu tokens, %.1f tok/s\n", tokens.size(),
                         tokens.size() / tp, state.n, state.n / (tg > 0 ? tg : 1));
            std::fprintf(stderr, "backend: %s\n", session_backend_text(session).c_str());
            ember_spec_stats ss;
            ember_spec_stats_init(&ss);
            if (ember_session_spec_stats(session, &ss) == EMBER_OK)
                std::fprintf(stderr, "speculation: %llu drafted, %llu accepted (%.1f %%), %.2f tokens per target pass, k now %u\n",
                             (unsigned long long)ss.drafted, (unsigned long long)ss.accepted, 100 * ss.acceptance_rate,
                             ss.tokens_per_pass, ss.k);
        }
        rc = 0;
    }
done:
    ember_session_free(session);
    ember_model_free(draft);
    ember_model_free(model);
    ember_sampler_free(sampler);
    ember_grammar_free(grammar);
    return rc;
}

} // namespace cli
