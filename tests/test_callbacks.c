/* test_callbacks.c — what a callback may call on the handles its running call uses (ember.h lists them),
 * and that everything else gives EMBER_ERR_INVALID_STATE instead of corrupting the running call.
 * Before this was enforced, ember_session_set_speculation from ember_generate's callback freed the
 * speculator the generation loop was in (heap-use-after-free under ASan, SIGSEGV in release builds);
 * the ASan build runs this test. Uses stories260K from models/. */
#include "test_api_util.h"

#include <ember/ember.h>

#include <stdio.h>
#include <string.h>

static ember_model *g_model;

static int setup(void **state) {
    (void)state;
    const char *p = test_repo_model("stories260K.gguf");
    test_require(p, "models/stories260K.gguf");
    return ember_model_load(p, NULL, &g_model) == EMBER_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    ember_model_free(g_model);
    return 0;
}

static ember_session *fed_session(void) {
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.n_ctx = 256;
    sp.n_threads = 1;
    ember_session *s = NULL;
    assert_int_equal(ember_session_create(g_model, &sp, &s), EMBER_OK);
    ember_token toks[64];
    const size_t n = test_tokenize(g_model, "Once upon a time there was a little girl", toks, 64);
    assert_int_equal(ember_session_feed(s, toks, n), EMBER_OK);
    return s;
}

static void set_lookup(ember_session *s) {
    ember_spec_params p;
    ember_spec_params_init(&p);
    p.mode = EMBER_SPEC_LOOKUP;
    p.adaptive = false;
    assert_int_equal(ember_session_set_speculation(s, &p), EMBER_OK);
}

struct probe {
    ember_session *session;
    ember_sampler *sampler;
    size_t calls;
    size_t refused;     /* calls that gave EMBER_ERR_INVALID_STATE, as they must */
    size_t wrong;       /* calls that gave anything else */
    bool free_session;  /* free the session (and the sampler) on the 3rd token */
};

static void expect_refused(struct probe *pr, ember_status st) {
    if (st == EMBER_ERR_INVALID_STATE && strstr(ember_last_error(), "callback")) ++pr->refused;
    else ++pr->wrong;
}

/* Tries every refused call on the running generation's handles, then the allowed ones. */
static bool meddle(ember_token token, const char *text, size_t len, void *ud) {
    (void)text, (void)len;
    struct probe *pr = ud;
    ++pr->calls;
    ember_session *s = pr->session;
    ember_spec_params sp;
    ember_spec_params_init(&sp);   /* mode OFF: would free the speculator the loop is in */
    expect_refused(pr, ember_session_set_speculation(s, &sp));
    sp.mode = EMBER_SPEC_LOOKUP;   /* would replace it */
    expect_refused(pr, ember_session_set_speculation(s, &sp));
    expect_refused(pr, ember_session_feed(s, &token, 1));
    expect_refused(pr, ember_session_truncate(s, 1));
    ember_token t;
    expect_refused(pr, ember_generate_next(s, pr->sampler, &t, NULL, NULL));
    expect_refused(pr, ember_generate(s, pr->sampler, NULL, NULL));
    const float *logits;
    expect_refused(pr, ember_session_logits(s, &logits, NULL));
    size_t size;
    expect_refused(pr, ember_session_save(s, NULL, 0, &size));
    expect_refused(pr, ember_session_restore(s, "x", 1));
    ember_session *fork = NULL;
    expect_refused(pr, ember_session_fork(s, &fork));
    assert_null(fork);
    float l[4] = {0, 1, 2, 3};
    expect_refused(pr, ember_sampler_sample(pr->sampler, l, 4, &t));
    expect_refused(pr, ember_sampler_accept(pr->sampler, 1));
    expect_refused(pr, ember_sampler_reset(pr->sampler));
    /* Allowed: reads that do not disturb the generation. */
    uint32_t pos, n_ctx;
    assert_int_equal(ember_session_position(s, &pos), EMBER_OK);
    assert_int_equal(ember_session_context_length(s, &n_ctx), EMBER_OK);
    ember_spec_stats stats;
    ember_spec_stats_init(&stats);
    assert_int_equal(ember_session_spec_stats(s, &stats), EMBER_OK);
    if (pr->free_session && pr->calls == 3) {
        ember_session_free(s);
        ember_sampler_free(pr->sampler);
    }
    return true;
}

