// bench_grammar.cpp — `ember bench --json-schema FILE` (or --grammar FILE): what a grammar costs per
// generated token, as a share of a decode step.
//
// Each step samples the same logits twice: with a plain sampler, and with a sampler constrained by the
// grammar (plus its accept, which advances the grammar); the grammar's cost is the difference. The decode
// step is the forward pass of one token plus the plain sample. Round 1 meets every grammar state for the
// first time (its masks are computed: "first"); later rounds repeat the generation with the grammar's
// caches warm ("warm"), which is what a game loop asking for the same kind of JSON again and again sees.
// --grammar-vocab VOCAB.gguf builds the grammar for another (vocab-only) file's vocabulary of the same
// size, so that a synthetic model of a real shape is measured with a real vocabulary's token strings.
// --fresh-grammar compiles the grammar anew for every round, so that every round meets every state for
// the first time (all rounds count as "first": its cost over several rounds rather than one). The
// sampler is bench_sampler_params' (--temp, --top-k, --top-p, --min-p, --repeat-penalty, --seed);
// sample_ms is the plain sampler's own time per token, part of the decode step.
#include "cli.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

namespace cli {

namespace {
double seconds_now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

uint32_t n_vocab_of(const ember_model *m) {
    ember_model_info info;
    ember_model_info_init(&info);
    return ember_model_get_info(m, &info) == EMBER_OK ? info.n_vocab : 0;
}
} // namespace

int bench_grammar(const Args &a, const std::string &model_path, long G) {
    const long rounds = a.integer("--rounds", 4);
    if (rounds < 2) return usage_error("bench: --json-schema needs --rounds >= 2 (one cold, the rest warm)");
    int rc = 1;
    ember_model *model = load_model(model_path, false, false);
    ember_model *vocab_model = nullptr;
    ember_grammar *grammar = nullptr;
    ember_session *session = nullptr;
    std::vector<ember_token> prompt;
    double decode_s = 0, first_s = 0, warm_s = 0, sample_s = 0;
    const bool fresh = a.flag("--fresh-grammar");
    ember_sampler_params sp;
    size_t decode_n = 0, first_n = 0, warm_n = 0, completed = 0;
    if (!model) return 1;
    if (!bench_sampler_params(a, &sp)) goto done;
    if (a.has("--grammar-vocab") && !(vocab_model = load_model(a.str("--grammar-vocab", ""), true, false))) goto done;
    if (vocab_model && n_vocab_of(vocab_model) != n_vocab_of(model)) {
        std::fprintf(stderr, "ember: --grammar-vocab has %u tokens, the model %u\n", n_vocab_of(vocab_model), n_vocab_of(model));
        goto done;
    }
    {
        const double t0 = seconds_now();
        if (!grammar_option(a, vocab_model ? vocab_model : model, &grammar)) goto done;
        const double compile_s = seconds_now() - t0;
        if (!(session = create_session(model, a)) || !tokenize(model, "Once upon a time", EMBER_TOKENIZE_ADD_SPECIAL, prompt))
            goto done;
        if (prompt.empty()) prompt.push_back(0);
        ember_status st = ember_session_feed(session, prompt.data(), prompt.size());
        if (st != EMBER_OK) { fail("prompt", st); goto done; }
        const ember_model *vm = vocab_model ? vocab_model : model;
        for (long r = 0; r < rounds; ++r) {
            const bool first = r == 0 || fresh;
            if (r > 0 && fresh) {
                ember_grammar_free(grammar);
                grammar = nullptr;
                if (!grammar_option(a, vm, &grammar)) goto done;
            }
            // Back to the prompt's logits: drop its last token and feed it again.
            ember_session_truncate(session, static_cast<uint32_t>(prompt.size() - 1));
            if ((st = ember_session_feed(session, &prompt.back(), 1)) != EMBER_OK) { fail("prompt", st); goto done; }
            ember_sampler *plain = nullptr, *constrained = nullptr;
            ember_sampler_create(&sp, &plain);
            ember_sampler_create(&sp, &constrained);
            ember_sampler_set_grammar(constrained, grammar);
            for (long i = 0; i < G; ++i) {
                const float *logits;
                size_t n_vocab;
                ember_session_logits(session, &logits, &n_vocab);
                ember_token tok_plain, tok;
                const double u0 = seconds_now();
                ember_sampler_sample(plain, logits, n_vocab, &tok_plain);
                const double u1 = seconds_now();
                st = ember_sampler_sample(constrained, logits, n_vocab, &tok);
                if (st == EMBER_OK) st = ember_sampler_accept(constrained, tok);
                const double c1 = seconds_now();
                if (st != EMBER_OK) { fail("constrained sampling", st); break; }
                const double extra = (c1 - u1) - (u1 - u0);
                (first ? first_s : warm_s) += extra;
                ++(first ? first_n : warm_n);
                if (ember_token_is_eog(vm, tok)) { ++completed; break; }
                const double f0 = seconds_now();
                if ((st = ember_session_feed(session, &tok, 1)) != EMBER_OK) { fail("decode", st); break; }
                decode_s += seconds_now() - f0 + (u1 - u0);
                sample_s += u1 - u0;
                ++decode_n;
            }
            ember_sampler_free(plain);
            ember_sampler_free(constrained);
            if (st != EMBER_OK) goto done;
        }
        const double step_ms = decode_n ? 1e3 * decode_s / decode_n : 0;
        const double first_ms = first_n ? 1e3 * first_s / first_n : 0, warm_ms = warm_n ? 1e3 * warm_s / warm_n : 0;
        std::printf("{\"model\":\"%s\",\"grammar\":\"%s\",\"grammar_vocab\":\"%s\",\"n_vocab\":%u,\"temp\":%.2f,\"top_k\":%d,"
                    "\"top_p\":%.3f,\"min_p\":%.3f,\"rounds\":%ld,\"fresh_grammar\":%s,"
                    "\"compile_ms\":%.2f,\"decode_step_ms\":%.3f,\"sample_ms\":%.4f,\"grammar_ms_first\":%.4f,\"grammar_ms_warm\":%.4f,"
                    "\"overhead_pct_first\":%.2f,\"overhead_pct_warm\":%.2f,\"tokens_first\":%zu,\"tokens_warm\":%zu,"
                    "\"rounds_completed\":%zu}\n",
                    model_path.c_str(), a.str(a.has("--grammar") ? "--grammar" : "--json-schema", "").c_str(),
                    a.str("--grammar-vocab", model_path).c_str(), n_vocab_of(model), sp.temperature, sp.top_k, sp.top_p,
                    sp.min_p, rounds, fresh ? "true" : "false", 1e3 * compile_s, step_ms, decode_n ? 1e3 * sample_s / decode_n : 0, first_ms, warm_ms, step_ms > 0 ? 100 * first_ms / step_ms : 0,
                    step_ms > 0 ? 100 * warm_ms / step_ms : 0, first_n, warm_n, completed);
        rc = 0;
    }
done:
    ember_session_free(session);
    ember_grammar_free(grammar);
    ember_model_free(vocab_model);
    ember_model_free(model);
    return rc;
}

} // namespace cli
