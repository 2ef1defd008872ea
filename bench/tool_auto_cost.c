/* tool_auto_cost.c — `ember-tool-auto-cost`: what tool_choice auto's lazy grammar costs per decoded token
 * (docs/tools.md, docs/benchmarks.md "Structured output").
 *
 *   ember-tool-auto-cost MODEL [TOKENS [ROUNDS [TOP_K [THREADS]]]]
 *
 * Four generations per round, in turn, so that a change of load hits all of them alike: "plain" (no
 * grammar) and "auto-free" (Hermes tool_choice auto, whose opener a story model never writes: the same
 * tokens, the grammar waiting for its trigger) from the same prompt and seed; then "auto-call" (the
 * opener <tool_call> forced after the prompt, split over the model's tokens, and the call sampled under
 * the grammar until its end) and "plain-call" (the same prompt and opener, as many steps without a
 * grammar). A step is sample + accept + the forward pass of the token, timed whole; the sample + accept
 * part is also reported alone. Sampling is at temperature 1 with seed 1 and TOP_K (default 0: none). A
 * first auto-call is the grammar's first use ("cold": its masks were computed when it was created, whose
 * time is printed first, but the call's DFA steps and caches are met for the first time); then each round runs the four in turn, the pairs' order reversed every other round, with the
 * masks cached (warm). One JSON line per round and generation, then the medians and the ratios
 * auto-free / plain and auto-call / plain-call (per round, then their median). */
#include <ember/ember.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int check(ember_status st, const char *what) {
    if (st >= 0) return 0;
    fprintf(stderr, "ember-tool-auto-cost: %s: %s: %s\n", what, ember_status_string(st), ember_last_error());
    return 1;
}

