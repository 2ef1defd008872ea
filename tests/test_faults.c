/* test_faults.c — bad input and misuse through the public ABI give errors, never crashes: NULL for every
 * pointer of every function, token ids outside the vocabulary, NaN and infinite logits, a full context
 * (sessions, ember_generate, engine requests, restored states), handles used in the wrong state or after
 * the object they came from is gone (a request after its engine), cancellation at every stage (each
 * progress callback of a load, a queued request, each prompt chunk, each generated token, the streaming
 * callbacks), and a model file replaced or deleted while it is mapped.
 *
 * What cannot be checked: a freed or made-up handle (C cannot tell one from a live one: using it is
 * undefined behaviour, as with free()), and a model file truncated or rewritten in place while mapped
 * (reading the lost pages raises SIGBUS in the process; the library installs no signal handlers in its
 * host). docs/reliability.md says how applications replace model files safely. */
#include "test_api_util.h"

#include <ember/ember.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static ember_model *g_model;
static char g_path[4096];

static int setup(void **state) {
    (void)state;
    const char *p = test_find_model("stories260K.gguf", "stories260K/stories260K.gguf");
    test_require(p, "stories260K.gguf");
    snprintf(g_path, sizeof g_path, "%s", p);
    return ember_model_load(g_path, NULL, &g_model) == EMBER_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    ember_model_free(g_model);
    return 0;
}

static ember_session *make_session(uint32_t n_ctx) {
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.n_ctx = n_ctx;
    sp.n_threads = 1;
    ember_session *s = NULL;
    assert_int_equal(ember_session_create(g_model, &sp, &s), EMBER_OK);
    return s;
}

static ember_engine *make_engine(uint32_t n_ctx, uint32_t n_seq_max, bool manual) {
    ember_engine_params ep;
    ember_engine_params_init(&ep);
    ep.n_ctx = n_ctx;
    ep.n_seq_max = n_seq_max;
    ep.n_threads = 1;
    ep.manual_step = manual;
    ember_engine *e = NULL;
    assert_int_equal(ember_engine_create(g_model, &ep, &e), EMBER_OK);
    return e;
}

static ember_request *submit(ember_engine *e, const ember_token *prompt, size_t n, uint32_t max_tokens,
                             ember_request_token_fn fn, void *ud) {
    ember_request_params rp;
    ember_request_params_init(&rp);
    rp.prompt = prompt;
    rp.n_prompt = n;
    rp.max_tokens = max_tokens;
    rp.on_token = fn;
    rp.user_data = ud;
    ember_request *r = NULL;
    assert_int_equal(ember_request_submit(e, &rp, &r), EMBER_OK);
    return r;
}

static ember_request_state poll_state(ember_request *r, size_t *count) {
    ember_request_state st;
    size_t n = 0;
    assert_int_equal(ember_request_poll(r, NULL, 0, &n, &st), EMBER_OK);
    if (count) *count = n;
    return st;
}

