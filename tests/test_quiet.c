/* test_quiet.c — the library never writes to stdout or stderr by itself. File descriptors 1 and 2 are
 * pointed at files while a program loads models (good, missing, corrupt, cancelled, vocab-only), runs
 * sessions and an engine (worker thread, streaming, cancellation, saves and bad restores) and makes
 * every kind of error; both files must stay empty. Messages exist meanwhile: a per-model log sink
 * receives them, and after ember_log_set(NULL, ...) nothing goes anywhere. */
#include "test_util.h"

#include <ember/ember.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct capture {
    int saved[2];
    char path[2][64];
};

static void capture_begin(struct capture *c) {
    fflush(stdout);
    fflush(stderr);
    for (int i = 0; i < 2; ++i) {
        snprintf(c->path[i], sizeof c->path[i], "/tmp/ember_quiet_%d_XXXXXX", i + 1);
        const int fd = mkstemp(c->path[i]);
        assert_true(fd >= 0);
        c->saved[i] = dup(i + 1);
        assert_true(c->saved[i] >= 0);
        assert_int_equal(dup2(fd, i + 1), i + 1);
        close(fd);
    }
}

/* Restores fds 1 and 2 and returns the number of bytes written to them meanwhile (printing them). */
static long capture_end(struct capture *c) {
    fflush(stdout);
    fflush(stderr);
    long total = 0;
    for (int i = 0; i < 2; ++i) {
        assert_int_equal(dup2(c->saved[i], i + 1), i + 1);
        close(c->saved[i]);
        struct stat st;
        assert_int_equal(stat(c->path[i], &st), 0);
        if (st.st_size > 0) {
            printf("the library wrote %lld bytes to fd %d:\n", (long long)st.st_size, i + 1);
            FILE *f = fopen(c->path[i], "rb");
            char buf[512];
            size_t k;
            while (f && (k = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, k, stdout);
            if (f) fclose(f);
        }
        total += (long)st.st_size;
        unlink(c->path[i]);
    }
    return total;
}

static int g_messages;
static void sink(ember_log_level level, const char *message, void *ud) {
    (void)level;
    (void)message;
    ++*(int *)ud;
}

static bool stop_early(float p, void *ud) {
    (void)ud;
    return p < 0.5f;
}

static bool stop_stream(ember_request *r, ember_token t, const char *text, size_t len, void *ud) {
    (void)r;
    (void)t;
    (void)text;
    (void)len;
    return --*(int *)ud > 0;
}

/* Everything an application might do, with every kind of error along the way. */
static void workload(const char *path, const char *big, int *model_messages) {
    ember_model *m = NULL;
    ember_model_load("/nonexistent/model.gguf", NULL, &m);
    ember_model_load(NULL, NULL, &m);
    char junk_path[] = "/tmp/ember_quiet_junk_XXXXXX";
    const int fd = mkstemp(junk_path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "GGUF\3\0\0\0garbage", 15), 15);
    close(fd);
    ember_model_load(junk_path, NULL, &m);
    unlink(junk_path);
    ember_model_params mp;
    ember_model_params_init(&mp);
    mp.progress = stop_early;
    ember_model_load(path, &mp, &m);
    ember_memory_estimate est;
    ember_memory_estimate_init(&est);
    ember_estimate_memory_file("/nonexistent", NULL, &est);
    ember_estimate_memory_file(path, NULL, &est);
    if (big) {
        ember_model_params_init(&mp);
        mp.vocab_only = true;
        if (ember_model_load(big, &mp, &m) == EMBER_OK) {
            size_t n = 0;
            ember_tokenize(m, "\xff\xfe broken \xc3 text", 17, EMBER_TOKENIZE_ADD_SPECIAL, NULL, 0, &n);
            ember_session *s = NULL;
            ember_session_create(m, NULL, &s); /* vocab-only: an error */
            ember_model_free(m);
        }
    }

    ember_model_params_init(&mp);
    mp.log = sink;
    mp.log_user_data = model_messages;
    assert_int_equal(ember_model_load(path, &mp, &m), EMBER_OK);
    ember_token prompt[64];
    size_t n = 0;
    assert_int_equal(ember_tokenize(m, "Once upon a time", 16, EMBER_TOKENIZE_ADD_SPECIAL, prompt, 64, &n), EMBER_OK);
    ember_token bad = 100000;
    char buf[64];
    size_t len = 0;
    ember_token_to_piece(m, bad, 0, buf, sizeof buf, &len);
    ember_detokenize(m, &bad, 1, 0, buf, sizeof buf, &len);
    ember_model_meta_string(m, "no.such.key", buf, sizeof buf, &len);
    ember_model_meta_string(m, "general.architecture", buf, 1, &len);

    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.n_ctx = 32;
    ember_session *s = NULL;
    assert_int_equal(ember_session_create(m, &sp, &s), EMBER_OK);
    ember_session_feed(s, &bad, 1);
    const float *logits;
    ember_session_logits(s, &logits, &len);
    ember_session_truncate(s, 5);
    assert_int_equal(ember_session_feed(s, prompt, n), EMBER_OK);
    ember_sampler_params smp;
    ember_sampler_params_init(&smp);
    smp.top_p = 2.0f;
    ember_sampler *sampler = NULL;
    ember_sampler_create(&smp, &sampler); /* refused */
    ember_sampler_params_init(&smp);
    assert_int_equal(ember_sampler_create(&smp, &sampler), EMBER_OK);
    ember_generate_params gp;
    ember_generate_params_init(&gp);
    gp.max_tokens = 0;
    ember_generate(s, sampler, &gp, &len); /* until the context is full: an error */
    ember_token t;
    ember_generate_next(s, sampler, &t, NULL, NULL);
    ember_session_restore(s, "EMBERSES", 8);
    ember_session_restore_file(s, "/nonexistent/state");
    ember_session_save_file(s, "/nonexistent/dir/state");
    size_t state_len = 0;
    ember_session_save(s, NULL, 0, &state_len);
    ember_session_save(s, buf, 1, &len);
    ember_session *f = NULL;
    assert_int_equal(ember_session_fork(s, &f), EMBER_OK);
    ember_session_free(s);
    ember_session_free(f);

    ember_engine_params ep;
    ember_engine_params_init(&ep);
    ep.n_ctx = 64;
    ep.n_seq_max = 2;
    ember_engine *e = NULL;
    ep.kv_bytes = 10;
    ember_engine_create(m, &ep, &e); /* too small a budget */
    ep.kv_bytes = 0;
    assert_int_equal(ember_engine_create(m, &ep, &e), EMBER_OK);
    ember_engine_step(e, NULL); /* a worker engine: an error */
    ember_request_params rp;
    ember_request_params_init(&rp);
    ember_request *r[4] = {NULL};
    ember_request_submit(e, &rp, &r[0]); /* empty prompt */
    rp.prompt = prompt;
    rp.n_prompt = n;
    rp.max_tokens = 20;
    int stop_after = 3;
    rp.on_token = stop_stream;
    rp.user_data = &stop_after;
    for (int i = 0; i < 4; ++i) assert_int_equal(ember_request_submit(e, &rp, &r[i]), EMBER_OK);
    ember_request_cancel(r[1]);
    ember_request_wait(r[0], UINT32_MAX);
    ember_request_free(r[2]); /* running or queued */
    ember_engine_pin_prefix(e, &bad, 1);
    ember_engine_free(e); /* with a request still there */
    ember_request_wait(r[3], UINT32_MAX);
    ember_request_text(r[3], buf, 1, &len);
    ember_request_free(r[0]);
    ember_request_free(r[1]);
    ember_request_free(r[3]);
    ember_sampler_free(sampler);
    ember_model_free(m);
}

