/* test_session_state.c — save/restore of a session: bit-identical logits to recomputation, continuation
 * identical, and every kind of bad data (truncated, flipped bytes, another model, too long) refused with
 * the session left as it was. */
#include "test_util.h"

#include <ember/ember.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static ember_model *g_model, *g_other;

static int setup(void **state) {
    (void)state;
    const char *p = test_repo_model("stories15M-q8_0.gguf");
    test_require(p, "models/stories15M-q8_0.gguf");
    if (ember_model_load(p, NULL, &g_model) != EMBER_OK) return -1;
    p = test_repo_model("stories260K.gguf");
    test_require(p, "models/stories260K.gguf");
    return ember_model_load(p, NULL, &g_other) == EMBER_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    ember_model_free(g_model);
    ember_model_free(g_other);
    return 0;
}

static ember_session *make(const ember_model *m, uint32_t n_ctx) {
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.n_ctx = n_ctx;
    ember_session *s = NULL;
    assert_int_equal(ember_session_create(m, &sp, &s), EMBER_OK);
    return s;
}

static const ember_token kPrompt[] = {1, 9038, 2501, 263, 931, 29892, 727, 471, 263, 2217, 7826, 4257, 365, 2354,
                                      29889, 2296, 18012, 304, 1708, 5377, 297};
#define N_PROMPT (sizeof kPrompt / sizeof kPrompt[0])

static unsigned char *save(const ember_session *s, size_t *len) {
    assert_int_equal(ember_session_save(s, NULL, 0, len), EMBER_OK);
    unsigned char *buf = malloc(*len);
    size_t small = 0;
    assert_int_equal(ember_session_save(s, buf, *len - 1, &small), EMBER_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(ember_session_save(s, buf, *len, len), EMBER_OK);
    return buf;
}

static void expect_same_logits(const ember_session *a, const ember_session *b) {
    const float *la = NULL, *lb = NULL;
    size_t na = 0, nb = 0;
    assert_int_equal(ember_session_logits(a, &la, &na), EMBER_OK);
    assert_int_equal(ember_session_logits(b, &lb, &nb), EMBER_OK);
    assert_int_equal(na, nb);
    assert_memory_equal(la, lb, na * sizeof(float)); /* bit-identical */
}

static void test_round_trip(void **state) {
    (void)state;
    ember_session *a = make(g_model, 64);
    assert_int_equal(ember_session_feed(a, kPrompt, N_PROMPT), EMBER_OK);
    size_t len = 0;
    unsigned char *buf = save(a, &len);

    ember_session *b = make(g_model, 64);
    assert_int_equal(ember_session_restore(b, buf, len), EMBER_OK);
    uint32_t pos = 0;
    ember_session_position(b, &pos);
    assert_int_equal(pos, N_PROMPT);
    expect_same_logits(a, b);
    /* Recomputation from scratch gives the same bits. */
    ember_session *c = make(g_model, 64);
    assert_int_equal(ember_session_feed(c, kPrompt, N_PROMPT), EMBER_OK);
    expect_same_logits(b, c);
    /* And the continuations agree token for token. */
    ember_sampler_params sp;
    ember_sampler_params_init(&sp);
    sp.temperature = 0;
    ember_sampler *s1 = NULL, *s2 = NULL;
    ember_sampler_create(&sp, &s1);
    ember_sampler_create(&sp, &s2);
    for (int i = 0; i < 16; ++i) {
        ember_token t1, t2;
        assert_int_equal(ember_generate_next(a, s1, &t1, NULL, NULL), EMBER_OK);
        assert_int_equal(ember_generate_next(b, s2, &t2, NULL, NULL), EMBER_OK);
        assert_int_equal(t1, t2);
    }
    /* Truncate, save, restore: the same as truncating and re-feeding. */
    assert_int_equal(ember_session_truncate(a, 10), EMBER_OK);
    assert_int_equal(ember_session_feed(a, kPrompt + 10, 1), EMBER_OK);
    free(buf);
    buf = save(a, &len);
    assert_int_equal(ember_session_restore(b, buf, len), EMBER_OK);
    ember_session *d = make(g_model, 64);
    assert_int_equal(ember_session_feed(d, kPrompt, 11), EMBER_OK);
    expect_same_logits(b, d);
    /* Files too. */
    char path[] = "/tmp/ember_state_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    assert_int_equal(ember_session_save_file(a, path), EMBER_OK);
    ember_session *e = make(g_model, 64);
    assert_int_equal(ember_session_restore_file(e, path), EMBER_OK);
    expect_same_logits(e, d);
    unlink(path);
    assert_int_equal(ember_session_restore_file(e, "/nonexistent/state"), EMBER_ERR_IO);
    ember_sampler_free(s1);
    ember_sampler_free(s2);
    free(buf);
    ember_session_free(a);
    ember_session_free(b);
    ember_session_free(c);
    ember_session_free(d);
    ember_session_free(e);
}

static void test_bad_data(void **state) {
    (void)state;
    ember_session *a = make(g_model, 64);
    assert_int_equal(ember_session_feed(a, kPrompt, N_PROMPT), EMBER_OK);
    size_t len = 0;
    unsigned char *buf = save(a, &len);
    ember_session *b = make(g_model, 64);
    assert_int_equal(ember_session_feed(b, kPrompt, 5), EMBER_OK);
    ember_session *ref = make(g_model, 64);
    assert_int_equal(ember_session_feed(ref, kPrompt, 5), EMBER_OK);

    /* Truncated at many lengths, and single flipped bytes all over: refused, b unchanged. */
    for (size_t cut = 0; cut < len; cut += 1 + cut / 3) {
        assert_int_equal(ember_session_restore(b, buf, cut), EMBER_ERR_CORRUPT_DATA);
    }
    for (size_t i = 0; i < len; i += 1 + i / 5) {
        buf[i] ^= 0x20;
        ember_status st = ember_session_restore(b, buf, len);
        if (st != EMBER_ERR_CORRUPT_DATA) fprintf(stderr, "flip at %zu of %zu: %s\n", i, len, ember_last_error());
        assert_int_equal(st, EMBER_ERR_CORRUPT_DATA);
        buf[i] ^= 0x20;
    }
    assert_non_null(strstr(ember_last_error(), "rejected"));
    uint32_t pos = 0;
    ember_session_position(b, &pos);
    assert_int_equal(pos, 5);
    expect_same_logits(b, ref);
    /* Intact again: accepted. */
    assert_int_equal(ember_session_restore(b, buf, len), EMBER_OK);
    /* Another model's state. */
    ember_session *o = make(g_other, 64);
    assert_int_equal(ember_session_restore(o, buf, len), EMBER_ERR_CORRUPT_DATA);
    assert_non_null(strstr(ember_last_error(), "different model"));
    /* A context too small for the state. */
    ember_session *small = make(g_model, 8);
    assert_int_equal(ember_session_restore(small, buf, len), EMBER_ERR_CONTEXT_FULL);
    assert_int_equal(ember_session_restore(small, NULL, 5), EMBER_ERR_INVALID_ARGUMENT);
    free(buf);
    ember_session_free(a);
    ember_session_free(b);
    ember_session_free(ref);
    ember_session_free(o);
    ember_session_free(small);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_bad_data),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
