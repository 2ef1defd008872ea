/* test_spec.c — speculative decoding through the public API: greedy output identical to the target
 * alone (draft model for k = 1..8, lookup, the target as its own draft), the target's state after
 * rollback bit-identical to a fresh computation (also when a callback stops early or the context
 * fills), sampled output distributed as the target's (chi-square on the first speculated token), and
 * clean errors. The stories15M Q4_0 draft and the stories260K Q8_0 draft come from ../shared/models
 * (parts that need them say so and are skipped when absent); the rest uses models/. */
#include "test_api_util.h"

#include <ember/ember.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ember_model *g_target, *g_draft, *g_tiny, *g_tiny_draft;

static ember_model *load_opt(const char *path) {
    ember_model *m = NULL;
    if (path && ember_model_load(path, NULL, &m) != EMBER_OK) return NULL;
    return m;
}

static int setup(void **state) {
    (void)state;
    const char *p = test_repo_model("stories15M-q8_0.gguf");
    test_require(p, "models/stories15M-q8_0.gguf");
    g_target = load_opt(p);
    g_tiny = load_opt(test_repo_model("stories260K.gguf"));
    g_draft = load_opt(test_shared_model("stories15M/stories15M-q4_0.gguf"));
    g_tiny_draft = load_opt(test_shared_model("stories260K/stories260K-q8_0.gguf"));
    if (!g_draft) printf("note: ../shared/models/stories15M/stories15M-q4_0.gguf absent: draft-model parts skipped\n");
    return g_target && g_tiny ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    ember_model_free(g_target);
    ember_model_free(g_draft);
    ember_model_free(g_tiny);
    ember_model_free(g_tiny_draft);
    return 0;
}

#define MAX_GEN 64

struct collected {
    ember_token t[MAX_GEN + 8];
    size_t n;
    size_t stop_after; /* 0: never stop */
};

static bool collect(ember_token token, const char *text, size_t len, void *ud) {
    (void)text, (void)len;
    struct collected *c = ud;
    c->t[c->n++] = token;
    return !(c->stop_after && c->n >= c->stop_after);
}

static ember_session *fed_session(const ember_model *m, uint32_t n_ctx, const char *prompt, ember_token *toks, size_t *n) {
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.n_ctx = n_ctx;
    sp.n_threads = m == g_tiny ? 1 : 2;   /* stories260K is too small to share between threads */
    ember_session *s = NULL;
    assert_int_equal(ember_session_create(m, &sp, &s), EMBER_OK);
    ember_token buf[256];
    size_t cnt = 0;
    assert_int_equal(ember_tokenize(m, prompt, strlen(prompt), EMBER_TOKENIZE_ADD_SPECIAL, buf, 256, &cnt), EMBER_OK);
    assert_int_equal(ember_session_feed(s, buf, cnt), EMBER_OK);
    if (toks) memcpy(toks, buf, cnt * sizeof *buf);
    if (n) *n = cnt;
    return s;
}

/* Generates with or without speculation (spec NULL); returns the status, fills c. */
static ember_status run(ember_session *s, const ember_spec_params *spec, size_t max_tokens, struct collected *c) {
    if (spec) assert_int_equal(ember_session_set_speculation(s, spec), EMBER_OK);
    ember_sampler *smp = test_greedy_sampler();
    ember_generate_params gp;
    ember_generate_params_init(&gp);
    gp.max_tokens = (uint32_t)max_tokens;
    gp.on_token = collect;
    gp.user_data = c;
    const ember_status st = ember_generate(s, smp, &gp, NULL);
    ember_sampler_free(smp);
    return st;
}

/* The session's logits are bit-identical to a fresh session fed prompt + the evaluated tokens. */
static void expect_fresh_state(const ember_model *m, ember_session *s, const ember_token *prompt, size_t n_prompt,
                               const ember_token *gen, size_t n_gen, uint32_t n_ctx) {
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.n_ctx = n_ctx;
    ember_session *f = NULL;
    assert_int_equal(ember_session_create(m, &sp, &f), EMBER_OK);
    assert_int_equal(ember_session_feed(f, prompt, n_prompt), EMBER_OK);
    if (n_gen) assert_int_equal(ember_session_feed(f, gen, n_gen), EMBER_OK);
    uint32_t pa = 0, pb = 0;
    ember_session_position(s, &pa);
    ember_session_position(f, &pb);
    assert_int_equal(pa, pb);
    const float *la = NULL, *lb = NULL;
    size_t na = 0, nb = 0;
    assert_int_equal(ember_session_logits(s, &la, &na), EMBER_OK);
    assert_int_equal(ember_session_logits(f, &lb, &nb), EMBER_OK);
    assert_memory_equal(la, lb, na * sizeof(float));
    ember_session_free(f);
}