#define EXPECT_NULL_ARG(call)                                      \
    do {                                                           \
        ember_status st_ = (call);                                 \
        if (st_ != EMBER_ERR_INVALID_ARGUMENT)                     \
            fail_msg("%s gave %s", #call, ember_status_string(st_)); \
        assert_true(strlen(ember_last_error()) > 0);               \
    } while (0)

/* Every function that takes a pointer, with NULL for each pointer that may not be NULL. */
static void test_null_everywhere(void **state) {
    (void)state;
    ember_model *m = g_model;
    ember_session *s = make_session(32);
    ember_sampler *smp = test_greedy_sampler();
    ember_engine *e = make_engine(64, 1, true);
    ember_token tok[4] = {1, 2, 3, 4}, t;
    size_t n;
    uint32_t u32;
    int64_t i64;
    double f64;
    const char *str;
    const float *logits;
    char buf[64];
    float lg[8] = {0};
    bool busy;

    ember_model *mo = (ember_model *)1;
    EXPECT_NULL_ARG(ember_model_load(NULL, NULL, &mo));
    assert_null(mo);
    EXPECT_NULL_ARG(ember_model_load(g_path, NULL, NULL));
    ember_model_info info;
    ember_model_info_init(&info);
    EXPECT_NULL_ARG(ember_model_get_info(NULL, &info));
    EXPECT_NULL_ARG(ember_model_get_info(m, NULL));
    EXPECT_NULL_ARG(ember_model_meta_count(NULL, &n));
    EXPECT_NULL_ARG(ember_model_meta_count(m, NULL));
    EXPECT_NULL_ARG(ember_model_meta_key(NULL, 0, &str));
    EXPECT_NULL_ARG(ember_model_meta_key(m, 0, NULL));
    EXPECT_NULL_ARG(ember_model_meta_string(NULL, "general.name", buf, sizeof buf, &n));
    EXPECT_NULL_ARG(ember_model_meta_string(m, NULL, buf, sizeof buf, &n));
    EXPECT_NULL_ARG(ember_model_meta_string(m, "general.architecture", buf, sizeof buf, NULL));
    EXPECT_NULL_ARG(ember_model_meta_string(m, "general.architecture", NULL, 8, &n));
    EXPECT_NULL_ARG(ember_model_meta_int(NULL, "llama.block_count", &i64));
    EXPECT_NULL_ARG(ember_model_meta_int(m, NULL, &i64));
    EXPECT_NULL_ARG(ember_model_meta_int(m, "llama.block_count", NULL));
    EXPECT_NULL_ARG(ember_model_meta_float(NULL, "x", &f64));
    EXPECT_NULL_ARG(ember_model_meta_float(m, NULL, &f64));
    EXPECT_NULL_ARG(ember_model_meta_float(m, "x", NULL));
    ember_tensor_info ti;
    ember_tensor_info_init(&ti);
    EXPECT_NULL_ARG(ember_model_tensor_count(NULL, &n));
    EXPECT_NULL_ARG(ember_model_tensor_count(m, NULL));
    EXPECT_NULL_ARG(ember_model_tensor_info(NULL, 0, &ti));
    EXPECT_NULL_ARG(ember_model_tensor_info(m, 0, NULL));

    EXPECT_NULL_ARG(ember_tokenize(NULL, "a", 1, 0, tok, 4, &n));
    EXPECT_NULL_ARG(ember_tokenize(m, NULL, 1, 0, tok, 4, &n));
    EXPECT_NULL_ARG(ember_tokenize(m, "a", 1, 0, tok, 4, NULL));
    EXPECT_NULL_ARG(ember_tokenize(m, "abc", 3, 0, NULL, 4, &n));
    assert_int_equal(ember_tokenize(m, NULL, 0, 0, NULL, 0, &n), EMBER_OK); /* empty text may be NULL */
    assert_int_equal(n, 0);
    EXPECT_NULL_ARG(ember_token_to_piece(NULL, 1, 0, buf, sizeof buf, &n));
    EXPECT_NULL_ARG(ember_token_to_piece(m, 1, 0, buf, sizeof buf, NULL));
    EXPECT_NULL_ARG(ember_token_to_piece(m, 300, 0, NULL, 8, &n));
    EXPECT_NULL_ARG(ember_detokenize(NULL, tok, 4, 0, buf, sizeof buf, &n));
    EXPECT_NULL_ARG(ember_detokenize(m, NULL, 4, 0, buf, sizeof buf, &n));
    EXPECT_NULL_ARG(ember_detokenize(m, tok, 4, 0, buf, sizeof buf, NULL));
    EXPECT_NULL_ARG(ember_detokenize(m, tok, 4, 0, NULL, 8, &n));
    assert_int_equal(ember_token_bos(NULL), -1);
    assert_int_equal(ember_token_eos(NULL), -1);
    assert_false(ember_token_is_eog(NULL, 2));

    ember_session *so = (ember_session *)1;
    EXPECT_NULL_ARG(ember_session_create(NULL, NULL, &so));
    assert_null(so);
    EXPECT_NULL_ARG(ember_session_create(m, NULL, NULL));
    EXPECT_NULL_ARG(ember_session_fork(NULL, &so));
    EXPECT_NULL_ARG(ember_session_fork(s, NULL));
    EXPECT_NULL_ARG(ember_session_feed(NULL, tok, 1));
    EXPECT_NULL_ARG(ember_session_feed(s, NULL, 1));
    assert_int_equal(ember_session_feed(s, NULL, 0), EMBER_OK); /* nothing to feed */
    EXPECT_NULL_ARG(ember_session_logits(NULL, &logits, &n));
    EXPECT_NULL_ARG(ember_session_logits(s, NULL, &n));
    EXPECT_NULL_ARG(ember_session_position(NULL, &u32));
    EXPECT_NULL_ARG(ember_session_position(s, NULL));
    EXPECT_NULL_ARG(ember_session_context_length(NULL, &u32));
    EXPECT_NULL_ARG(ember_session_context_length(s, NULL));
    EXPECT_NULL_ARG(ember_session_truncate(NULL, 0));
    EXPECT_NULL_ARG(ember_session_save(NULL, NULL, 0, &n));
    EXPECT_NULL_ARG(ember_session_save(s, NULL, 0, NULL));
    EXPECT_NULL_ARG(ember_session_save(s, NULL, 100000, &n));
    EXPECT_NULL_ARG(ember_session_restore(NULL, buf, 8));
    EXPECT_NULL_ARG(ember_session_restore(s, NULL, 8));
    EXPECT_NULL_ARG(ember_session_save_file(NULL, "/tmp/x"));
    EXPECT_NULL_ARG(ember_session_save_file(s, NULL));
    EXPECT_NULL_ARG(ember_session_restore_file(NULL, "/tmp/x"));
    EXPECT_NULL_ARG(ember_session_restore_file(s, NULL));

    ember_spec_params spp;
    ember_spec_params_init(&spp);
    spp.mode = EMBER_SPEC_LOOKUP;
    EXPECT_NULL_ARG(ember_session_set_speculation(NULL, &spp));
    spp.mode = EMBER_SPEC_DRAFT; /* without a draft model */
    EXPECT_NULL_ARG(ember_session_set_speculation(s, &spp));
    spp.mode = (ember_spec_mode)9;
    EXPECT_NULL_ARG(ember_session_set_speculation(s, &spp));
    assert_int_equal(ember_session_set_speculation(s, NULL), EMBER_OK); /* NULL: detach */
    ember_spec_stats sst;
    ember_spec_stats_init(&sst);
    EXPECT_NULL_ARG(ember_session_spec_stats(NULL, &sst));
    EXPECT_NULL_ARG(ember_session_spec_stats(s, NULL));
    assert_int_equal(ember_session_spec_stats(s, &sst), EMBER_ERR_INVALID_STATE); /* nothing attached */
    ember_spec_params_init(NULL);
    ember_spec_stats_init(NULL);

    ember_sampler *sa = (ember_sampler *)1;
    EXPECT_NULL_ARG(ember_sampler_create(NULL, NULL));
    assert_int_equal(ember_sampler_create(NULL, &sa), EMBER_OK); /* NULL params: defaults */
    ember_sampler_free(sa);
    EXPECT_NULL_ARG(ember_sampler_sample(NULL, lg, 8, &t));
    EXPECT_NULL_ARG(ember_sampler_sample(smp, NULL, 8, &t));
    EXPECT_NULL_ARG(ember_sampler_sample(smp, lg, 8, NULL));
    EXPECT_NULL_ARG(ember_sampler_accept(NULL, 1));
    EXPECT_NULL_ARG(ember_sampler_reset(NULL));
    EXPECT_NULL_ARG(ember_generate_next(NULL, smp, &t, &str, &n));
    EXPECT_NULL_ARG(ember_generate_next(s, NULL, &t, &str, &n));
    EXPECT_NULL_ARG(ember_generate_next(s, smp, NULL, &str, &n));
    EXPECT_NULL_ARG(ember_generate(NULL, smp, NULL, &n));
    EXPECT_NULL_ARG(ember_generate(s, NULL, NULL, &n));

    ember_engine *eo = (ember_engine *)1;
    EXPECT_NULL_ARG(ember_engine_create(NULL, NULL, &eo));
    assert_null(eo);
    EXPECT_NULL_ARG(ember_engine_create(m, NULL, NULL));
    EXPECT_NULL_ARG(ember_engine_step(NULL, &busy));
    assert_int_equal(ember_engine_step(e, NULL), EMBER_OK); /* out_busy may be NULL */
    ember_engine_stats es;
    ember_engine_stats_init(&es);
    EXPECT_NULL_ARG(ember_engine_get_stats(NULL, &es));
    EXPECT_NULL_ARG(ember_engine_get_stats(e, NULL));
    ember_memory_estimate me;
    ember_memory_estimate_init(&me);
    EXPECT_NULL_ARG(ember_estimate_memory(NULL, NULL, &me));
    EXPECT_NULL_ARG(ember_estimate_memory(m, NULL, NULL));
    EXPECT_NULL_ARG(ember_estimate_memory_file(NULL, NULL, &me));
    EXPECT_NULL_ARG(ember_estimate_memory_file(g_path, NULL, NULL));
    EXPECT_NULL_ARG(ember_engine_pin_prefix(NULL, tok, 4));
    EXPECT_NULL_ARG(ember_engine_pin_prefix(e, NULL, 4));
    ember_request_params rp;
    ember_request_params_init(&rp);
    rp.prompt = tok;
    rp.n_prompt = 4;
    ember_request *ro = (ember_request *)1;
    EXPECT_NULL_ARG(ember_request_submit(NULL, &rp, &ro));
    assert_null(ro);
    EXPECT_NULL_ARG(ember_request_submit(e, NULL, &ro));
    EXPECT_NULL_ARG(ember_request_submit(e, &rp, NULL));
    rp.prompt = NULL;
    EXPECT_NULL_ARG(ember_request_submit(e, &rp, &ro));
    ember_request_state rs;
    EXPECT_NULL_ARG(ember_request_poll(NULL, tok, 4, &n, &rs));
    ember_request *r = submit(e, tok, 4, 2, NULL, NULL);
    EXPECT_NULL_ARG(ember_request_poll(r, NULL, 4, &n, &rs));
    assert_int_equal(ember_request_poll(r, NULL, 0, NULL, NULL), EMBER_OK); /* outputs may be NULL */
    EXPECT_NULL_ARG(ember_request_text(NULL, buf, sizeof buf, &n));
    EXPECT_NULL_ARG(ember_request_text(r, buf, sizeof buf, NULL));
    EXPECT_NULL_ARG(ember_request_text(r, NULL, 8, &n));
    EXPECT_NULL_ARG(ember_request_wait(NULL, 0));
    EXPECT_NULL_ARG(ember_request_cancel(NULL));
    ember_status why;
    EXPECT_NULL_ARG(ember_request_error(NULL, &why, &str));
    EXPECT_NULL_ARG(ember_request_error(r, NULL, &str));
    assert_int_equal(ember_request_error(r, &why, NULL), EMBER_OK);

    /* The inits and frees take NULL. */
    ember_model_params_init(NULL);
    ember_model_info_init(NULL);
    ember_tensor_info_init(NULL);
    ember_session_params_init(NULL);
    ember_sampler_params_init(NULL);
    ember_generate_params_init(NULL);
    ember_session_cancel(NULL);
    ember_cuda_device_params_init(NULL);
    assert_int_equal(ember_cuda_set_device(NULL), EMBER_ERR_INVALID_ARGUMENT);
    ember_engine_params_init(NULL);
    ember_engine_stats_init(NULL);
    ember_memory_estimate_init(NULL);
    ember_request_params_init(NULL);
    ember_model_free(NULL);
    ember_session_free(NULL);
    ember_sampler_free(NULL);
    ember_engine_free(NULL);
    ember_request_free(NULL);
    assert_non_null(ember_status_string((ember_status)12345));
    assert_non_null(ember_last_error());

    ember_request_free(r);
    ember_engine_free(e);
    ember_sampler_free(smp);
    ember_session_free(s);
}

/* Token ids outside the vocabulary, and logits that are not numbers. */
static void test_invalid_tokens_and_logits(void **state) {
    (void)state;
    ember_model_info info;
    ember_model_info_init(&info);
    assert_int_equal(ember_model_get_info(g_model, &info), EMBER_OK);
    const ember_token bad[] = {-1, (ember_token)info.n_vocab, (ember_token)info.n_vocab + 1000, INT32_MIN, INT32_MAX};
    ember_session *s = make_session(32);
    ember_engine *e = make_engine(64, 1, true);
    char buf[64];
    size_t n;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        ember_token seq[3] = {1, bad[i], 2};
        assert_int_equal(ember_session_feed(s, seq, 3), EMBER_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(ember_last_error(), "vocabulary"));
        assert_int_equal(ember_token_to_piece(g_model, bad[i], 0, buf, sizeof buf, &n), EMBER_ERR_INVALID_ARGUMENT);
        assert_int_equal(ember_detokenize(g_model, seq, 3, 0, buf, sizeof buf, &n), EMBER_ERR_INVALID_ARGUMENT);
        assert_false(ember_token_is_eog(g_model, bad[i]));
        ember_request_params rp;
        ember_request_params_init(&rp);
        rp.prompt = seq;
        rp.n_prompt = 3;
        ember_request *r = (ember_request *)1;
        assert_int_equal(ember_request_submit(e, &rp, &r), EMBER_ERR_INVALID_ARGUMENT);
        assert_null(r);
        assert_int_equal(ember_engine_pin_prefix(e, seq, 3), EMBER_ERR_INVALID_ARGUMENT);
    }
    /* Counts far beyond the context are refused before anything is copied (a copy of SIZE_MAX tokens
     * failed with EMBER_ERR_INTERNAL, "cannot create std::vector larger than max_size()"); the engine
     * never reads past the n_ctx-th token of such a "prompt". */
    const size_t huge[] = {SIZE_MAX, SIZE_MAX / 4, (size_t)1 << 40, 64};
    const ember_token few[3] = {1, 2, 3};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; ++i) {
        ember_request_params rp;
        ember_request_params_init(&rp);
        rp.prompt = few;
        rp.n_prompt = huge[i];
        ember_request *r = (ember_request *)1;
        assert_int_equal(ember_request_submit(e, &rp, &r), EMBER_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(ember_last_error(), "no room"));
        assert_null(r);
        assert_int_equal(ember_engine_pin_prefix(e, few, huge[i]), EMBER_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(ember_last_error(), "no room"));
        assert_int_equal(ember_session_feed(s, few, huge[i]), EMBER_ERR_CONTEXT_FULL);
    }
    uint32_t pos = 99;
    assert_int_equal(ember_session_position(s, &pos), EMBER_OK);
    assert_int_equal(pos, 0); /* nothing was evaluated */
    const float *logits;
    assert_int_equal(ember_session_logits(s, &logits, &n), EMBER_ERR_INVALID_STATE);
    ember_sampler *smp = test_greedy_sampler();
    ember_token t;
    assert_int_equal(ember_generate_next(s, smp, &t, NULL, NULL), EMBER_ERR_INVALID_STATE); /* nothing fed */
    assert_int_equal(ember_session_truncate(s, 1), EMBER_ERR_INVALID_ARGUMENT);
    /* Out-of-range ids in a sampler's history are harmless: they are never candidates. */
    assert_int_equal(ember_sampler_accept(smp, -7), EMBER_OK);
    assert_int_equal(ember_sampler_accept(smp, INT32_MAX), EMBER_OK);

    /* NaN and infinite logits: a token inside the range or an error, for every stage of the chain. */
    enum { NV = 512 };
    static float lg[NV];
    uint64_t rng = 42;
    ember_sampler_params sp;
    for (int variant = 0; variant < 4; ++variant) {
        ember_sampler_params_init(&sp);
        sp.temperature = variant == 0 ? 0.0f : 0.8f;
        sp.top_k = variant == 2 ? 10 : 0;
        sp.top_p = variant == 3 ? 0.9f : 1.0f;
        sp.min_p = variant == 3 ? 0.1f : 0.0f;
        sp.repeat_penalty = variant == 1 ? 1.3f : 1.0f;
        ember_sampler *x = NULL;
        assert_int_equal(ember_sampler_create(&sp, &x), EMBER_OK);
        ember_sampler_accept(x, 5);
        for (int round = 0; round < 20; ++round) {
            for (int i = 0; i < NV; ++i) {
                const float r = test_randf(&rng, 0, 1);
                lg[i] = r < 0.1f ? NAN : r < 0.15f ? INFINITY : r < 0.2f ? -INFINITY : test_randf(&rng, -10, 10);
                if (round == 0) lg[i] = NAN;
                if (round == 1) lg[i] = -INFINITY;
            }
            ember_token got = -1;
            const ember_status st = ember_sampler_sample(x, lg, NV, &got);
            assert_true(st == EMBER_OK || st < 0);
            if (st == EMBER_OK) assert_true(got >= 0 && got < NV);
        }
        ember_sampler_free(x);
    }
    ember_sampler_params_init(&sp);
    sp.temperature = NAN;
    ember_sampler *x = NULL;
    const ember_status st = ember_sampler_create(&sp, &x);
    if (st == EMBER_OK) {
        ember_token got = -1;
        for (int i = 0; i < NV; ++i) lg[i] = (float)i;
        const ember_status s2 = ember_sampler_sample(x, lg, NV, &got);
        if (s2 == EMBER_OK) assert_true(got >= 0 && got < NV);
        ember_sampler_free(x);
    }
    ember_sampler_free(smp);
    ember_engine_free(e);
    ember_session_free(s);
}

