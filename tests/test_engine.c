/* test_engine.c — continuous batching through the public API: batched greedy output equals each
 * sequence run alone, prefix reuse gives the same output, cancellation (also mid-prompt) frees every
 * block, polls never wait for the engine, manual stepping, pinned prefixes, and many threads at once. */
#include "test_api_util.h"

#include <ember/ember.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_GEN 24

static ember_model *g_model;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int setup(void **state) {
    (void)state;
    const char *p = test_find_model("stories15M-q8_0.gguf", "stories15M/stories15M-q8_0.gguf");
    test_require(p, "stories15M-q8_0.gguf");
    return ember_model_load(p, NULL, &g_model) == EMBER_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    ember_model_free(g_model);
    return 0;
}

/* Greedy continuation of a prompt by a plain session: the reference. */
static void run_alone(const ember_token *prompt, size_t n, ember_token *out, size_t n_gen, ember_kv_type kv_type) {
    ember_session_params p;
    ember_session_params_init(&p);
    p.kv_type = kv_type;
    ember_session *s = NULL;
    assert_int_equal(ember_session_create(g_model, &p, &s), EMBER_OK);
    ember_sampler_params sp;
    ember_sampler_params_init(&sp);
    sp.temperature = 0;
    ember_sampler *smp = NULL;
    assert_int_equal(ember_sampler_create(&sp, &smp), EMBER_OK);
    assert_int_equal(ember_session_feed(s, prompt, n), EMBER_OK);
    for (size_t i = 0; i < n_gen; ++i) assert_int_equal(ember_generate_next(s, smp, &out[i], NULL, NULL), EMBER_OK);
    ember_sampler_free(smp);
    ember_session_free(s);
}