static const char *kPrompts[] = {
    "Once upon a time",
    "The little dog ran to the park and",
    "Tom had a red ball. He liked to play with his ball every day. One day, Tom",
    "Lily and Ben were friends. Lily and Ben liked to",
};
#define N_PROMPTS (sizeof kPrompts / sizeof kPrompts[0])

/* The target's own greedy continuation of each prompt, computed once. */
static struct collected g_plain[N_PROMPTS];

static void check_same_as_plain(const ember_model *draft, ember_spec_mode mode, uint32_t k, bool adaptive) {
    for (size_t i = 0; i < N_PROMPTS; ++i) {
        ember_token prompt[256];
        size_t n_prompt = 0;
        struct collected spec = {0};
        struct collected *plain = &g_plain[i];
        if (plain->n == 0) {
            ember_session *a = fed_session(g_target, 128, kPrompts[i], NULL, NULL);
            assert_int_equal(run(a, NULL, 40, plain), EMBER_OK);
            ember_session_free(a);
        }
        ember_session *b = fed_session(g_target, 128, kPrompts[i], prompt, &n_prompt);
        ember_spec_params p;
        ember_spec_params_init(&p);
        p.mode = mode;
        p.draft_model = draft;
        p.k = k;
        p.adaptive = adaptive;
        assert_int_equal(run(b, &p, 40, &spec), EMBER_OK);
        assert_int_equal(spec.n, plain->n);
        for (size_t j = 0; j < plain->n; ++j) {
            if (spec.t[j] != plain->t[j])
                fprintf(stderr, "mode %d k %u prompt %zu token %zu: %d vs %d\n", (int)mode, k, i, j, spec.t[j], plain->t[j]);
            assert_int_equal(spec.t[j], plain->t[j]);
        }
        expect_fresh_state(g_target, b, prompt, n_prompt, spec.t, spec.n, 128);
        ember_spec_stats st;
        ember_spec_stats_init(&st);
        assert_int_equal(ember_session_spec_stats(b, &st), EMBER_OK);
        assert_int_equal(st.generated, 40);
        assert_true(st.accepted <= st.drafted && st.target_passes >= 1);
        if (mode == EMBER_SPEC_DRAFT && draft == g_target) assert_true(st.accepted == st.drafted); /* its own draft */
        ember_session_free(b);
    }
}

static void test_greedy_identical(void **state) {
    (void)state;
    /* The target as its own draft accepts everything: k + 1 tokens per pass, batches of up to 9. */
    check_same_as_plain(g_target, EMBER_SPEC_DRAFT, 8, false);
    check_same_as_plain(NULL, EMBER_SPEC_LOOKUP, 4, true);
    if (!g_draft) {
        printf("SKIP part: stories15M-q4_0 draft absent\n");
        return;
    }
    for (uint32_t k = 1; k <= 8; ++k) check_same_as_plain(g_draft, EMBER_SPEC_DRAFT, k, false);
    check_same_as_plain(g_draft, EMBER_SPEC_DRAFT, 3, true);
}

/* ember_generate_params.speculate = false decodes plainly for one call with the draft kept: calls that
 * alternate give the plain continuation, the plain calls draft nothing, and the speculative ones after
 * them still speculate (the draft catches up on what it missed). */