/* A full context, in every place it can fill. */
static void test_context_overflow(void **state) {
    (void)state;
    ember_token prompt[64];
    const size_t n = test_tokenize(g_model, "Once upon a time", prompt, 64);
    assert_true(n > 2 && n < 16);
    ember_session *s = make_session(16);
    ember_token many[17];
    for (int i = 0; i < 17; ++i) many[i] = prompt[i % n];
    assert_int_equal(ember_session_feed(s, many, 17), EMBER_ERR_CONTEXT_FULL);
    assert_int_equal(ember_session_feed(s, many, 16), EMBER_OK);
    assert_int_equal(ember_session_feed(s, many, 1), EMBER_ERR_CONTEXT_FULL);
    ember_sampler *smp = test_greedy_sampler();
    ember_token t;
    assert_int_equal(ember_generate_next(s, smp, &t, NULL, NULL), EMBER_ERR_CONTEXT_FULL);
    uint32_t pos = 0;
    assert_int_equal(ember_session_position(s, &pos), EMBER_OK);
    assert_int_equal(pos, 16);
    /* ember_generate with no limit runs into the end of the context (or an end of generation). */
    assert_int_equal(ember_session_truncate(s, (uint32_t)n), EMBER_OK);
    assert_int_equal(ember_session_feed(s, &prompt[n - 1], 1), EMBER_OK);
    ember_generate_params gp;
    ember_generate_params_init(&gp);
    gp.max_tokens = 0;
    size_t count = 0;
    const ember_status st = ember_generate(s, smp, &gp, &count);
    assert_true(st == EMBER_ERR_CONTEXT_FULL || st == EMBER_END_OF_GENERATION);
    assert_int_equal(ember_session_position(s, &pos), EMBER_OK);
    assert_true(pos <= 16);
    /* A saved state longer than the session it is restored into. */
    size_t len = 0;
    assert_int_equal(ember_session_save(s, NULL, 0, &len), EMBER_OK);
    void *buf = malloc(len);
    assert_int_equal(ember_session_save(s, buf, len, &len), EMBER_OK);
    ember_session *small = make_session(8);
    assert_int_equal(ember_session_restore(small, buf, len), EMBER_ERR_CONTEXT_FULL);
    assert_int_equal(ember_session_position(small, &pos), EMBER_OK);
    assert_int_equal(pos, 0);
    free(buf);
    ember_session_free(small);
    ember_session_free(s);

    /* Engine: a prompt that leaves no room is refused; generation stops at the end of the context. */
    ember_engine *e = make_engine(32, 2, true);
    ember_token long_prompt[40];
    for (int i = 0; i < 40; ++i) long_prompt[i] = prompt[i % n];
    ember_request_params rp;
    ember_request_params_init(&rp);
    rp.prompt = long_prompt;
    rp.n_prompt = 32;
    ember_request *r = (ember_request *)1;
    assert_int_equal(ember_request_submit(e, &rp, &r), EMBER_ERR_INVALID_ARGUMENT);
    assert_null(r);
    r = submit(e, long_prompt, 30, 0, NULL, NULL); /* until the end of generation or a full context */
    bool busy = true;
    for (int i = 0; i < 64 && busy; ++i) assert_int_equal(ember_engine_step(e, &busy), EMBER_OK);
    assert_false(busy);
    assert_int_equal(poll_state(r, &count), EMBER_REQUEST_DONE);
    assert_true(count <= 3); /* 32 - 30 fed, and one more sampled from the full context, not fed */
    ember_request_free(r);
    ember_sampler_free(smp);
    ember_engine_free(e);
}

