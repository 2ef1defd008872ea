// rollback_cost.c — ember-rollback-cost MODEL [K=4] [ROUNDS=5]: what speculative rollback costs on a model
// with recurrent layers (docs/model-families.md, "Speculation"). After a 64-token prompt, per round: one
// decode step; then for each number of accepted tokens, a verifying feed of K + 1 tokens and a truncation
// keeping 1 + that many (the session re-feeds them from the checkpoint at the feed's start). Against it,
// the other design's price: copying one sequence's state (state_bytes_per_sequence), which keeping every
// token's state during the verifying feed would do K + 1 times. One JSON line of seconds.
#include <ember/ember.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: ember-rollback-cost MODEL [K] [ROUNDS]\n");
        return 2;
    }
    const char *path = argv[1];
    const int K = argc > 2 ? atoi(argv[2]) : 4, R = argc > 3 ? atoi(argv[3]) : 5;
    ember_model *m = NULL;
    if (ember_model_load(path, NULL, &m) != EMBER_OK) { fprintf(stderr, "%s\n", ember_last_error()); return 1; }
    ember_model_info info; ember_model_info_init(&info); ember_model_get_info(m, &info);
    ember_session_params sp; ember_session_params_init(&sp); sp.n_ctx = 1024; sp.n_threads = 2;
    ember_session *s = NULL;
    if (ember_session_create(m, &sp, &s) != EMBER_OK) { fprintf(stderr, "%s\n", ember_last_error()); return 1; }
    ember_token prompt[64]; for (int i = 0; i < 64; ++i) prompt[i] = 100 + i;
    ember_session_feed(s, prompt, 64);
    double t1 = 0, tv = 0, tt[16] = {0};
    for (int r = 0; r < R; ++r) {
        ember_token one = 7, v[16]; for (int i = 0; i <= K; ++i) v[i] = 200 + i;
        double a = now(); ember_session_feed(s, &one, 1); t1 += now() - a;     // a decode step
        for (int keep = 0; keep <= K; ++keep) {
            uint32_t pos = 0; ember_session_position(s, &pos);
            a = now(); ember_session_feed(s, v, K + 1); tv += now() - a;        // verification pass
            a = now(); ember_session_truncate(s, pos + 1 + keep); tt[keep] += now() - a;   // keep 1 + keep
            ember_session_truncate(s, pos);
        }
    }
    const size_t sb = info.state_bytes_per_sequence;
    char *src = malloc(sb), *dst = malloc(sb); memset(src, 1, sb); memset(dst, 2, sb);
    double a = now(); for (int r = 0; r < 20; ++r) memcpy(dst, src, sb); const double tc = (now() - a) / 20;
    printf("{\"state_bytes\": %zu, \"K\": %d, \"decode_step_s\": %.4f, \"verify_pass_s\": %.4f, \"state_copy_s\": %.5f, \"truncate_keep_s\": [",
           sb, K, t1 / R, tv / (R * (K + 1)), tc);
    for (int keep = 0; keep <= K; ++keep) printf("%s%.4f", keep ? ", " : "", tt[keep] / R);
    printf("]}\n");
    const int copied = dst[sb - 1] == 1;   // the copies are read, so the compiler keeps them
    free(src), free(dst);
    ember_session_free(s);
    ember_model_free(m);
    return copied ? 0 : 1;
}