static void test_silent_by_default(void **state) {
    (void)state;
    const char *p = test_find_model("stories260K.gguf", "stories260K/stories260K.gguf");
    test_require(p, "stories260K.gguf");
    char path[4096];
    snprintf(path, sizeof path, "%s", p);
    const char *b = test_repo_model("stories15M-q8_0.gguf");
    char big[4096];
    if (b) snprintf(big, sizeof big, "%s", b);

    struct capture c;
    int model_messages = 0;
    capture_begin(&c);
    workload(path, b ? big : NULL, &model_messages);
    long written = capture_end(&c);
    assert_int_equal(written, 0);
    assert_true(model_messages > 0); /* there was something to say, and it went to the model's sink */

    /* A process-wide sink set and removed again: silent once more. */
    ember_log_set(sink, &g_messages, EMBER_LOG_DEBUG);
    ember_model *m = NULL;
    assert_int_equal(ember_model_load(path, NULL, &m), EMBER_OK);
    ember_model_free(m);
    assert_true(g_messages > 0);
    ember_log_set(NULL, NULL, EMBER_LOG_DEBUG);
    capture_begin(&c);
    model_messages = 0;
    workload(path, NULL, &model_messages);
    written = capture_end(&c);
    assert_int_equal(written, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_silent_by_default),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