/* Handles in the wrong state, from the wrong model, or outliving what made them. */
static void test_wrong_handles(void **state) {
    (void)state;
    /* A request handle stays usable after its engine is freed: its last state, its tokens, its text. */
    ember_token prompt[64];
    const size_t n = test_tokenize(g_model, "One day, a big bird flew over the town", prompt, 64);
    ember_engine *e = make_engine(64, 1, true);
    ember_request *done = submit(e, prompt, n, 3, NULL, NULL);
    ember_request *running = submit(e, prompt, n, 40, NULL, NULL);
    ember_request *queued = submit(e, prompt, n, 3, NULL, NULL);
    bool busy = true;
    for (int i = 0; i < 6; ++i) assert_int_equal(ember_engine_step(e, &busy), EMBER_OK);
    assert_int_equal(poll_state(done, NULL), EMBER_REQUEST_DONE);
    assert_int_equal(poll_state(running, NULL), EMBER_REQUEST_RUNNING);
    ember_engine_free(e);
    size_t count = 0;
    assert_int_equal(poll_state(done, &count), EMBER_REQUEST_DONE);
    assert_int_equal(count, 3);
    assert_int_equal(poll_state(running, &count), EMBER_REQUEST_CANCELLED);
    assert_true(count >= 1 && count < 40);
    const ember_request_state qs = poll_state(queued, &count);
    assert_true(qs == EMBER_REQUEST_CANCELLED || qs == EMBER_REQUEST_DONE);
    ember_request *all[3] = {done, running, queued};
    for (int i = 0; i < 3; ++i) {
        char text[256];
        size_t len = 0;
        ember_token got[64];
        ember_request_state rs;
        assert_int_equal(ember_request_wait(all[i], UINT32_MAX), EMBER_OK); /* ended: returns at once */
        assert_int_equal(ember_request_poll(all[i], got, 64, &count, &rs), EMBER_OK);
        assert_int_equal(ember_request_text(all[i], text, sizeof text, &len), EMBER_OK);
        assert_int_equal(ember_request_cancel(all[i]), EMBER_OK); /* ended: does nothing */
        ember_status why = EMBER_ERR_INTERNAL;
        assert_int_equal(ember_request_error(all[i], &why, NULL), EMBER_OK);
        assert_int_equal(why, EMBER_OK);
        ember_request_free(all[i]);
    }

    /* A worker engine refuses manual steps; a vocab-only model refuses sessions and engines. */
    ember_engine *w = make_engine(64, 1, false);
    assert_int_equal(ember_engine_step(w, NULL), EMBER_ERR_INVALID_STATE);
    ember_engine_free(w);
    ember_model_params mp;
    ember_model_params_init(&mp);
    mp.vocab_only = true;
    ember_model *vocab = NULL;
    assert_int_equal(ember_model_load(g_path, &mp, &vocab), EMBER_OK);
    ember_session *s = (ember_session *)1;
    assert_int_equal(ember_session_create(vocab, NULL, &s), EMBER_ERR_INVALID_ARGUMENT);
    assert_null(s);
    ember_engine *ve = (ember_engine *)1;
    assert_int_equal(ember_engine_create(vocab, NULL, &ve), EMBER_ERR_INVALID_ARGUMENT);
    assert_null(ve);
    ember_memory_estimate est;
    ember_memory_estimate_init(&est);
    assert_int_equal(ember_estimate_memory(vocab, NULL, &est), EMBER_ERR_INVALID_ARGUMENT);
    ember_model_free(vocab);

    /* Out-of-range values in params structs. */
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.backend = (ember_backend_kind)77;
    assert_int_equal(ember_session_create(g_model, &sp, &s), EMBER_ERR_INVALID_ARGUMENT);
    ember_session_params_init(&sp);
    sp.n_ctx = UINT32_MAX;
    assert_int_equal(ember_session_create(g_model, &sp, &s), EMBER_ERR_INVALID_ARGUMENT);
    ember_session_params_init(&sp);
    sp.n_threads = 100000;
    assert_int_equal(ember_session_create(g_model, &sp, &s), EMBER_ERR_INVALID_ARGUMENT);
    ember_engine_params ep;
    ember_engine_params_init(&ep);
    ep.n_seq_max = UINT32_MAX;
    assert_int_equal(ember_engine_create(g_model, &ep, &ve), EMBER_ERR_INVALID_ARGUMENT);
    ember_engine_params_init(&ep);
    ep.kv_bytes = UINT64_MAX;
    assert_int_equal(ember_engine_create(g_model, &ep, &ve), EMBER_ERR_INVALID_ARGUMENT);

    /* Data that is not what it claims to be. */
    s = make_session(32);
    const char junk[] = "EMBERSES but not really a saved state, just text that starts like one";
    assert_int_equal(ember_session_restore(s, junk, sizeof junk), EMBER_ERR_CORRUPT_DATA);
    assert_int_equal(ember_session_restore(s, junk, 3), EMBER_ERR_CORRUPT_DATA);
    assert_int_equal(ember_session_restore(s, junk, 0), EMBER_ERR_CORRUPT_DATA);
    char buf[8];
    size_t len;
    assert_int_equal(ember_model_meta_string(g_model, "general.architecture", buf, 2, &len),
                     EMBER_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(ember_model_meta_key(g_model, (size_t)-1, &(const char *){NULL}), EMBER_ERR_NOT_FOUND);
    ember_tensor_info ti;
    ember_tensor_info_init(&ti);
    assert_int_equal(ember_model_tensor_info(g_model, (size_t)-1, &ti), EMBER_ERR_NOT_FOUND);
    /* Invalid UTF-8 in, valid UTF-8 out. */
    const char bytes[] = "\xff\xfe ok \xc3\x28 \xe2\x82 \xf0\x9f\x98";
    ember_token toks[64];
    size_t nt = 0;
    assert_int_equal(ember_tokenize(g_model, bytes, sizeof bytes - 1, 0, toks, 64, &nt), EMBER_OK);
    char out[256];
    assert_int_equal(ember_detokenize(g_model, toks, nt, 0, out, sizeof out, &len), EMBER_OK);
    assert_int_equal(strlen(out), len);
    ember_session_free(s);
}

/* Cancelling a load at each of its progress callbacks: EMBER_ERR_CANCELLED, nothing created. */
struct cancel_at {
    int call, calls;
};

static bool cancel_on_call(float p, void *ud) {
    struct cancel_at *c = ud;
    (void)p;
    return c->calls++ != c->call;
}

static bool count_calls(float p, void *ud) {
    (void)p;
    ++*(int *)ud;
    return true;
}

static void test_cancel_load(void **state) {
    (void)state;
    int total = 0;
    ember_model_params mp;
    ember_model_params_init(&mp);
    mp.progress = count_calls;
    mp.progress_user_data = &total;
    ember_model *m = NULL;
    assert_int_equal(ember_model_load(g_path, &mp, &m), EMBER_OK);
    ember_model_free(m);
    assert_true(total >= 2);
    for (int k = 0; k < total; ++k) {
        struct cancel_at c = {k, 0};
        mp.progress = cancel_on_call;
        mp.progress_user_data = &c;
        m = (ember_model *)1;
        assert_int_equal(ember_model_load(g_path, &mp, &m), EMBER_ERR_CANCELLED);
        assert_null(m);
        assert_int_equal(c.calls, k + 1); /* no callback after the one that cancelled */
    }
}

struct stop_after {
    int seen, limit;
};

static bool request_stop_after(ember_request *r, ember_token t, const char *text, size_t len, void *ud) {
    (void)r;
    (void)t;
    (void)text;
    (void)len;
    struct stop_after *s = ud;
    return ++s->seen < s->limit;
}

static bool generate_stop_after(ember_token t, const char *text, size_t len, void *ud) {
    (void)t;
    (void)text;
    (void)len;
    struct stop_after *s = ud;
    return ++s->seen < s->limit;
}

/* Cancelling requests at every stage: queued, at each prompt chunk, at each generated token (by
 * ember_request_cancel and by the callback), and freeing a running request; ember_generate's callback. */
static void test_cancel_requests(void **state) {
    (void)state;
    char text[2048] = "";
    for (int i = 0; i < 8; ++i) strcat(text, "The cat sat on the mat and looked at the sun. ");
    ember_token prompt[512];
    const size_t n = test_tokenize(g_model, text, prompt, 512);
    assert_true(n > 64);
    ember_engine_stats st;

    /* Queued: the only slot is busy, the second request never starts. */
    ember_engine *e = make_engine(256, 1, true);
    ember_request *first = submit(e, prompt, 8, 4, NULL, NULL);
    ember_request *second = submit(e, prompt, 8, 4, NULL, NULL);
    assert_int_equal(ember_engine_step(e, NULL), EMBER_OK);
    assert_int_equal(poll_state(second, NULL), EMBER_REQUEST_QUEUED);
    assert_int_equal(ember_request_cancel(second), EMBER_OK);
    assert_int_equal(ember_engine_step(e, NULL), EMBER_OK);
    size_t count = 99;
    assert_int_equal(poll_state(second, &count), EMBER_REQUEST_CANCELLED);
    assert_int_equal(count, 0);
    ember_request_free(second);
    ember_request_free(first);
    ember_engine_free(e);

    /* At each step of a prompt fed in chunks of 16, then at each generated token. */
    ember_engine_params ep;
    ember_engine_params_init(&ep);
    ep.n_ctx = 256;
    ep.n_seq_max = 1;
    ep.n_threads = 1;
    ep.n_batch = 16;
    ep.manual_step = true;
    const int chunks = (int)((n + 15) / 16);
    for (int k = 0; k < chunks + 6; ++k) {
        e = NULL;
        assert_int_equal(ember_engine_create(g_model, &ep, &e), EMBER_OK);
        ember_request *r = submit(e, prompt, n, 8, NULL, NULL);
        for (int i = 0; i < k; ++i) assert_int_equal(ember_engine_step(e, NULL), EMBER_OK);
        assert_int_equal(ember_request_cancel(r), EMBER_OK);
        bool busy = true;
        assert_int_equal(ember_engine_step(e, &busy), EMBER_OK);
        const ember_request_state rs = poll_state(r, &count);
        assert_true(rs == EMBER_REQUEST_CANCELLED || (rs == EMBER_REQUEST_DONE && k >= chunks + 6));
        if (k < chunks) assert_int_equal(count, 0);
        else assert_true(count <= (size_t)(k - chunks + 1));
        assert_false(busy);
        ember_engine_stats_init(&st);
        assert_int_equal(ember_engine_get_stats(e, &st), EMBER_OK);
        assert_int_equal(st.n_blocks_used, 0);
        ember_request_free(r);
        ember_engine_free(e);
    }

    /* The callback returns false after k tokens: cancelled with exactly k tokens. */
    e = make_engine(256, 2, false);
    for (int k = 1; k <= 4; ++k) {
        struct stop_after s = {0, k};
        ember_request *r = submit(e, prompt, 12, 30, request_stop_after, &s);
        assert_int_equal(ember_request_wait(r, UINT32_MAX), EMBER_OK);
        assert_int_equal(poll_state(r, &count), EMBER_REQUEST_CANCELLED);
        assert_int_equal(count, (size_t)k);
        ember_request_free(r);
    }
    /* Freed while running: the engine carries on and frees its blocks. */
    for (int i = 0; i < 4; ++i) ember_request_free(submit(e, prompt, n, 30, NULL, NULL));
    for (int i = 0; i < 1000; ++i) {
        ember_engine_stats_init(&st);
        assert_int_equal(ember_engine_get_stats(e, &st), EMBER_OK);
        if (st.n_running == 0 && st.n_queued == 0) break;
        usleep(2000);
    }
    assert_int_equal(st.n_running + st.n_queued, 0);
    assert_int_equal(st.n_blocks_used, 0);
    ember_engine_free(e);

    /* ember_generate's callback stops it after k tokens. */
    ember_session *s = make_session(128);
    ember_sampler *smp = test_greedy_sampler();
    assert_int_equal(ember_session_feed(s, prompt, 12), EMBER_OK);
    ember_generate_params gp;
    ember_generate_params_init(&gp);
    struct stop_after stop = {0, 3};
    gp.on_token = generate_stop_after;
    gp.user_data = &stop;
    gp.max_tokens = 50;
    assert_int_equal(ember_generate(s, smp, &gp, &count), EMBER_STOPPED);
    assert_int_equal(count, 3);
    ember_sampler_free(smp);
    ember_session_free(s);
}

static int copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    if (!in || !out) return -1;
    char buf[65536];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, k, out);
    fclose(in);
    return fclose(out);
}

