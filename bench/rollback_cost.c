// rollback_cost.c — ember-rollback-cost MODEL [K=4] [ROUNDS=3] [TOKENS=24]: what speculative rollback costs
// on a model with recurrent layers (docs/model-families.md, "Speculation").
//   1. Re-feeding: after a 64-token prompt, per round, one decode step; then for each number of accepted
//      tokens, a plain feed of K + 1 tokens and a truncation keeping 1 + that many, which re-feeds them
//      from the feed's start (a plain feed keeps no per-token state). Beside it, one copy of a sequence's
//      state (state_bytes_per_sequence).
//   2. Speculation both ways, alternating in one window: two sessions on the same prompt with n-gram
//      lookup speculation (k = K, not adaptive, sampled with one seed), one created with $EMBER_KEPT_STATES=0 (its
//      rollbacks re-feed the accepted tokens) and one with the default kept states (its verifying pass
//      keeps each token's state and a rollback takes one); each round generates TOKENS more tokens on
//      each, which goes first alternating. Both make the same drafts and the same tokens (checked), so
//      their times differ by the rollback alone: the verifying pass's writes of the kept states against
//      the re-feeding they spare.
// One JSON line of seconds, with the load average before and after.
#include <ember/ember.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static void loadavg(double l[3]) {
    FILE *f = fopen("/proc/loadavg", "r");
    l[0] = l[1] = l[2] = 0;
    if (f) { if (fscanf(f, "%lf %lf %lf", &l[0], &l[1], &l[2]) != 3) l[0] = -1; fclose(f); }
}
static ember_session *session(ember_model *m, const char *kept_env) {
    if (kept_env) setenv("EMBER_KEPT_STATES", kept_env, 1); else unsetenv("EMBER_KEPT_STATES");
    ember_session_params sp; ember_session_params_init(&sp); sp.n_ctx = 1024; sp.n_threads = 2;
    ember_session *s = NULL;
    if (ember_session_create(m, &sp, &s) != EMBER_OK) { fprintf(stderr, "%s\n", ember_last_error()); exit(1); }
    unsetenv("EMBER_KEPT_STATES");
    return s;
}
typedef struct { ember_token t[4096]; size_t n; } Tokens;
static bool keep_token(ember_token t, const char *text, size_t len, void *user) {
    (void)text, (void)len;
    Tokens *o = user;
    if (o->n < 4096) o->t[o->n++] = t;
    return true;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: ember-rollback-cost MODEL [K] [ROUNDS] [TOKENS]\n"); return 2; }
    const char *path = argv[1];
    const int K = argc > 2 ? atoi(argv[2]) : 4, R = argc > 3 ? atoi(argv[3]) : 3, N = argc > 4 ? atoi(argv[4]) : 24;
    if (K < 1 || K > 15 || R < 1 || N < 1 || N * R > 900) { fprintf(stderr, "K 1..15, ROUNDS and TOKENS at least 1\n"); return 2; }
    ember_model *m = NULL;
    if (ember_model_load(path, NULL, &m) != EMBER_OK) { fprintf(stderr, "%s\n", ember_last_error()); return 1; }
    ember_model_info info; ember_model_info_init(&info); ember_model_get_info(m, &info);
    double load0[3], load1[3];
    loadavg(load0);

    // 1. Re-feeding after a plain feed.
    ember_session *s = session(m, "0");
    ember_token prompt[64]; for (int i = 0; i < 64; ++i) prompt[i] = 100 + i % 9;   // repeats: lookup finds n-grams
    ember_session_feed(s, prompt, 64);
    double t1 = 0, tv = 0, tt[16] = {0};
    for (int r = 0; r < R; ++r) {
        ember_token one = 7, v[16]; for (int i = 0; i <= K; ++i) v[i] = 200 + i;
        double a = now(); ember_session_feed(s, &one, 1); t1 += now() - a;     // a decode step
        for (int keep = 0; keep <= K; ++keep) {
            uint32_t pos = 0; ember_session_position(s, &pos);
            a = now(); ember_session_feed(s, v, K + 1); tv += now() - a;        // a pass of K + 1 tokens
            a = now(); ember_session_truncate(s, pos + 1 + keep); tt[keep] += now() - a;   // keep 1 + keep
            ember_session_truncate(s, pos);
        }
    }
    ember_session_free(s);
    const size_t sb = info.state_bytes_per_sequence;
    char *src = malloc(sb ? sb : 1), *dst = malloc(sb ? sb : 1); memset(src, 1, sb); memset(dst, 2, sb);
    double a = now(); for (int r = 0; r < 20; ++r) memcpy(dst, src, sb); const double tc = (now() - a) / 20;

    // 2. Speculation, re-feeding (EMBER_KEPT_STATES=0) against kept states, alternating.
    ember_session *sp[2] = {session(m, "0"), session(m, NULL)};
    // Sampled (seeded alike): a random-weight model's greedy text repeats, and lookup drafts of it are
    // always accepted, which would leave nothing to roll back.
    ember_sampler_params smp; ember_sampler_params_init(&smp); smp.temperature = 1.0f; smp.seed = 7;
    ember_sampler *g[2];
    ember_spec_params spec; ember_spec_params_init(&spec);
    spec.mode = EMBER_SPEC_LOOKUP, spec.k = (uint32_t)K, spec.adaptive = false;
    static Tokens out[2];
    double tg[2] = {0, 0};
    for (int i = 0; i < 2; ++i) {
        ember_sampler_create(&smp, &g[i]);
        ember_session_feed(sp[i], prompt, 64);
        if (ember_session_set_speculation(sp[i], &spec) != EMBER_OK) { fprintf(stderr, "%s\n", ember_last_error()); return 1; }
    }
    for (int r = 0; r < R; ++r)
        for (int j = 0; j < 2; ++j) {
            const int i = (j + r) % 2;
            ember_generate_params gp; ember_generate_params_init(&gp);
            gp.max_tokens = (uint32_t)N, gp.on_token = keep_token, gp.user_data = &out[i];
            size_t count = 0;
            a = now();
            const ember_status st = ember_generate(sp[i], g[i], &gp, &count);
            tg[i] += now() - a;
            if (st != EMBER_OK && st != EMBER_END_OF_GENERATION) { fprintf(stderr, "%s\n", ember_last_error()); return 1; }
        }
    const int same = out[0].n == out[1].n && memcmp(out[0].t, out[1].t, out[0].n * sizeof(ember_token)) == 0;
    ember_spec_stats ss[2];
    for (int i = 0; i < 2; ++i) { ember_spec_stats_init(&ss[i]); ember_session_spec_stats(sp[i], &ss[i]); }
    loadavg(load1);

    printf("{\"state_bytes\": %zu, \"K\": %d, \"rounds\": %d, \"loadavg_before\": [%.2f, %.2f, %.2f], "
           "\"loadavg_after\": [%.2f, %.2f, %.2f], \"decode_step_s\": %.4f, \"pass_s\": %.4f, \"state_copy_s\": %.5f, "
           "\"truncate_keep_s\": [", sb, K, R, load0[0], load0[1], load0[2], load1[0], load1[1], load1[2], t1 / R,
           tv / (R * (K + 1)), tc);
    for (int keep = 0; keep <= K; ++keep) printf("%s%.4f", keep ? ", " : "", tt[keep] / R);
    printf("], \"same_tokens\": %s", same ? "true" : "false");
    const char *names[2] = {"speculation_refeed", "speculation_kept"};
    for (int i = 0; i < 2; ++i)
        printf(", \"%s\": {\"tokens\": %llu, \"s_per_token\": %.4f, \"passes\": %llu, \"drafted\": %llu, \"accepted\": %llu}",
               names[i], (unsigned long long)ss[i].generated, tg[i] / (double)(ss[i].generated ? ss[i].generated : 1),
               (unsigned long long)ss[i].target_passes, (unsigned long long)ss[i].drafted, (unsigned long long)ss[i].accepted);
    printf("}\n");
    const int copied = sb == 0 || dst[sb - 1] == 1;   // the copies are read, so the compiler keeps them
    free(src), free(dst);
    for (int i = 0; i < 2; ++i) ember_sampler_free(g[i]), ember_session_free(sp[i]);
    ember_model_free(m);
    return copied && same ? 0 : 1;
}