static void test_switch_per_call(void **state) {
    (void)state;
    const ember_model *draft = g_draft ? g_draft : g_target;
    struct collected plain = {0};
    ember_session *a = fed_session(g_target, 128, kPrompts[2], NULL, NULL);
    assert_int_equal(run(a, NULL, 40, &plain), EMBER_OK);
    ember_session_free(a);

    ember_token prompt[256];
    size_t n_prompt = 0;
    ember_session *b = fed_session(g_target, 128, kPrompts[2], prompt, &n_prompt);
    ember_spec_params p;
    ember_spec_params_init(&p);
    p.mode = EMBER_SPEC_DRAFT;
    p.draft_model = draft;
    p.k = 3;
    assert_int_equal(ember_session_set_speculation(b, &p), EMBER_OK);
    ember_sampler *smp = test_greedy_sampler();
    struct collected got = {0};
    uint64_t drafted_before = 0;
    for (int call = 0; call < 8; ++call) {
        ember_generate_params gp;
        ember_generate_params_init(&gp);
        assert_true(gp.speculate); /* the default */
        gp.max_tokens = 5;
        gp.on_token = collect;
        gp.user_data = &got;
        gp.speculate = call % 2 == 1;
        assert_int_equal(ember_generate(b, smp, &gp, NULL), EMBER_OK);
        ember_spec_stats st;
        ember_spec_stats_init(&st);
        assert_int_equal(ember_session_spec_stats(b, &st), EMBER_OK);
        if (gp.speculate) assert_true(st.drafted > drafted_before);
        else assert_true(st.drafted == drafted_before);
        drafted_before = st.drafted;
    }
    ember_sampler_free(smp);
    assert_int_equal(got.n, 40);
    assert_memory_equal(got.t, plain.t, 40 * sizeof(ember_token));
    expect_fresh_state(g_target, b, prompt, n_prompt, got.t, got.n, 128);
    ember_session_free(b);
}

/* A callback that stops early, and a context that fills: the session ends exactly as plain generation
 * leaves it (every emitted token but an end of generation evaluated). */
static void test_stop_and_context_full(void **state) {
    (void)state;
    const ember_model *draft = g_draft ? g_draft : g_target;
    ember_spec_params p;
    ember_spec_params_init(&p);
    p.mode = EMBER_SPEC_DRAFT;
    p.draft_model = draft;
    p.k = 5;
    for (size_t stop = 1; stop <= 9; stop += 4) {
        ember_token prompt[256];
        size_t n_prompt = 0;
        ember_session *s = fed_session(g_target, 128, kPrompts[0], prompt, &n_prompt);
        struct collected c = {0};
        c.stop_after = stop;
        assert_int_equal(run(s, &p, 40, &c), EMBER_STOPPED);
        assert_int_equal(c.n, stop);
        expect_fresh_state(g_target, s, prompt, n_prompt, c.t, c.n, 128);
        ember_session_free(s);
    }
    /* n_ctx 24: plain and speculative generation both stop with EMBER_ERR_CONTEXT_FULL after the same tokens. */
    ember_token prompt[256];
    size_t n_prompt = 0;
    struct collected plain = {0}, spec = {0};
    ember_session *a = fed_session(g_target, 24, kPrompts[0], prompt, &n_prompt);
    assert_int_equal(run(a, NULL, 0, &plain), EMBER_ERR_CONTEXT_FULL);
    ember_session *b = fed_session(g_target, 24, kPrompts[0], NULL, NULL);
    assert_int_equal(run(b, &p, 0, &spec), EMBER_ERR_CONTEXT_FULL);
    assert_int_equal(spec.n, plain.n);
    assert_memory_equal(spec.t, plain.t, plain.n * sizeof(ember_token));
    expect_fresh_state(g_target, b, prompt, n_prompt, spec.t, spec.n, 24);
    ember_session_free(a);
    ember_session_free(b);
}

/* top-k 8 at temperature 1 over logits l: the chain's distribution, as a dense array. */
static void chain_probs(const float *l, size_t n, double *out) {
    int top[8];
    for (int j = 0; j < 8; ++j) {
        int best = -1;
        for (size_t i = 0; i < n; ++i) {
            bool taken = false;
            for (int t = 0; t < j; ++t) taken |= top[t] == (int)i;
            if (!taken && (best < 0 || l[i] > l[best])) best = (int)i;
        }
        top[j] = best;
    }
    double sum = 0;
    for (size_t i = 0; i < n; ++i) out[i] = 0;
    for (int j = 0; j < 8; ++j) sum += out[top[j]] = exp((double)l[top[j]] - l[top[0]]);
    for (int j = 0; j < 8; ++j) out[top[j]] /= sum;
}