static void greedy_tokens(const ember_model *m, ember_token *out, int n_gen) {
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.n_ctx = 64;
    sp.n_threads = 1;
    ember_session *s = NULL;
    assert_int_equal(ember_session_create(m, &sp, &s), EMBER_OK);
    ember_token prompt[32];
    size_t n = 0;
    assert_int_equal(ember_tokenize(m, "Once upon a time", 16, EMBER_TOKENIZE_ADD_SPECIAL, prompt, 32, &n), EMBER_OK);
    assert_int_equal(ember_session_feed(s, prompt, n), EMBER_OK);
    ember_sampler *smp = test_greedy_sampler();
    for (int i = 0; i < n_gen; ++i) {
        const ember_status st = ember_generate_next(s, smp, &out[i], NULL, NULL);
        assert_true(st == EMBER_OK || st == EMBER_END_OF_GENERATION);
    }
    ember_sampler_free(smp);
    ember_session_free(s);
}

/* A model file replaced (renamed over) or deleted after loading: the loaded model keeps working,
 * because it maps the file it opened, which lives on until it is unmapped. A file cut short before
 * loading is refused (tests/test_abi.c cuts stories260K at many points; tests/test_gguf.cpp at every byte). */
/* MemAvailable from /proc/meminfo in bytes (0 if unknown). */
static unsigned long long mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kib = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
    fclose(f);
    return kib * 1024;
}

