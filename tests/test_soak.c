/* test_soak.c — a long run through the public ABI: at least 20,000 generated tokens (EMBER_SOAK_TOKENS
 * to change it) across many sessions (feed, generate, save/restore, fork, truncate) and engine requests
 * (a long-lived engine driven by its worker, plus engines created and freed in between), on
 * stories260K. The resident memory (/proc/self/statm) is taken after a warm-up round and again at the
 * end: it must not have grown by more than kToleranceBytes. (Under ASan or TSan the RSS is the
 * sanitizer's own business, its quarantine and shadow memory, so it is printed, not checked; their
 * leak checker does the checking there.) Label "soak": `ctest -L soak` runs it alone. */
#include "test_api_util.h"

#include <ember/ember.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SOAK_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SOAK_SANITIZED 1
#endif
#endif
#ifndef SOAK_SANITIZED
#define SOAK_SANITIZED 0
#endif

/* Growth allowed between the end of the warm-up and the end of the run. Runs of 5,000 to 300,000 tokens
 * measured +20..+170 KiB (what the warm-up had not yet touched), not growing with the length. A leak of
 * 32 bytes per token exceeds it within the default 20,000 tokens; one leaked request per round (8 KiB)
 * within the 300,000 tokens of the CI soak stage (tools/reliability.sh). */
static const long kToleranceBytes = 512 * 1024;

static ember_model *g_model;
static long g_tokens;

/* Resident bytes, after handing free heap pages back to the kernel (glibc keeps up to 128 KiB free at
 * the top of each arena otherwise, which would be noise of several hundred KiB with a few threads). */
static long rss_bytes(void) {
#ifdef __GLIBC__
    malloc_trim(0);
#endif
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;
    if (!f) return -1;
    if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = -1;
    fclose(f);
    return resident < 0 ? -1 : resident * sysconf(_SC_PAGESIZE);
}

static int setup(void **state) {
    (void)state;
    const char *p = test_find_model("stories260K.gguf", "stories260K/stories260K.gguf");
    test_require(p, "stories260K.gguf");
    return ember_model_load(p, NULL, &g_model) == EMBER_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    ember_model_free(g_model);
    return 0;
}

static const char *kPrompts[] = {
    "Once upon a time",
    "The little dog ran to the park and",
    "Tom and Sue wanted to bake a cake. They",
    "One day, a big bird",
    "Lily had a red ball. She",
    "A boy found a shiny stone near the river",
};
#define N_PROMPTS (sizeof kPrompts / sizeof kPrompts[0])

/* A session's life: prompt, sampled generation until the context fills, a save restored into a second
 * session that continues, a fork that branches off, a truncation and more generation. */