static double chi2_critical(int df) { /* significance 1e-4, Wilson-Hilferty */
    const double a = 2.0 / (9.0 * df), c = 1 - a + 3.719 * sqrt(a);
    return df * c * c * c;
}

/* The second generated token is the first one speculation decides. Its exact distribution under the
 * target, sum over t1 of P(t1) P(t2 | t1) with the chain (top-k 8, temperature 1), against its frequency
 * over many generations with speculation: chi-square at significance 1e-4. */
static void check_sampled(const ember_model *target, const ember_model *draft, ember_spec_mode mode, const char *what) {
    const char *prompt = "Once upon a time there was a cat. The cat was big. Once upon a time there was a";
    ember_session *root = fed_session(target, 64, prompt, NULL, NULL);
    const float *l = NULL;
    size_t V = 0;
    assert_int_equal(ember_session_logits(root, &l, &V), EMBER_OK);
    double *p1 = calloc(V, sizeof *p1), *p2 = calloc(V, sizeof *p2), *pc = calloc(V, sizeof *pc), *count = calloc(V, sizeof *count);
    chain_probs(l, V, p1);
    for (size_t t1 = 0; t1 < V; ++t1) {
        if (p1[t1] == 0) continue;
        ember_session *f = NULL;
        assert_int_equal(ember_session_fork(root, &f), EMBER_OK);
        const ember_token tok = (ember_token)t1;
        assert_int_equal(ember_session_feed(f, &tok, 1), EMBER_OK);
        const float *lf = NULL;
        assert_int_equal(ember_session_logits(f, &lf, &V), EMBER_OK);
        chain_probs(lf, V, pc);
        for (size_t j = 0; j < V; ++j) p2[j] += p1[t1] * pc[j];
        ember_session_free(f);
    }
    ember_sampler_params sp;
    ember_sampler_params_init(&sp);
    sp.temperature = 1.0f;
    sp.top_k = 8;
    sp.seed = 12345;
    ember_sampler *smp = NULL;
    assert_int_equal(ember_sampler_create(&sp, &smp), EMBER_OK);
    ember_spec_params spec;
    ember_spec_params_init(&spec);
    spec.mode = mode;
    spec.draft_model = draft;
    spec.k = 3;
#ifdef EMBER_TEST_SANITIZED
    const int N = 1500; /* sanitized builds run several times slower: fewer samples, the same test */
#else
    const int N = 4000;
#endif
    uint64_t drafted = 0, accepted = 0;
    for (int i = 0; i < N; ++i) {
        ember_session *f = NULL;
        assert_int_equal(ember_session_fork(root, &f), EMBER_OK);
        assert_int_equal(ember_session_set_speculation(f, &spec), EMBER_OK);
        struct collected c = {0};
        ember_generate_params gp;
        ember_generate_params_init(&gp);
        gp.max_tokens = 5;   /* so the first round may draft 3 (a round leaves room for its own token) */
        gp.on_token = collect;
        gp.user_data = &c;
        const ember_status st = ember_generate(f, smp, &gp, NULL);
        assert_true(st == EMBER_OK || st == EMBER_END_OF_GENERATION);
        if (c.n >= 2) count[c.t[1]] += 1;
        ember_spec_stats ss;
        ember_spec_stats_init(&ss);
        assert_int_equal(ember_session_spec_stats(f, &ss), EMBER_OK);
        drafted += ss.drafted;
        accepted += ss.accepted;
        ember_session_free(f);
    }
    /* Cells with expected count >= 5; the rest pooled into one. */
    double total = 0, chi2 = 0, pool_e = 0, pool_o = 0;
    int cells = 0;
    for (size_t j = 0; j < V; ++j) total += count[j];
    for (size_t j = 0; j < V; ++j) {
        const double e = total * p2[j];
        if (e >= 5) {
            chi2 += (count[j] - e) * (count[j] - e) / e;
            ++cells;
        } else {
            pool_e += e;
            pool_o += count[j];
        }
    }
    if (pool_e > 0) {
        chi2 += (pool_o - pool_e) * (pool_o - pool_e) / (pool_e > 1 ? pool_e : 1);
        ++cells;
    }
    const double crit = chi2_critical(cells - 1);
    printf("%s: %.0f samples, %d cells, chi2 %.2f (critical %.2f); drafted %llu, accepted %llu\n", what, total, cells, chi2,
           crit, (unsigned long long)drafted, (unsigned long long)accepted);
    assert_true(drafted > (uint64_t)N / 4); /* speculation really decided most second tokens */
    assert_true(accepted > 0 && accepted < drafted);
    assert_true(chi2 < crit);
    free(p1), free(p2), free(pc), free(count);
    ember_sampler_free(smp);
    ember_session_free(root);
}