/* Memory is compared with what is available before a session or engine allocates it: a clear
 * EMBER_ERR_OUT_OF_MEMORY with both figures, at once (a session of n_ctx 2^24 on stories260K used to
 * return OK after 52 s and 10 GiB, and larger ones met the OOM killer). Whichever backend AUTO takes:
 * the host's memory on the CPU, the device's on CUDA (where the driver used to fail the allocation
 * with its own message instead). */
static void test_memory_checked_first(void **state) {
    (void)state;
    /* An engine whose KV budget (4 TiB) no machine here has. */
    ember_engine_params ep;
    ember_engine_params_init(&ep);
    ep.n_ctx = 256;
    ep.n_seq_max = 1;
    ep.n_threads = 1;
    ep.manual_step = true;
    ep.kv_bytes = 1ull << 42;
    ember_memory_estimate est;
    ember_memory_estimate_init(&est);
    assert_int_equal(ember_estimate_memory(g_model, &ep, &est), EMBER_OK);
    ember_engine *e = (ember_engine *)1;
    assert_int_equal(ember_engine_create(g_model, &ep, &e), EMBER_ERR_OUT_OF_MEMORY);
    assert_null(e);
    char want[64];
    snprintf(want, sizeof want, "needs %llu bytes", (unsigned long long)(est.kv_bytes + est.compute_bytes));
    assert_non_null(strstr(ember_last_error(), want));   /* the figure ember_estimate_memory gives */
    assert_non_null(strstr(ember_last_error(), "available"));

    /* Sessions of n_ctx 2^24, with as many sequences as it takes to exceed what this machine has (their
     * estimate: an engine of that many sequences of that length): its host memory, and 1 TiB, more than
     * any GPU's, whose free memory a program cannot read through the API. */
    ep.kv_bytes = 0;
    ep.n_ctx = 1u << 24;
    assert_int_equal(ember_estimate_memory(g_model, &ep, &est), EMBER_OK);
    const unsigned long long avail = mem_available(), tib = 1ull << 40;
    const uint32_t n_seq = (uint32_t)((avail > tib ? avail : tib) / est.kv_bytes) + 1;
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.n_ctx = 1u << 24;
    sp.n_seq_max = n_seq;
    sp.n_threads = 1;
    ember_session *s = (ember_session *)1;
    assert_int_equal(ember_session_create(g_model, &sp, &s), EMBER_ERR_OUT_OF_MEMORY);
    assert_null(s);
    assert_non_null(strstr(ember_last_error(), "available"));
    printf("n_ctx 2^24 x %u sequences refused: %s\n", n_seq, ember_last_error());
}