/* Stats are published at the end of each step: wait until the engine has nothing left to run. */
static void wait_idle(ember_engine *e, ember_engine_stats *st) {
    ember_engine_stats_init(st);
    for (int i = 0; i < 1000; ++i) {
        assert_int_equal(ember_engine_get_stats(e, st), EMBER_OK);
        if (st->n_running == 0 && st->n_queued == 0) return;
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    fail_msg("the engine did not go idle");
}

static ember_request *submit(ember_engine *e, const ember_token *prompt, size_t n, uint32_t max_tokens) {
    ember_request_params rp;
    ember_request_params_init(&rp);
    rp.prompt = prompt;
    rp.n_prompt = n;
    rp.max_tokens = max_tokens;
    ember_request *r = NULL;
    assert_int_equal(ember_request_submit(e, &rp, &r), EMBER_OK);
    return r;
}

static size_t collect(ember_request *r, ember_token *out, size_t cap) {
    assert_int_equal(ember_request_wait(r, UINT32_MAX), EMBER_OK);
    size_t n = 0;
    ember_request_state st;
    assert_int_equal(ember_request_poll(r, out, cap, &n, &st), EMBER_OK);
    assert_int_equal(st, EMBER_REQUEST_DONE);
    return n;
}

static const char *kPrompts[] = {
    "Once upon a time",
    "The little dog ran to the park and",
    "Tom and Sue wanted to bake a cake. They",
    "One day, a big bird",
    "Lily had a red ball. She",
};
#define N_PROMPTS (sizeof kPrompts / sizeof kPrompts[0])

/* For every cache type: each request's greedy tokens are those of a session with that cache type. */
static void test_batched_equals_alone(void **state) {
    (void)state;
    for (int kv = 0; kv < 3; ++kv) {
    const ember_kv_type kv_type = kv == 2 ? EMBER_KV_Q4_0 : kv ? EMBER_KV_Q8_0 : EMBER_KV_F16;
    ember_token prompts[N_PROMPTS][64], want[N_PROMPTS][N_GEN], got[N_PROMPTS][N_GEN + 4];
    size_t n[N_PROMPTS];
    for (size_t i = 0; i < N_PROMPTS; ++i) {
        n[i] = test_tokenize(g_model, kPrompts[i], prompts[i], 64);
        run_alone(prompts[i], n[i], want[i], N_GEN, kv_type);
    }
    ember_engine_params ep;
    ember_engine_params_init(&ep);
    ep.n_seq_max = 4; /* fewer slots than requests: one waits in the queue */
    ep.n_ctx = 128;
    ep.kv_type = kv_type;
    ember_engine *e = NULL;
    assert_int_equal(ember_engine_create(g_model, &ep, &e), EMBER_OK);
    ember_request *r[N_PROMPTS];
    for (size_t i = 0; i < N_PROMPTS; ++i) r[i] = submit(e, prompts[i], n[i], N_GEN);
    for (size_t i = 0; i < N_PROMPTS; ++i) {
        assert_int_equal(collect(r[i], got[i], N_GEN + 4), N_GEN);
        for (size_t j = 0; j < N_GEN; ++j) {
            if (got[i][j] != want[i][j])
                fprintf(stderr, "kv %d prompt %zu token %zu: %d vs %d\n", kv, i, j, got[i][j], want[i][j]);
            assert_int_equal(got[i][j], want[i][j]);
        }
        ember_request_free(r[i]);
    }
    ember_engine_stats st;
    wait_idle(e, &st);
    assert_int_equal(st.n_blocks_used, 0);
    ember_engine_free(e);
    }
}

static void test_prefix_reuse(void **state) {
    (void)state;
    /* A long shared prefix: the second request adopts its cached blocks and must still give exactly the
     * tokens a fresh computation gives. */
    char text[4096] = "";
    for (int i = 0; i < 12; ++i) strcat(text, "Once upon a time, there was a little girl named Lily. ");
    ember_token prompt[1024];
    size_t n = test_tokenize(g_model, text, prompt, 1024);
    assert_true(n > 100);
    ember_token want[N_GEN], got[N_GEN + 4];
    run_alone(prompt, n, want, N_GEN, EMBER_KV_F16);

    ember_engine_params ep;
    ember_engine_params_init(&ep);
    ep.n_ctx = 512;
    ember_engine *e = NULL;
    assert_int_equal(ember_engine_create(g_model, &ep, &e), EMBER_OK);
    for (int round = 0; round < 2; ++round) {
        const double t0 = now_s();
        ember_request *r = submit(e, prompt, n, N_GEN);
        assert_int_equal(collect(r, got, N_GEN + 4), N_GEN);
        printf("round %d: %.1f ms for %zu prompt + %d generated tokens\n", round, (now_s() - t0) * 1e3, n, N_GEN);
        for (size_t j = 0; j < N_GEN; ++j) assert_int_equal(got[j], want[j]);
        ember_request_free(r);
        ember_engine_stats st;
        wait_idle(e, &st);
        assert_true(st.n_blocks_cached >= n / st.block_size - 1); /* the prompt's full blocks stay cached */
        assert_int_equal(st.n_blocks_used, 0);
    }
    ember_engine_free(e);
}

static void test_cancel_mid_prefill_frees_blocks(void **state) {
    (void)state;
    char text[8192] = "";
    for (int i = 0; i < 30; ++i) strcat(text, "The cat sat on the mat and looked at the big red sun. ");
    ember_token prompt[2048];
    size_t n = test_tokenize(g_model, text, prompt, 2048);
    ember_engine_params ep;
    ember_engine_params_init(&ep);
    ep.manual_step = true; /* deterministic: we decide when steps happen */
    ep.n_ctx = 1024;
    ep.n_batch = 64;       /* the prompt takes several steps */
    ember_engine *e = NULL;
    assert_int_equal(ember_engine_create(g_model, &ep, &e), EMBER_OK);
    ember_request *r = submit(e, prompt, n, 8);
    bool busy = false;
    assert_int_equal(ember_engine_step(e, &busy), EMBER_OK); /* first chunk */
    assert_true(busy);
    ember_engine_stats st;
    ember_engine_stats_init(&st);
    ember_engine_get_stats(e, &st);
    assert_true(st.n_blocks_used > 0);
    assert_int_equal(ember_request_cancel(r), EMBER_OK);
    assert_int_equal(ember_engine_step(e, &busy), EMBER_OK);
    assert_false(busy);
    size_t got = 99;
    ember_request_state rs;
    assert_int_equal(ember_request_poll(r, NULL, 0, &got, &rs), EMBER_OK);
    assert_int_equal(rs, EMBER_REQUEST_CANCELLED);
    assert_int_equal(got, 0);
    ember_engine_get_stats(e, &st);
    assert_int_equal(st.n_blocks_used, 0);
    assert_int_equal(st.n_running, 0);
    ember_request_free(r);
    /* A worker-mode engine refuses manual steps. */
    ember_engine *w = NULL;
    ember_engine_params_init(&ep);
    assert_int_equal(ember_engine_create(g_model, &ep, &w), EMBER_OK);
    assert_int_equal(ember_engine_step(w, &busy), EMBER_ERR_INVALID_STATE);
    ember_engine_free(w);
    ember_engine_free(e);
}

static void test_poll_never_waits(void **state) {
    (void)state;
    char text[8192] = "";
    for (int i = 0; i < 30; ++i) strcat(text, "A boy found a shiny stone near the river and kept it. ");
    ember_token prompt[2048];
    size_t n = test_tokenize(g_model, text, prompt, 2048);
    ember_engine_params ep;
    ember_engine_params_init(&ep);
    ep.n_ctx = 1024;
    ep.n_batch = 512;
    ep.n_threads = 1; /* leave the other core to this polling thread, as an app's UI thread would have */
    ember_engine *e = NULL;
    assert_int_equal(ember_engine_create(g_model, &ep, &e), EMBER_OK);
    ember_request *r = submit(e, prompt, n, 64);
    double worst = 0;
    ember_request_state rs = EMBER_REQUEST_QUEUED;
    size_t total = 0, polls = 0;
    while (rs == EMBER_REQUEST_QUEUED || rs == EMBER_REQUEST_RUNNING) {
        ember_token buf[16];
        size_t got = 0;
        const double t0 = now_s();
        assert_int_equal(ember_request_poll(r, buf, 16, &got, &rs), EMBER_OK);
        const double dt = now_s() - t0;
        if (dt > worst) worst = dt;
        total += got;
        ++polls;
        struct timespec ts = {0, 50 * 1000}; /* a UI thread polls, then does its own work */
        nanosleep(&ts, NULL);
    }
    printf("%zu polls while the engine computed; slowest %.3f ms\n", polls, worst * 1e3);
    /* The contract is < 1 ms (a poll only copies under the request's lock, which the engine holds for
     * copies too); the bound allows for the polling thread being descheduled on a loaded CI machine. */
    assert_true(worst < 0.05);
    assert_true(total == 64 || total > 0);
    ember_request_free(r);
    ember_engine_free(e);
}

static void test_pinned_prefix_and_errors(void **state) {
    (void)state;
    char text[4096] = "";
    for (int i = 0; i < 6; ++i) strcat(text, "You are a kind storyteller who tells short tales. ");
    ember_token prompt[1024];
    size_t n = test_tokenize(g_model, text, prompt, 1024);
    ember_engine_params ep;
    ember_engine_params_init(&ep);
    ep.n_ctx = 256;
    ep.n_seq_max = 2;
    ember_engine *e = NULL;
    assert_int_equal(ember_engine_create(g_model, &ep, &e), EMBER_OK);
    assert_int_equal(ember_engine_pin_prefix(e, prompt, n), EMBER_OK);
    ember_engine_stats st;
    wait_idle(e, &st);
    assert_true(st.n_blocks_used >= n / st.block_size); /* held by the pin, not evictable */
    ember_token want[N_GEN], got[N_GEN + 4];
    run_alone(prompt, n, want, N_GEN, EMBER_KV_F16);
    ember_request *r = submit(e, prompt, n, N_GEN);
    assert_int_equal(collect(r, got, N_GEN + 4), N_GEN);
    for (size_t j = 0; j < N_GEN; ++j) assert_int_equal(got[j], want[j]);
    ember_request_free(r);

    /* Bad requests are refused at submit. */
    ember_request_params rp;
    ember_request_params_init(&rp);
    ember_request *bad = NULL;
    assert_int_equal(ember_request_submit(e, &rp, &bad), EMBER_ERR_INVALID_ARGUMENT); /* empty prompt */
    ember_token oov = 40000;
    rp.prompt = &oov;
    rp.n_prompt = 1;
    assert_int_equal(ember_request_submit(e, &rp, &bad), EMBER_ERR_INVALID_ARGUMENT);
    assert_null(bad);
    /* A budget too small for one sequence is refused at creation. */
    ember_engine *tiny = NULL;
    ep.kv_bytes = 1000;
    assert_int_equal(ember_engine_create(g_model, &ep, &tiny), EMBER_ERR_INVALID_ARGUMENT);
    ember_engine_free(e);
}

static void test_memory_estimate(void **state) {
    (void)state;
    ember_engine_params ep;
    ember_engine_params_init(&ep);
    ep.n_ctx = 256;
    ep.n_seq_max = 4;
    ember_memory_estimate m;
    ember_memory_estimate_init(&m);
    assert_int_equal(ember_estimate_memory(g_model, &ep, &m), EMBER_OK);
    ember_model_info info;
    ember_model_info_init(&info);
    ember_model_get_info(g_model, &info);
    assert_true(m.weights_bytes == info.size_bytes);
    /* 4 sequences of 256 tokens, plus one spare block each: f16 K and V for 6 layers of 288 values. */
    assert_true(m.kv_bytes == (uint64_t)(4 * (256 / 16) + 4) * 16 * info.kv_bytes_per_token);
    assert_true(m.compute_bytes > 0 && m.total_bytes == m.weights_bytes + m.kv_bytes + m.compute_bytes);
    /* The engine allocates what was estimated. */
    ember_engine *e = NULL;
    assert_int_equal(ember_engine_create(g_model, &ep, &e), EMBER_OK);
    ember_engine_stats st;
    ember_engine_stats_init(&st);
    ember_engine_get_stats(e, &st);
    assert_true(st.kv_bytes == m.kv_bytes);
    ember_engine_free(e);
    /* More sequences, more cache; a budget caps it. */
    ember_memory_estimate m2;
    ember_memory_estimate_init(&m2);
    ep.n_seq_max = 8;
    assert_int_equal(ember_estimate_memory(g_model, &ep, &m2), EMBER_OK);
    assert_true(m2.kv_bytes > m.kv_bytes);
    ep.kv_bytes = m.kv_bytes;
    assert_int_equal(ember_estimate_memory(g_model, &ep, &m2), EMBER_OK);
    assert_true(m2.kv_bytes <= m.kv_bytes);
    assert_int_equal(ember_estimate_memory_file("/nonexistent.gguf", &ep, &m2), EMBER_ERR_IO);
    /* A Q8_0 cache: 34 bytes per 32 values instead of 64, for the same blocks; a budget buys more. */
    ep.kv_bytes = 0;
    ep.n_seq_max = 4;
    ep.kv_type = EMBER_KV_Q8_0;
    assert_int_equal(ember_estimate_memory(g_model, &ep, &m2), EMBER_OK);
    assert_true(m2.kv_bytes == (uint64_t)(4 * (256 / 16) + 4) * 16 * (info.kv_bytes_per_token * 17 / 32));
    assert_int_equal(ember_engine_create(g_model, &ep, &e), EMBER_OK);
    ember_engine_get_stats(e, &st);
    assert_true(st.kv_bytes == m2.kv_bytes);
    const uint32_t q8_blocks_default = st.n_blocks;
    ember_engine_free(e);
    ep.kv_bytes = m.kv_bytes;
    assert_int_equal(ember_engine_create(g_model, &ep, &e), EMBER_OK);
    ember_engine_get_stats(e, &st);
    assert_true(st.n_blocks > q8_blocks_default); /* the f16-sized budget holds 1.88x the blocks */
    ember_engine_free(e);
    /* A Q4_0 cache: 18 bytes per 32 values, and the f16-sized budget buys 64 / 18 = 3.56 times the f16
     * engine's tokens (whole blocks: the floor of it). */
    ep.kv_bytes = 0;
    ep.kv_type = EMBER_KV_Q4_0;
    assert_int_equal(ember_estimate_memory(g_model, &ep, &m2), EMBER_OK);
    const uint64_t q4_block = 16 * (info.kv_bytes_per_token * 9 / 32);
    assert_true(m2.kv_bytes == (uint64_t)(4 * (256 / 16) + 4) * q4_block);
    assert_int_equal(ember_engine_create(g_model, &ep, &e), EMBER_OK);
    ember_engine_get_stats(e, &st);
    assert_true(st.kv_bytes == m2.kv_bytes);
    ember_engine_free(e);
    const uint64_t f16_blocks = m.kv_bytes / (16 * info.kv_bytes_per_token);
    ep.kv_bytes = m.kv_bytes;
    assert_int_equal(ember_estimate_memory(g_model, &ep, &m2), EMBER_OK);
    assert_int_equal(ember_engine_create(g_model, &ep, &e), EMBER_OK);
    ember_engine_get_stats(e, &st);
    assert_true(st.kv_bytes == m2.kv_bytes && st.kv_bytes <= m.kv_bytes);
    assert_true(st.n_blocks == m.kv_bytes / q4_block);
    const double ratio = (double)st.n_blocks / (double)f16_blocks;
    printf("q4_0 cache: %u blocks for the %llu bytes of %llu f16 blocks (%.3fx)\n", st.n_blocks,
           (unsigned long long)m.kv_bytes, (unsigned long long)f16_blocks, ratio);
    assert_true(ratio > 3.5 && ratio <= 64.0 / 18.0);
    ember_engine_free(e);
    ep.kv_type = (ember_kv_type)3; /* the first value past the known ones */
    assert_int_equal(ember_estimate_memory(g_model, &ep, &m2), EMBER_ERR_INVALID_ARGUMENT);
    assert_int_equal(ember_engine_create(g_model, &ep, &e), EMBER_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ember_last_error(), "kv_type"));
    ep.kv_type = (ember_kv_type)9;
    assert_int_equal(ember_estimate_memory(g_model, &ep, &m2), EMBER_ERR_INVALID_ARGUMENT);
}

