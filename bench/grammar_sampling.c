/* grammar_sampling.c — `ember-grammar-sampling`: what a grammar costs per token for any sampler
 * settings, top_k 0 included (`ember bench --json-schema` samples with top-k 40 only).
 *
 *   ember-grammar-sampling MODEL VOCAB_MODEL SCHEMA.json [TOP_K [TEMP [TOKENS [ROUNDS]]]]
 *
 * The schema is compiled for VOCAB_MODEL's vocabulary (a vocab-only file of the same size: a synthetic
 * model of a real shape measured with a real vocabulary's token strings, like `ember bench
 * --grammar-vocab`). Each round feeds the prompt again and generates up to TOKENS tokens with a grammar
 * made afresh (round 1 of each grammar meets every state for the first time: "first"); each step samples
 * the same logits with a plain sampler and with a constrained one (plus its accept), and the grammar's
 * cost is the difference (negative where the constrained sampler skips work the plain one does; both
 * times are printed too). The decode step is the forward pass plus the plain sample. One JSON line per
 * round, so a caller can take medians over rounds run alternately with another build. */
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

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) buf[n] = 0, *len = (size_t)n;
    return buf;
}

static int check(ember_status st, const char *what) {
    if (st >= 0) return 0;
    fprintf(stderr, "ember-grammar-sampling: %s: %s: %s\n", what, ember_status_string(st), ember_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: ember-grammar-sampling MODEL VOCAB_MODEL SCHEMA.json [TOP_K [TEMP [TOKENS [ROUNDS]]]]\n");
        return 2;
    }
    const int top_k = argc > 4 ? atoi(argv[4]) : 0;
    const float temp = argc > 5 ? (float)atof(argv[5]) : 1.0f;
    const int n_tokens = argc > 6 ? atoi(argv[6]) : 64;
    const int rounds = argc > 7 ? atoi(argv[7]) : 2;
    size_t schema_len = 0;
    char *schema = read_file(argv[3], &schema_len);
    if (!schema) {
        fprintf(stderr, "ember-grammar-sampling: cannot read %s\n", argv[3]);
        return 1;
    }
    ember_model *model = NULL, *vocab = NULL;
    ember_model_params mp;
    ember_model_params_init(&mp);
    if (check(ember_model_load(argv[1], &mp, &model), "load")) return 1;
    mp.vocab_only = true;
    if (check(ember_model_load(argv[2], &mp, &vocab), "load vocab")) return 1;
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.n_ctx = 512;
    sp.n_threads = 2;
    ember_session *session;
    if (check(ember_session_create(model, &sp, &session), "session")) return 1;
    const ember_token prompt[] = {1, 2, 3, 4};
    for (int r = 0; r < rounds; ++r) {
        ember_grammar *grammar;
        if (check(ember_grammar_create_json_schema(vocab, schema, schema_len, &grammar), "schema")) return 1;
        ember_session_truncate(session, 0);
        if (check(ember_session_feed(session, prompt, 4), "prompt")) return 1;
        ember_sampler_params p;
        ember_sampler_params_init(&p);
        p.temperature = temp;
        p.top_k = top_k;
        p.seed = 1;
        ember_sampler *plain, *constrained;
        ember_sampler_create(&p, &plain);
        ember_sampler_create(&p, &constrained);
        ember_sampler_set_grammar(constrained, grammar);
        double grammar_s = 0, decode_s = 0, plain_s = 0, constrained_s = 0;
        int n = 0, complete = 0;
        for (; n < n_tokens; ++n) {
            const float *logits;
            size_t n_vocab;
            ember_session_logits(session, &logits, &n_vocab);
            ember_token plain_tok, tok;
            const double t0 = now_s();
            ember_sampler_sample(plain, logits, n_vocab, &plain_tok);
            const double t1 = now_s();
            ember_status st = ember_sampler_sample(constrained, logits, n_vocab, &tok);
            if (st == EMBER_OK) st = ember_sampler_accept(constrained, tok);
            const double t2 = now_s();
            if (check(st, "constrained sample")) return 1;
            grammar_s += (t2 - t1) - (t1 - t0);
            plain_s += t1 - t0;
            constrained_s += t2 - t1;
            if (ember_token_is_eog(vocab, tok)) {
                complete = 1;
                ++n;
                break;
            }
            const double f0 = now_s();
            if (check(ember_session_feed(session, &tok, 1), "decode")) return 1;
            decode_s += now_s() - f0 + (t1 - t0);
        }
        printf("{\"round\":%d,\"top_k\":%d,\"temp\":%.2f,\"tokens\":%d,\"complete\":%d,\"decode_step_ms\":%.3f,"
               "\"plain_sample_ms\":%.4f,\"constrained_sample_ms\":%.4f,\"grammar_ms\":%.4f,\"overhead_pct\":%.2f}\n",
               r, top_k, temp, n, complete, 1e3 * decode_s / (n > 1 ? n - complete : 1), 1e3 * plain_s / n,
               1e3 * constrained_s / n, 1e3 * grammar_s / n, 100.0 * grammar_s / n / (decode_s / (n > 1 ? n - complete : 1)));
        fflush(stdout);
        ember_sampler_free(plain);
        ember_sampler_free(constrained);
        ember_grammar_free(grammar);
    }
    ember_session_free(session);
    ember_model_free(vocab);
    ember_model_free(model);
    free(schema);
    return 0;
}
