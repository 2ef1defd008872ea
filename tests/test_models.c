/* test_models.c — whole-model checks on real trained models against known greedy outputs
 * (../shared/models/PROVENANCE.md and models/PROVENANCE.md), through the public API. */
#include "test_util.h"

#include <ember/ember.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* stories15M, prompt "Once upon a time" with BOS: the first 5 ids are the prompt, then greedy output. */
static const ember_token kGolden15M[] = {
    1, 9038, 2501, 263, 931, 29892, 727, 471, 263, 2217, 7826, 4257, 365, 2354, 29889, 2296, 18012, 304, 1708,
    5377, 297, 278, 6575, 845, 457, 29889, 3118, 2462, 29892, 1183, 4446, 263, 4802, 29892, 2654, 8287, 297, 278,
    14744, 29889, 739};
static const char kGolden15MText[] = ", there was a little girl named Lily. She loved to play outside in the sunshine. "
                                     "One day, she saw a big, red ball in the sky. It";
/* stories260K from BOS alone. */
static const ember_token kGolden260K[] = {
    1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337,
    410, 408, 419, 292, 411, 322, 265, 282, 295, 433, 426, 385, 328, 432, 358, 394, 261, 370, 432, 352};

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* Feeds `prompt`, then generates `n_gen` greedy tokens into out; returns the generated text. */
static void run_greedy(const char *path, uint32_t threads, const ember_token *prompt, size_t n_prompt,
                       ember_token *out, size_t n_gen, char *text, size_t text_cap) {
    ember_model *m = NULL;
    assert_int_equal(ember_model_load(path, NULL, &m), EMBER_OK);
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.n_threads = threads;
    sp.n_ctx = 256;
    ember_session *s = NULL;
    assert_int_equal(ember_session_create(m, &sp, &s), EMBER_OK);
    ember_sampler_params pp;
    ember_sampler_params_init(&pp);
    pp.temperature = 0;
    ember_sampler *smp = NULL;
    assert_int_equal(ember_sampler_create(&pp, &smp), EMBER_OK);
    assert_int_equal(ember_session_feed(s, prompt, n_prompt), EMBER_OK);
    size_t used = 0;
    text[0] = 0;
    for (size_t i = 0; i < n_gen; ++i) {
        const char *piece = NULL;
        size_t len = 0;
        ember_status st = ember_generate_next(s, smp, &out[i], &piece, &len);
        assert_true(st == EMBER_OK || st == EMBER_END_OF_GENERATION);
        if (used + len < text_cap) {
            memcpy(text + used, piece, len);
            used += len;
            text[used] = 0;
        }
    }
    ember_sampler_free(smp);
    ember_session_free(s);
    ember_model_free(m);
}

static void expect_tokens(const char *what, const ember_token *want, const ember_token *got, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        if (want[i] != got[i]) {
            fprintf(stderr, "%s: token %zu differs: want %d, got %d\n", what, i, want[i], got[i]);
            fail();
        }
    }
}

static void test_stories15M_q8_0_golden(void **state) {
    (void)state;
    TEST_REQUIRE_MODEL(path, "stories15M-q8_0.gguf", "stories15M/stories15M-q8_0.gguf")
    ember_model *m = NULL;
    assert_int_equal(ember_model_load(path, NULL, &m), EMBER_OK);
    ember_token prompt[16];
    size_t n = 0;
    const char *p = "Once upon a time";
    assert_int_equal(ember_tokenize(m, p, strlen(p), EMBER_TOKENIZE_ADD_SPECIAL, prompt, 16, &n), EMBER_OK);
    assert_int_equal(n, 5);
    expect_tokens("prompt", kGolden15M, prompt, 5);
    ember_model_free(m);

    const size_t n_gen = N(kGolden15M) - 5;
    ember_token out[64];
    char text[1024];
    for (uint32_t threads = 1; threads <= 2; ++threads) {
        run_greedy(path, threads, prompt, 5, out, n_gen, text, sizeof text);
        expect_tokens("stories15M q8_0", kGolden15M + 5, out, n_gen);
        assert_string_equal(text, kGolden15MText);
    }
    /* The weights read from the huge-page copy (forced: the file is under the size that copies by
     * default; where the kernel offers no huge pages this is the mapping again) and from the mapping. */
    const char *was = getenv("EMBER_HUGEPAGES");
    for (int copy = 0; copy <= 1; ++copy) {
        setenv("EMBER_HUGEPAGES", copy ? "1" : "0", 1);
        run_greedy(path, 2, prompt, 5, out, n_gen, text, sizeof text);
        expect_tokens(copy ? "stories15M q8_0, huge-page copy" : "stories15M q8_0, mapped", kGolden15M + 5, out, n_gen);
    }
    if (was) setenv("EMBER_HUGEPAGES", was, 1);
    else unsetenv("EMBER_HUGEPAGES");
}

static void test_stories260K_golden(void **state) {
    (void)state;
    TEST_REQUIRE_MODEL(path, "stories260K.gguf", "stories260K/stories260K.gguf")
    ember_token bos = 1, out[64];
    char text[1024];
    run_greedy(path, 2, &bos, 1, out, N(kGolden260K) - 1, text, sizeof text);
    expect_tokens("stories260K", kGolden260K + 1, out, N(kGolden260K) - 1);
    assert_non_null(strstr(text, "Once upon a time, there was a little girl named Lily."));
}