/* Stress: threads submit, poll, cancel and free requests concurrently (run under TSan too). */
struct stress_arg {
    ember_engine *engine;
    unsigned seed;
    int done;
};

static bool count_tokens(ember_request *req, ember_token t, const char *text, size_t len, void *ud) {
    (void)req; (void)t; (void)text; (void)len;
    ++*(int *)ud;
    return true;
}

static void *stress_thread(void *p) {
    struct stress_arg *a = p;
    ember_token prompts[N_PROMPTS][64];
    size_t n[N_PROMPTS];
    for (size_t i = 0; i < N_PROMPTS; ++i) {
        size_t k = 0;
        ember_tokenize(g_model, kPrompts[i], strlen(kPrompts[i]), EMBER_TOKENIZE_ADD_SPECIAL, prompts[i], 64, &k);
        n[i] = k;
    }
    for (int it = 0; it < 12; ++it) {
        const size_t which = rand_r(&a->seed) % N_PROMPTS;
        int streamed = 0;
        ember_request_params rp;
        ember_request_params_init(&rp);
        rp.prompt = prompts[which];
        rp.n_prompt = n[which];
        rp.max_tokens = 4 + rand_r(&a->seed) % 12;
        rp.on_token = count_tokens;
        rp.user_data = &streamed;
        ember_request *r = NULL;
        if (ember_request_submit(a->engine, &rp, &r) != EMBER_OK) return NULL;
        const int action = rand_r(&a->seed) % 3;
        if (action == 0) ember_request_cancel(r);
        if (action != 2) {
            ember_request_wait(r, UINT32_MAX);
            ember_token buf[32];
            size_t got = 0;
            ember_request_state st;
            ember_request_poll(r, buf, 32, &got, &st);
            if (st == EMBER_REQUEST_DONE && got != (size_t)streamed) return NULL; /* callback and poll agree */
        }
        ember_request_free(r); /* action 2: freed while running */
    }
    a->done = 1;
    return NULL;
}