static void session_round(int round) {
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.n_ctx = 192;
    sp.n_threads = 1;
    sp.n_seq_max = 2;
    sp.kv_type = round % 3 == 2 ? EMBER_KV_Q8_0 : round % 3 == 1 ? EMBER_KV_Q4_0 : EMBER_KV_F16;
    ember_session *s = NULL, *r = NULL, *f = NULL;
    assert_int_equal(ember_session_create(g_model, &sp, &s), EMBER_OK);
    ember_token prompt[64];
    const size_t n = test_tokenize(g_model, kPrompts[round % N_PROMPTS], prompt, 64);
    assert_int_equal(ember_session_feed(s, prompt, n), EMBER_OK);

    ember_sampler_params smp;
    ember_sampler_params_init(&smp);
    smp.temperature = 0.9f;
    smp.top_k = 40;
    smp.repeat_penalty = 1.1f;
    smp.seed = (uint64_t)round;
    ember_sampler *sampler = NULL;
    assert_int_equal(ember_sampler_create(&smp, &sampler), EMBER_OK);

    ember_generate_params gp;
    ember_generate_params_init(&gp);
    gp.max_tokens = 96;
    size_t count = 0;
    ember_status st = ember_generate(s, sampler, &gp, &count);
    assert_true(st == EMBER_OK || st == EMBER_END_OF_GENERATION);
    g_tokens += (long)count;

    size_t len = 0;
    assert_int_equal(ember_session_save(s, NULL, 0, &len), EMBER_OK);
    unsigned char *buf = malloc(len);
    assert_int_equal(ember_session_save(s, buf, len, &len), EMBER_OK);
    assert_int_equal(ember_session_create(g_model, &sp, &r), EMBER_OK);
    assert_int_equal(ember_session_restore(r, buf, len), EMBER_OK);
    free(buf);
    uint32_t pos = 0;
    assert_int_equal(ember_session_position(r, &pos), EMBER_OK);
    if (pos > 1) { /* continue the restored session from its last token: feed it again after a rollback */
        const float *logits = NULL;
        size_t nv = 0;
        if (ember_session_logits(r, &logits, &nv) == EMBER_OK) {
            gp.max_tokens = 0; /* until the end of generation or a full context */
            st = ember_generate(r, sampler, &gp, &count);
            assert_true(st == EMBER_END_OF_GENERATION || st == EMBER_ERR_CONTEXT_FULL || st == EMBER_OK);
            g_tokens += (long)count;
        }
    }

    assert_int_equal(ember_session_fork(s, &f), EMBER_OK);
    assert_int_equal(ember_session_position(f, &pos), EMBER_OK);
    assert_int_equal(ember_session_truncate(f, pos / 2), EMBER_OK);
    ember_token t = prompt[n - 1];
    assert_int_equal(ember_session_feed(f, &t, 1), EMBER_OK);
    for (int i = 0; i < 32; ++i) {
        const char *text;
        size_t text_len;
        st = ember_generate_next(f, sampler, &t, &text, &text_len);
        if (st != EMBER_OK) break;
        ++g_tokens;
    }
    ember_session_free(s); /* the fork outlives the session it came from */
    ember_session_free(r);
    ember_session_free(f);
    ember_sampler_free(sampler);
}

static bool on_token(ember_request *request, ember_token token, const char *text, size_t len, void *ud) {
    (void)request;
    (void)token;
    (void)text;
    (void)len;
    ++*(long *)ud;
    return true;
}

/* Requests on a long-lived engine (worker thread): submitted together, streamed, polled, one cancelled
 * halfway; their prompts share prefixes, so cached blocks are adopted and evicted all along. */
static void engine_round(ember_engine *e, int round) {
    enum { N_REQ = 6 };
    ember_request *req[N_REQ];
    ember_token prompts[N_REQ][64];
    long streamed = 0;
    ember_sampler_params smp;
    ember_sampler_params_init(&smp);
    smp.temperature = 0.8f;
    smp.seed = (uint64_t)round * 7 + 1;
    for (int i = 0; i < N_REQ; ++i) {
        const size_t n = test_tokenize(g_model, kPrompts[(round + i) % N_PROMPTS], prompts[i], 64);
        ember_request_params rp;
        ember_request_params_init(&rp);
        rp.prompt = prompts[i];
        rp.n_prompt = n;
        rp.max_tokens = 64 + (uint32_t)(i * 8);
        rp.sampling = i % 2 ? &smp : NULL;
        rp.on_token = on_token;
        rp.user_data = &streamed;
        assert_int_equal(ember_request_submit(e, &rp, &req[i]), EMBER_OK);
    }
    ember_request_cancel(req[N_REQ - 1]);
    for (int i = 0; i < N_REQ; ++i) {
        assert_int_equal(ember_request_wait(req[i], UINT32_MAX), EMBER_OK);
        ember_token got[256];
        size_t n = 0;
        ember_request_state rs;
        assert_int_equal(ember_request_poll(req[i], got, 256, &n, &rs), EMBER_OK);
        assert_true(rs == EMBER_REQUEST_DONE || (i == N_REQ - 1 && rs == EMBER_REQUEST_CANCELLED));
        g_tokens += (long)n;
        size_t len = 0;
        assert_int_equal(ember_request_text(req[i], NULL, 0, &len), EMBER_OK);
        ember_request_free(req[i]);
    }
}