static void test_stories260K_q8_0_mixed_types(void **state) {
    (void)state;
    /* Q8_0 weights, F16 ffn_down (172 columns), F32 norms: llama.cpp's greedy output equals the F32 model's. */
    TEST_REQUIRE_MODEL(path, NULL, "stories260K/stories260K-q8_0.gguf")
    ember_token bos = 1, out[64];
    char text[1024];
    run_greedy(path, 2, &bos, 1, out, N(kGolden260K) - 1, text, sizeof text);
    expect_tokens("stories260K q8_0", kGolden260K + 1, out, N(kGolden260K) - 1);
}

static void test_stories15M_q4_0_runs(void **state) {
    (void)state;
    /* Q4_0 diverges from F32 after about 12 tokens (PROVENANCE.md); the first words must still agree. */
    TEST_REQUIRE_MODEL(path, NULL, "stories15M/stories15M-q4_0.gguf")
    ember_token out[16];
    char text[1024];
    run_greedy(path, 2, kGolden15M, 5, out, 8, text, sizeof text);
    expect_tokens("stories15M q4_0", kGolden15M + 5, out, 8);
}

static void test_prefill_matches_decode(void **state) {
    (void)state;
    /* The batched path (prefill) and the one-token path (decode) must agree on the logits. */
    TEST_REQUIRE_MODEL(path, "stories15M-q8_0.gguf", "stories15M/stories15M-q8_0.gguf")
    ember_model *m = NULL;
    assert_int_equal(ember_model_load(path, NULL, &m), EMBER_OK);
    ember_session *a = NULL, *b = NULL;
    assert_int_equal(ember_session_create(m, NULL, &a), EMBER_OK);
    assert_int_equal(ember_session_create(m, NULL, &b), EMBER_OK);
    const size_t n = 20;
    assert_int_equal(ember_session_feed(a, kGolden15M, n), EMBER_OK);
    for (size_t i = 0; i < n; ++i) assert_int_equal(ember_session_feed(b, kGolden15M + i, 1), EMBER_OK);
    const float *la = NULL, *lb = NULL;
    size_t nv = 0;
    assert_int_equal(ember_session_logits(a, &la, &nv), EMBER_OK);
    assert_int_equal(ember_session_logits(b, &lb, &nv), EMBER_OK);
    float max_diff = 0;
    for (size_t i = 0; i < nv; ++i) {
        const float d = la[i] > lb[i] ? la[i] - lb[i] : lb[i] - la[i];
        if (d > max_diff) max_diff = d;
    }
    fprintf(stderr, "prefill vs decode: max |logit difference| = %g\n", max_diff);
    assert_true(max_diff < 1e-2f);
    ember_session_free(a);
    ember_session_free(b);
    ember_model_free(m);
}

/* One model shared by sessions on several threads at once (the header promises a model is immutable and
 * shareable): each thread must still produce the golden continuation. */
struct shared_run {
    const ember_model *model;
    int ok;
};

static void *generate_golden(void *arg) {
    struct shared_run *r = arg;
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.n_threads = 1;
    sp.n_ctx = 64;
    ember_session *s = NULL;
    ember_sampler_params pp;
    ember_sampler_params_init(&pp);
    pp.temperature = 0;
    ember_sampler *smp = NULL;
    r->ok = ember_session_create(r->model, &sp, &s) == EMBER_OK && ember_sampler_create(&pp, &smp) == EMBER_OK &&
            ember_session_feed(s, kGolden15M, 5) == EMBER_OK;
    for (size_t i = 5; r->ok && i < N(kGolden15M); ++i) {
        ember_token t = -1;
        r->ok = ember_generate_next(s, smp, &t, NULL, NULL) == EMBER_OK && t == kGolden15M[i];
    }
    ember_sampler_free(smp);
    ember_session_free(s);
    return NULL;
}

static void test_shared_model_threads(void **state) {
    (void)state;
    TEST_REQUIRE_MODEL(path, "stories15M-q8_0.gguf", "stories15M/stories15M-q8_0.gguf")
    ember_model *m = NULL;
    assert_int_equal(ember_model_load(path, NULL, &m), EMBER_OK);
    enum { kThreads = 4 };
    pthread_t th[kThreads];
    struct shared_run runs[kThreads];
    for (int i = 0; i < kThreads; ++i) {
        runs[i].model = m;
        runs[i].ok = 0;
        assert_int_equal(pthread_create(&th[i], NULL, generate_golden, &runs[i]), 0);
    }
    for (int i = 0; i < kThreads; ++i) {
        pthread_join(th[i], NULL);
        assert_true(runs[i].ok);
    }
    ember_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stories15M_q8_0_golden),
        cmocka_unit_test(test_stories260K_golden),
        cmocka_unit_test(test_stories260K_q8_0_mixed_types),
        cmocka_unit_test(test_stories15M_q4_0_runs),
        cmocka_unit_test(test_prefill_matches_decode),
        cmocka_unit_test(test_shared_model_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