static void test_stress_threads(void **state) {
    (void)state;
    ember_engine_params ep;
    ember_engine_params_init(&ep);
    ep.n_ctx = 96;
    ep.n_seq_max = 6;
    ember_engine *e = NULL;
    assert_int_equal(ember_engine_create(g_model, &ep, &e), EMBER_OK);
    enum { kThreads = 8 };
    pthread_t th[kThreads];
    struct stress_arg args[kThreads];
    for (int i = 0; i < kThreads; ++i) {
        args[i].engine = e;
        args[i].seed = 1234u + (unsigned)i;
        args[i].done = 0;
        assert_int_equal(pthread_create(&th[i], NULL, stress_thread, &args[i]), 0);
    }
    for (int i = 0; i < kThreads; ++i) {
        pthread_join(th[i], NULL);
        assert_true(args[i].done);
    }
    /* Freed-while-running requests end soon; then nothing holds blocks. */
    ember_engine_stats st;
    wait_idle(e, &st);
    assert_int_equal(st.n_blocks_used, 0);
    ember_engine_free(e);
}

/* Pins may hold every block but a whole context's worth: the pin that would pass that is refused, with
 * the figures, and a request of a full context still runs beside the pins (before, pins could take the
 * whole pool and every later request failed). */
static void test_pins_leave_room(void **state) {
    (void)state;
    ember_engine_params ep;
    ember_engine_params_init(&ep);
    ep.n_ctx = 128;
    ep.n_seq_max = 2;
    ember_engine *e = NULL;
    assert_int_equal(ember_engine_create(g_model, &ep, &e), EMBER_OK);
    ember_engine_stats st;
    ember_engine_stats_init(&st);
    assert_int_equal(ember_engine_get_stats(e, &st), EMBER_OK);
    ember_token prefix[120];
    int pinned = 0, refused = 0;
    for (int i = 0; i < 8 && !refused; ++i) {
        for (int k = 0; k < 120; ++k) prefix[k] = 100 + i * 120 + k; /* distinct prefixes: no sharing */
        const ember_status s = ember_engine_pin_prefix(e, prefix, 120);
        if (s == EMBER_OK) {
            ++pinned;
            continue;
        }
        assert_int_equal(s, EMBER_ERR_OUT_OF_MEMORY);
        assert_non_null(strstr(ember_last_error(), "no room"));
        refused = 1;
    }
    assert_true(refused);
    assert_true(pinned >= 1);
    wait_idle(e, &st);
    assert_true(st.n_blocks - st.n_blocks_used >= (128 + st.block_size - 1) / st.block_size + 1);
    /* A request of a full context (127 prompt tokens + 1) runs beside the pins. */
    ember_token prompt[127];
    for (int k = 0; k < 127; ++k) prompt[k] = 5000 + k;
    ember_request *r = submit(e, prompt, 127, 1);
    ember_token got[4];
    assert_int_equal(collect(r, got, 4), 1);
    ember_request_free(r);
    ember_engine_free(e);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batched_equals_alone),
        cmocka_unit_test(test_prefix_reuse),
        cmocka_unit_test(test_cancel_mid_prefill_frees_blocks),
        cmocka_unit_test(test_poll_never_waits),
        cmocka_unit_test(test_pinned_prefix_and_errors),
        cmocka_unit_test(test_pins_leave_room),
        cmocka_unit_test(test_memory_estimate),
        cmocka_unit_test(test_stress_threads),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