static const char kTools[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"open_door\", \"parameters\": {\"type\": \"object\", \"properties\": "
    "{\"door\": {\"type\": \"string\", \"enum\": [\"north\", \"south\", \"east\"]}}, \"required\": [\"door\"]}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"say\", \"parameters\": {\"type\": \"object\", \"properties\": "
    "{\"text\": {\"type\": \"string\", \"minLength\": 1, \"maxLength\": 40}, \"mood\": {\"type\": \"string\", \"enum\": "
    "[\"calm\", \"angry\"]}}, \"required\": [\"text\"]}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"walk\", \"parameters\": {\"type\": \"object\", \"properties\": "
    "{\"x\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 63}, \"y\": {\"type\": \"integer\", \"minimum\": 0, "
    "\"maximum\": 63}, \"run\": {\"type\": \"boolean\"}}, \"required\": [\"x\", \"y\"]}}}]";

enum { kPlain, kAutoFree, kAutoCall, kPlainCall, kRuns };
static const char *const kNames[kRuns] = {"plain", "auto-free", "auto-call", "plain-call"};

typedef struct {
    double step_s, sample_s;
    int n;
} Timing;

/* Feeds prompt (+ opener, accepted by the sampler too), then runs up to max_tokens steps; with stop_at_end,
 * the generation stops at an end token (the call's end), else every sampled token is fed. */
static int g_top_k;

static int run(ember_model *model, ember_session *session, const ember_grammar *grammar, const ember_token *prompt,
               size_t n_prompt, const ember_token *opener, size_t n_opener, int max_tokens, int stop_at_end, Timing *out) {
    ember_sampler_params p;
    ember_sampler_params_init(&p);
    p.temperature = 1.0f;
    p.seed = 1;
    p.top_k = g_top_k;
    ember_sampler *s;
    if (check(ember_sampler_create(&p, &s), "sampler")) return 1;
    if (grammar && check(ember_sampler_set_grammar(s, grammar), "grammar")) return 1;
    ember_session_truncate(session, 0);
    if (check(ember_session_feed(session, prompt, n_prompt), "prompt")) return 1;
    if (n_opener) {
        for (size_t i = 0; i < n_opener; ++i)
            if (check(ember_sampler_accept(s, opener[i]), "opener")) return 1;
        if (check(ember_session_feed(session, opener, n_opener), "opener")) return 1;
    }
    memset(out, 0, sizeof *out);
    for (int i = 0; i < max_tokens; ++i) {
        const float *logits;
        size_t n_vocab;
        ember_session_logits(session, &logits, &n_vocab);
        ember_token tok;
        const double t0 = now_s();
        if (check(ember_sampler_sample(s, logits, n_vocab, &tok), "sample")) return 1;
        if (check(ember_sampler_accept(s, tok), "accept")) return 1;
        const double t1 = now_s();
        if (stop_at_end && ember_token_is_eog(model, tok)) break;
        if (check(ember_session_feed(session, &tok, 1), "decode")) return 1;
        const double t2 = now_s();
        out->sample_s += t1 - t0;
        out->step_s += t2 - t0;
        ++out->n;
    }
    ember_sampler_free(s);
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: ember-tool-auto-cost MODEL [TOKENS [ROUNDS [TOP_K [THREADS]]]]\n");
        return 2;
    }
    const int n_tokens = argc > 2 ? atoi(argv[2]) : 128;
    const int rounds = argc > 3 ? atoi(argv[3]) : 9;
    if (n_tokens < 1 || rounds < 1 || rounds > 64) {
        fprintf(stderr, "ember-tool-auto-cost: TOKENS >= 1 and ROUNDS in 1..64\n");
        return 2;
    }
    ember_model *model;
    ember_model_params mp;
    ember_model_params_init(&mp);
    if (check(ember_model_load(argv[1], &mp, &model), "load")) return 1;
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.n_ctx = (uint32_t)n_tokens + 64;
    g_top_k = argc > 4 ? atoi(argv[4]) : 0;
    sp.n_threads = argc > 5 ? (uint32_t)atoi(argv[5]) : 2;
    ember_session *session;
    if (check(ember_session_create(model, &sp, &session), "session")) return 1;

    ember_tool_grammar_params gp;
    ember_tool_grammar_params_init(&gp);
    gp.format = EMBER_CHAT_FORMAT_HERMES;
    gp.tools_json = kTools;
    gp.choice = EMBER_TOOL_CHOICE_AUTO;
    gp.parallel = false;   /* the reply ends after the call */
    ember_grammar *grammar;
    const double t_grammar = now_s();
    if (check(ember_chat_tool_grammar(model, &gp, &grammar), "tool grammar")) return 1;
    printf("{\"grammar_create_ms\":%.3f}\n", 1e3 * (now_s() - t_grammar));

    ember_token prompt[64], opener[32];
    size_t n_prompt = 0, n_opener = 0;
    const char *text = "Once upon a time, the knight";
    if (check(ember_tokenize(model, text, strlen(text), EMBER_TOKENIZE_ADD_SPECIAL, prompt, 64, &n_prompt), "tokenize")) return 1;
    if (check(ember_tokenize(model, "<tool_call>", 11, 0, opener, 32, &n_opener), "tokenize")) return 1;

    Timing cold;
    if (run(model, session, grammar, prompt, n_prompt, opener, n_opener, n_tokens, 1, &cold)) return 1;
    const int n_call = cold.n;   /* the same seed writes the same call every time */
    printf("{\"round\":\"cold\",\"run\":\"auto-call\",\"tokens\":%d,\"step_ms\":%.4f,\"sample_accept_ms\":%.4f}\n", cold.n,
           1e3 * cold.step_s / (cold.n ? cold.n : 1), 1e3 * cold.sample_s / (cold.n ? cold.n : 1));
    double step[kRuns][64], sample[kRuns][64], ratio_free[64], ratio_call[64];
    for (int r = 0; r < rounds; ++r) {
        Timing t[kRuns];
        const int flip = r % 2;
        for (int j = 0; j < 2; ++j) {
            const int free_run = (j ^ flip) ? kAutoFree : kPlain, call_run = (j ^ flip) ? kAutoCall : kPlainCall;
            if (run(model, session, free_run == kAutoFree ? grammar : NULL, prompt, n_prompt, NULL, 0, n_tokens, 0, &t[free_run]) ||
                run(model, session, call_run == kAutoCall ? grammar : NULL, prompt, n_prompt, opener, n_opener, n_call,
                    call_run == kAutoCall, &t[call_run]))
                return 1;
        }
        for (int k = 0; k < kRuns; ++k) {
            step[k][r] = 1e3 * t[k].step_s / (t[k].n ? t[k].n : 1);
            sample[k][r] = 1e3 * t[k].sample_s / (t[k].n ? t[k].n : 1);
            printf("{\"round\":%d,\"run\":\"%s\",\"tokens\":%d,\"step_ms\":%.4f,\"sample_accept_ms\":%.4f}\n", r, kNames[k],
                   t[k].n, step[k][r], sample[k][r]);
        }
        ratio_free[r] = step[kAutoFree][r] / step[kPlain][r];
        ratio_call[r] = step[kAutoCall][r] / step[kPlainCall][r];
        fflush(stdout);
    }
    for (int k = 0; k < kRuns; ++k)
        printf("{\"run\":\"%s\",\"median_step_ms\":%.4f,\"median_sample_accept_ms\":%.4f}\n", kNames[k], median(step[k], rounds),
               median(sample[k], rounds));
    const double cold_ms = 1e3 * cold.step_s / (cold.n ? cold.n : 1), plain_call_ms = median(step[kPlainCall], rounds);
    printf("{\"top_k\":%d,\"auto_free_over_plain\":%.3f,\"auto_call_over_plain_call\":%.3f,\"cold_call_over_plain_call\":%.3f}\n",
           g_top_k, median(ratio_free, rounds), median(ratio_call, rounds), cold_ms / plain_call_ms);
    ember_grammar_free(grammar);
    ember_session_free(session);
    ember_model_free(model);
    return 0;
}