static void test_sampled_distribution(void **state) {
    (void)state;
    check_sampled(g_tiny, NULL, EMBER_SPEC_LOOKUP, "stories260K, lookup");
    if (g_tiny_draft)
        check_sampled(g_tiny, g_tiny_draft, EMBER_SPEC_DRAFT, "stories260K F32, Q8_0 draft");
    else
        printf("SKIP part: stories260K-q8_0 draft absent\n");
}

static void test_errors(void **state) {
    (void)state;
    ember_session *s = fed_session(g_target, 64, "Once", NULL, NULL);
    ember_spec_params p;
    ember_spec_params_init(&p);
    ember_spec_stats st;
    ember_spec_stats_init(&st);
    assert_int_equal(ember_session_spec_stats(s, &st), EMBER_ERR_INVALID_STATE);
    p.mode = EMBER_SPEC_DRAFT;
    p.draft_model = g_tiny; /* 512 tokens against 32000 */
    assert_int_equal(ember_session_set_speculation(s, &p), EMBER_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ember_last_error(), "vocabulary"));
    p.draft_model = NULL;
    assert_int_equal(ember_session_set_speculation(s, &p), EMBER_ERR_INVALID_ARGUMENT);
    p.mode = EMBER_SPEC_LOOKUP;
    p.k = 0;
    assert_int_equal(ember_session_set_speculation(s, &p), EMBER_ERR_INVALID_ARGUMENT);
    p.k = 17;
    assert_int_equal(ember_session_set_speculation(s, &p), EMBER_ERR_INVALID_ARGUMENT);
    p.k = 4;
    p.mode = (ember_spec_mode)9;
    assert_int_equal(ember_session_set_speculation(s, &p), EMBER_ERR_INVALID_ARGUMENT);
    /* A vocab-only draft. */
    ember_model_params mp;
    ember_model_params_init(&mp);
    mp.vocab_only = true;
    ember_model *vo = NULL;
    assert_int_equal(ember_model_load(test_repo_model("stories15M-q8_0.gguf"), &mp, &vo), EMBER_OK);
    p.mode = EMBER_SPEC_DRAFT;
    p.draft_model = vo;
    assert_int_equal(ember_session_set_speculation(s, &p), EMBER_ERR_INVALID_ARGUMENT);
    /* Failed attaches left nothing attached; a good one then OFF detaches. */
    assert_int_equal(ember_session_spec_stats(s, &st), EMBER_ERR_INVALID_STATE);
    p.mode = EMBER_SPEC_LOOKUP;
    assert_int_equal(ember_session_set_speculation(s, &p), EMBER_OK);
    assert_int_equal(ember_session_spec_stats(s, &st), EMBER_OK);
    assert_int_equal(st.k, 4);
    assert_int_equal(ember_session_set_speculation(s, NULL), EMBER_OK);
    assert_int_equal(ember_session_spec_stats(s, &st), EMBER_ERR_INVALID_STATE);
    assert_int_equal(ember_session_set_speculation(NULL, &p), EMBER_ERR_INVALID_ARGUMENT);
    /* Generating before anything was fed. */
    ember_session *empty = NULL;
    assert_int_equal(ember_session_create(g_target, NULL, &empty), EMBER_OK);
    assert_int_equal(ember_session_set_speculation(empty, &p), EMBER_OK);
    struct collected c = {0};
    assert_int_equal(run(empty, NULL, 4, &c), EMBER_ERR_INVALID_STATE);
    ember_session_free(empty);
    ember_model_free(vo);
    ember_session_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_identical),
        cmocka_unit_test(test_stop_and_context_full),
        cmocka_unit_test(test_switch_per_call),
        cmocka_unit_test(test_sampled_distribution),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