static void test_generate_callback(void **state) {
    (void)state;
    for (int speculate = 0; speculate < 2; ++speculate) {
        ember_session *s = fed_session();
        set_lookup(s);
        ember_sampler *smp = test_greedy_sampler();
        struct probe pr = {.session = s, .sampler = smp};
        ember_generate_params gp;
        ember_generate_params_init(&gp);
        gp.max_tokens = 12;
        gp.on_token = meddle;
        gp.user_data = &pr;
        gp.speculate = speculate;
        size_t count = 0;
        const ember_status st = ember_generate(s, smp, &gp, &count);
        assert_true(st == EMBER_OK || st == EMBER_END_OF_GENERATION);
        assert_int_equal(count, pr.calls);
        assert_int_equal(pr.wrong, 0);
        assert_int_equal(pr.refused, pr.calls * 13);
        /* Nothing was disturbed: the session and speculation still work afterwards. */
        ember_spec_stats stats;
        ember_spec_stats_init(&stats);
        assert_int_equal(ember_session_spec_stats(s, &stats), EMBER_OK);
        assert_int_equal(ember_generate(s, smp, NULL, NULL) < 0, false);
        ember_sampler_free(smp);
        ember_session_free(s);
    }
}

/* Freeing the session and the sampler from the callback stops the generation after that token and frees
 * both when ember_generate returns (LeakSanitizer checks that they are freed, ASan that nothing uses
 * them after). */
static void test_free_from_callback(void **state) {
    (void)state;
    ember_session *s = fed_session();
    set_lookup(s);
    struct probe pr = {.session = s, .sampler = test_greedy_sampler(), .free_session = true};
    ember_generate_params gp;
    ember_generate_params_init(&gp);
    gp.max_tokens = 20;
    gp.on_token = meddle;
    gp.user_data = &pr;
    size_t count = 0;
    assert_int_equal(ember_generate(s, pr.sampler, &gp, &count), EMBER_STOPPED);
    assert_int_equal(count, 3);
    assert_int_equal(pr.wrong, 0);
}

struct engine_probe {
    ember_engine *engine;
    size_t calls, refused, wrong;
    bool free_engine;
};

static bool engine_meddle(ember_request *req, ember_token token, const char *text, size_t len, void *ud) {
    (void)req, (void)text, (void)len;
    struct engine_probe *ep = ud;
    ++ep->calls;
    bool busy;
    ember_status st = ember_engine_step(ep->engine, &busy);
    if (st == EMBER_ERR_INVALID_STATE && strstr(ember_last_error(), "callback")) ++ep->refused; else ++ep->wrong;
    st = ember_engine_pin_prefix(ep->engine, &token, 1);
    if (st == EMBER_ERR_INVALID_STATE && strstr(ember_last_error(), "callback")) ++ep->refused; else ++ep->wrong;
    ember_engine_stats stats;
    ember_engine_stats_init(&stats);
    assert_int_equal(ember_engine_get_stats(ep->engine, &stats), EMBER_OK);
    if (ep->free_engine && ep->calls == 2) ember_engine_free(ep->engine);
    return true;
}

static void run_engine(bool manual, bool free_engine) {
    ember_engine_params ep;
    ember_engine_params_init(&ep);
    ep.n_ctx = 128;
    ep.n_seq_max = 2;
    ep.n_threads = 1;
    ep.manual_step = manual;
    ember_engine *e = NULL;
    assert_int_equal(ember_engine_create(g_model, &ep, &e), EMBER_OK);
    struct engine_probe pr = {.engine = e, .free_engine = free_engine};
    ember_token toks[32];
    const size_t n = test_tokenize(g_model, "Once upon a time", toks, 32);
    ember_request_params rp;
    ember_request_params_init(&rp);
    rp.prompt = toks;
    rp.n_prompt = n;
    rp.max_tokens = 6;
    rp.on_token = engine_meddle;
    rp.user_data = &pr;
    ember_request *r = NULL;
    assert_int_equal(ember_request_submit(e, &rp, &r), EMBER_OK);
    if (manual) {
        bool busy = true;
        for (int i = 0; i < 100 && busy && pr.calls < 2; ++i) assert_int_equal(ember_engine_step(e, &busy), EMBER_OK);
        if (free_engine) {
            /* The step whose callback freed the engine freed it when it returned: the request ended. */
            ember_request_state rs;
            size_t cnt;
            assert_int_equal(ember_request_poll(r, NULL, 0, &cnt, &rs), EMBER_OK);
            assert_int_equal(rs, EMBER_REQUEST_CANCELLED);
            ember_request_free(r);
            assert_int_equal(pr.wrong, 0);
            return;
        }
        while (busy) assert_int_equal(ember_engine_step(e, &busy), EMBER_OK);
    } else {
        assert_int_equal(ember_request_wait(r, UINT32_MAX), EMBER_OK);
    }
    assert_int_equal(pr.wrong, 0);
    assert_int_equal(pr.refused, pr.calls * 2);
    assert_true(pr.calls >= 2);
    ember_request_free(r);
    ember_engine_free(e);
}

static void test_engine_callback(void **state) {
    (void)state;
    run_engine(true, false);
    run_engine(false, false);
    run_engine(true, true);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generate_callback),
        cmocka_unit_test(test_free_from_callback),
        cmocka_unit_test(test_engine_callback),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