static void test_model_file_replaced(void **state) {
    (void)state;
    char dir[] = "/tmp/ember_faults_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[512], other[512];
    snprintf(path, sizeof path, "%s/model.gguf", dir);
    snprintf(other, sizeof other, "%s/other.gguf", dir);
    assert_int_equal(copy_file(g_path, path), 0);
    ember_model *m = NULL;
    assert_int_equal(ember_model_load(path, NULL, &m), EMBER_OK);
    ember_token want[12], got[12];
    greedy_tokens(m, want, 12);

    /* Replaced by a truncated, corrupted copy (the safe way: a new file renamed over the old one). */
    FILE *f = fopen(other, "wb");
    const char junk[] = "GGUF and then nothing that parses";
    fwrite(junk, 1, sizeof junk, f);
    fclose(f);
    assert_int_equal(rename(other, path), 0);
    greedy_tokens(m, got, 12);
    assert_memory_equal(want, got, sizeof want);
    ember_model *again = NULL;
    assert_int_equal(ember_model_load(path, NULL, &again), EMBER_ERR_INVALID_MODEL); /* the new file */
    assert_null(again);
    /* Deleted. */
    assert_int_equal(unlink(path), 0);
    greedy_tokens(m, got, 12);
    assert_memory_equal(want, got, sizeof want);
    ember_model_free(m);
    assert_int_equal(ember_model_load(path, NULL, &again), EMBER_ERR_IO);
    assert_int_equal(rmdir(dir), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_everywhere),
        cmocka_unit_test(test_invalid_tokens_and_logits),
        cmocka_unit_test(test_context_overflow),
        cmocka_unit_test(test_wrong_handles),
        cmocka_unit_test(test_cancel_load),
        cmocka_unit_test(test_cancel_requests),
        cmocka_unit_test(test_model_file_replaced),
        cmocka_unit_test(test_memory_checked_first),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
