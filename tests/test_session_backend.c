/* test_session_backend.c — ember_session_backend and ember_default_thread_count (EMBER_1.5): a session
 * says which backend AUTO chose (never AUTO) and how many CPU threads it started, so that tools can show
 * the real figures instead of "0 = default"; ember_session_device and ember_engine_device (EMBER_1.7):
 * which of ember_devices() a session or engine runs on. */
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

/* The device handle a session or engine reports: the CPU's (first of ember_devices()) on the CPU; on AUTO
 * one of the backend AUTO chose; on each GPU device this machine lists, a session asked to run there
 * reports that very handle (or, where its backend has another device open, is refused as
 * ember_devices() says). */
static void test_device(void **state) {
    (void)state;
    const ember_device *devs[32];
    size_t n = 0;
    assert_int_equal(ember_devices(devs, 32, &n), EMBER_OK);
    assert_true(n >= 1);
    ember_model *m = load_stories();
    ember_session *s = new_session(m, EMBER_BACKEND_CPU, 1);
    const ember_device *dev = NULL;
    assert_int_equal(ember_session_device(s, &dev), EMBER_OK);
    assert_ptr_equal(dev, devs[0]);
    ember_session_free(s);

    ember_engine_params ep;
    ember_engine_params_init(&ep);
    ep.n_ctx = 64;
    ep.n_seq_max = 1;
    ep.n_threads = 1;
    ep.manual_step = true;
    ep.backend = EMBER_BACKEND_CPU;
    ember_engine *e = NULL;
    assert_int_equal(ember_engine_create(m, &ep, &e), EMBER_OK);
    dev = NULL;
    assert_int_equal(ember_engine_device(e, &dev), EMBER_OK);
    assert_ptr_equal(dev, devs[0]);
    assert_int_equal(ember_engine_device(e, NULL), EMBER_ERR_INVALID_ARGUMENT);
    ember_engine_free(e);
    assert_int_equal(ember_engine_device(NULL, &dev), EMBER_ERR_INVALID_ARGUMENT);

    s = new_session(m, EMBER_BACKEND_AUTO, 1);
    ember_backend_kind kind = EMBER_BACKEND_AUTO, dev_kind = EMBER_BACKEND_AUTO;
    assert_int_equal(ember_session_backend(s, &kind, NULL), EMBER_OK);
    assert_int_equal(ember_session_device(s, &dev), EMBER_OK);
    assert_non_null(dev);
    assert_int_equal(ember_device_get_info(dev, NULL, &dev_kind), EMBER_OK);
    assert_int_equal(dev_kind, kind);
    assert_int_equal(ember_session_device(s, NULL), EMBER_ERR_INVALID_ARGUMENT);
    ember_session_free(s);
    assert_int_equal(ember_session_device(NULL, &dev), EMBER_ERR_INVALID_ARGUMENT);

    size_t n_gpu = 0, n_opened = 0;
    for (size_t i = 1; i < n && i < 32; ++i) {
        ember_device_info info;
        ember_device_info_init(&info);
        assert_int_equal(ember_device_get_info(devs[i], &info, &kind), EMBER_OK);
        assert_int_not_equal(kind, EMBER_BACKEND_CPU);
        ++n_gpu;
        ember_session_params sp;
        ember_session_params_init(&sp);
        sp.n_ctx = 64;
        sp.device = devs[i];
        s = NULL;
        const ember_status st = ember_session_create(m, &sp, &s);
        if (st != EMBER_OK) {
            assert_int_equal(st, EMBER_ERR_INVALID_STATE);   /* its backend has another device open */
            continue;
        }
        dev = NULL;
        assert_int_equal(ember_session_device(s, &dev), EMBER_OK);
        assert_ptr_equal(dev, devs[i]);
        printf("device %zu (%s): a session there reports it\n", i, info.name);
        ++n_opened;
        ember_session_free(s);
    }
    if (n_gpu == 0) printf("no GPU device here: only the CPU's handle was checked\n");
    else assert_true(n_opened >= 1);
    ember_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_threads),
        cmocka_unit_test(test_auto_resolves),
        cmocka_unit_test(test_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
