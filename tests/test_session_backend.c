/* test_session_backend.c — ember_session_backend and ember_default_thread_count (EMBER_1.5): a session
 * says which backend AUTO chose (never AUTO) and how many CPU threads it started, so that tools can show
 * the real figures instead of "0 = default". */
#include "test_api_util.h"

#include <stdio.h>

static ember_model *load_stories(void) {
    const char *path = test_repo_model("stories15M-q8_0.gguf");
    test_require(path, "models/stories15M-q8_0.gguf");
    ember_model *m = NULL;
    assert_int_equal(ember_model_load(path, NULL, &m), EMBER_OK);
    return m;
}

/* A 64-token session on `backend` with `n_threads` (0: the default); asserts success. */
static ember_session *new_session(ember_model *m, ember_backend_kind backend, uint32_t n_threads) {
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.n_ctx = 64;
    sp.backend = backend;
    sp.n_threads = n_threads;
    ember_session *s = NULL;
    assert_int_equal(ember_session_create(m, &sp, &s), EMBER_OK);
    return s;
}

static void test_cpu_threads(void **state) {
    (void)state;
    const uint32_t def = ember_default_thread_count();
    assert_true(def >= 1 && def <= 8);
    ember_model *m = load_stories();
    ember_session *s = new_session(m, EMBER_BACKEND_CPU, 3);
    ember_backend_kind kind = EMBER_BACKEND_AUTO;
    uint32_t threads = 0;
    assert_int_equal(ember_session_backend(s, &kind, &threads), EMBER_OK);
    assert_int_equal(kind, EMBER_BACKEND_CPU);
    assert_int_equal(threads, 3);
    /* A fork runs where its parent does. */
    ember_session *f = NULL;
    assert_int_equal(ember_session_fork(s, &f), EMBER_OK);
    threads = 0;
    assert_int_equal(ember_session_backend(f, NULL, &threads), EMBER_OK);
    assert_int_equal(threads, 3);
    ember_session_free(f);
    ember_session_free(s);
    /* n_threads 0: the default, as ember_default_thread_count says. */
    s = new_session(m, EMBER_BACKEND_CPU, 0);
    assert_int_equal(ember_session_backend(s, &kind, &threads), EMBER_OK);
    assert_int_equal(threads, def);
    ember_session_free(s);
    ember_model_free(m);
}

static void test_auto_resolves(void **state) {
    (void)state;
    ember_model *m = load_stories();
    ember_session *s = new_session(m, EMBER_BACKEND_AUTO, 0);
    ember_backend_kind kind = EMBER_BACKEND_AUTO;
    uint32_t threads = 99;
    assert_int_equal(ember_session_backend(s, &kind, &threads), EMBER_OK);
    assert_true(kind == EMBER_BACKEND_CPU || kind == EMBER_BACKEND_CUDA || kind == EMBER_BACKEND_VULKAN);
    assert_true(kind == EMBER_BACKEND_CPU ? threads >= 1 : threads == 0);
    assert_int_equal(ember_session_backend(s, NULL, NULL), EMBER_OK);
    ember_session_free(s);
    ember_model_free(m);
    assert_int_equal(ember_session_backend(NULL, &kind, &threads), EMBER_ERR_INVALID_ARGUMENT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_threads),
        cmocka_unit_test(test_auto_resolves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