/* An engine created and freed with requests still running (they end cancelled) and one queued. */
static void engine_lifecycle_round(int round) {
    ember_engine_params ep;
    ember_engine_params_init(&ep);
    ep.n_ctx = 256;
    ep.n_seq_max = 2;
    ep.n_threads = 1;
    ep.manual_step = round % 2 == 0;
    ep.kv_type = round % 4 == 1 ? EMBER_KV_Q8_0 : round % 4 == 3 ? EMBER_KV_Q4_0 : EMBER_KV_F16;
    ember_engine *e = NULL;
    assert_int_equal(ember_engine_create(g_model, &ep, &e), EMBER_OK);
    ember_token prompt[64];
    const size_t n = test_tokenize(g_model, kPrompts[round % N_PROMPTS], prompt, 64);
    ember_request *req[3];
    for (int i = 0; i < 3; ++i) {
        ember_request_params rp;
        ember_request_params_init(&rp);
        rp.prompt = prompt;
        rp.n_prompt = n;
        rp.max_tokens = 48;
        assert_int_equal(ember_request_submit(e, &rp, &req[i]), EMBER_OK);
    }
    if (ep.manual_step) {
        bool busy = true;
        for (int i = 0; i < 30 && busy; ++i) assert_int_equal(ember_engine_step(e, &busy), EMBER_OK);
    } else {
        ember_request_wait(req[0], 50);
    }
    ember_engine_free(e); /* the requests' handles stay valid */
    for (int i = 0; i < 3; ++i) {
        size_t got = 0;
        ember_request_state rs;
        assert_int_equal(ember_request_poll(req[i], NULL, 0, &got, &rs), EMBER_OK);
        assert_true(rs == EMBER_REQUEST_DONE || rs == EMBER_REQUEST_CANCELLED);
        g_tokens += (long)got;
        ember_request_free(req[i]);
    }
}

static void test_soak(void **state) {
    (void)state;
    long target = 20000;
    const char *env = getenv("EMBER_SOAK_TOKENS");
    if (env && atol(env) > 0) target = atol(env);

    ember_engine_params ep;
    ember_engine_params_init(&ep);
    ep.n_ctx = 256;
    ep.n_seq_max = 4;
    ep.n_threads = 1;
    ep.kv_bytes = 24 * 16 * 640; /* 24 blocks: fewer than the requests want, so the cache evicts */
    ember_engine *e = NULL;
    assert_int_equal(ember_engine_create(g_model, &ep, &e), EMBER_OK);

    /* Warm-up: every variant of each kind of round, so that caches and allocator arenas are in use. */
    enum { WARM_UP = 4 };
    int round = 0;
    for (; round < WARM_UP; ++round) {
        session_round(round);
        engine_round(e, round);
        engine_lifecycle_round(round);
    }
    const long warm = rss_bytes();
    const long warm_tokens = g_tokens;
    long peak = warm;
    while (g_tokens - warm_tokens < target) {
        session_round(round);
        engine_round(e, round);
        if (round % 4 == 0) engine_lifecycle_round(round);
        const long now = rss_bytes();
        if (now > peak) peak = now;
        ++round;
    }
    const long end = rss_bytes(); /* with the long-lived engine still there, as at the warm-up */
    ember_engine_free(e);
    printf("soak: %ld tokens in %d rounds after the warm-up; resident memory %.2f MiB after the warm-up, "
           "%.2f MiB at the end (peak %.2f MiB, growth %+.1f KiB, tolerance %.0f KiB)%s\n",
           g_tokens - warm_tokens, round - WARM_UP, warm / 1048576.0, end / 1048576.0, peak / 1048576.0,
           (end - warm) / 1024.0, kToleranceBytes / 1024.0, SOAK_SANITIZED ? " [sanitizer build: not checked]" : "");
    assert_true(g_tokens - warm_tokens >= target);
    assert_true(warm > 0 && end > 0);
    if (!SOAK_SANITIZED && end - warm > kToleranceBytes)
        fail_msg("resident memory grew by %ld KiB over the run (tolerance %ld KiB)", (end - warm) / 1024,
                 kToleranceBytes / 1024);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_soak),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
