/* test_session_state.c — save/restore and fork of a session: bit-identical logits to recomputation,
 * continuation identical, every kind of bad data (truncated, flipped bytes, another model, too long,
 * another cache type) refused with the session left as it was; forks sharing a cache, running short of
 * blocks cleanly; the Q8_0 cache close to the f16 one. */
#include "test_api_util.h"

#include <ember/ember.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
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

static ember_session *make_kv(const ember_model *m, uint32_t n_ctx, uint32_t n_seq_max, ember_kv_type kv_type) {
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.n_ctx = n_ctx;
    sp.n_seq_max = n_seq_max;
    sp.kv_type = kv_type;
    ember_session *s = NULL;
    assert_int_equal(ember_session_create(m, &sp, &s), EMBER_OK);
    return s;
}

static ember_session *make(const ember_model *m, uint32_t n_ctx) { return make_kv(m, n_ctx, 1, EMBER_KV_F16); }

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

static long peak_rss_kib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* ember_session_restore_file reads the header first: a huge file costs one small read to refuse (it used
 * to read all of it: 1 GiB of memory and 6 s to say "bad magic"), and what is not a regular file is
 * refused as such (a directory gave EMBER_ERR_INTERNAL, /dev/zero read until memory ran out). */
static void test_restore_file_header_first(void **state) {
    (void)state;
    ember_session *s = make(g_other, 64);
    assert_int_equal(ember_session_restore_file(s, "/tmp"), EMBER_ERR_IO);
    assert_non_null(strstr(ember_last_error(), "not a regular file"));
    assert_int_equal(ember_session_restore_file(s, "/dev/zero"), EMBER_ERR_IO);
    assert_int_equal(ember_session_restore_file(s, "/dev/null"), EMBER_ERR_IO);

    /* A valid state's header on a sparse 1 GiB file, and the same file with a foreign magic. */
    static const ember_token toks[] = {1, 40, 50, 60};
    assert_int_equal(ember_session_feed(s, toks, 4), EMBER_OK);
    size_t len = 0;
    uint8_t *buf = save(s, &len);
    char path[] = "/tmp/ember_big_state_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf, 64), 64);
    assert_int_equal(ftruncate(fd, 1L << 30), 0);
    const long rss0 = peak_rss_kib();
    const double t0 = now_s();
    assert_int_equal(ember_session_restore_file(s, path), EMBER_ERR_CORRUPT_DATA);
    assert_non_null(strstr(ember_last_error(), "length"));
    assert_int_equal(pwrite(fd, "NOTEMBER", 8, 0), 8);
    assert_int_equal(ember_session_restore_file(s, path), EMBER_ERR_CORRUPT_DATA);
    assert_non_null(strstr(ember_last_error(), "magic"));
    const double dt = now_s() - t0;
    const long grown = peak_rss_kib() - rss0;
    printf("two refusals of a 1 GiB file: %.3f s, peak RSS +%ld KiB\n", dt, grown);
    assert_true(grown < 64 * 1024);
    assert_true(dt < 1.0);
    close(fd);
    unlink(path);
    /* The session kept its state through all of it. */
    uint32_t pos = 0;
    assert_int_equal(ember_session_position(s, &pos), EMBER_OK);
    assert_int_equal(pos, 4);
    free(buf);
    ember_session_free(s);
}

/* A copy of g_other (stories260K) with the sign of the floats in its last 64 KiB flipped: a state saved
 * from the original must not restore into it. The fingerprint used to cover the shapes and the first
 * 4 KiB of the embeddings only, and such a copy restored with EMBER_OK (logits off by up to 23.5). */
static void test_state_of_modified_copy(void **state) {
    (void)state;
    const char *src = test_repo_model("stories260K.gguf");
    FILE *f = fopen(src, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    const long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *bytes = malloc((size_t)len);
    assert_int_equal(fread(bytes, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    for (long i = len - 65536; i < len; ++i)
        if (i % 4 == 3) bytes[i] ^= 0x80;
    char path[] = "/tmp/ember_modified_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, bytes, (size_t)len), len);
    close(fd);
    free(bytes);
    ember_model *copy = NULL;
    assert_int_equal(ember_model_load(path, NULL, &copy), EMBER_OK);
    unlink(path);

    static const ember_token toks[] = {1, 40, 50, 60, 70};
    ember_session *a = make(g_other, 64), *b = make(copy, 64);
    assert_int_equal(ember_session_feed(a, toks, 5), EMBER_OK);
    assert_int_equal(ember_session_feed(b, toks, 5), EMBER_OK);
    /* The copy is another model: its logits differ. */
    const float *la, *lb;
    size_t nv;
    assert_int_equal(ember_session_logits(a, &la, &nv), EMBER_OK);
    assert_int_equal(ember_session_logits(b, &lb, &nv), EMBER_OK);
    float diff = 0;
    for (size_t i = 0; i < nv; ++i) diff = fmaxf(diff, fabsf(la[i] - lb[i]));
    assert_true(diff > 1e-3f);
    size_t n = 0;
    unsigned char *saved = save(a, &n);
    assert_int_equal(ember_session_restore(b, saved, n), EMBER_ERR_CORRUPT_DATA);
    assert_non_null(strstr(ember_last_error(), "different model"));
    /* ... and the original still takes it. */
    ember_session *c = make(g_other, 64);
    assert_int_equal(ember_session_restore(c, saved, n), EMBER_OK);
    /* A state of format version 2 (ember 0.4, weak fingerprint) is refused, saying why. */
    saved[8] = 2;
    assert_int_equal(ember_session_restore(c, saved, n), EMBER_ERR_CORRUPT_DATA);
    assert_non_null(strstr(ember_last_error(), "version 2"));
    free(saved);
    ember_session_free(a);
    ember_session_free(b);
    ember_session_free(c);
    ember_model_free(copy);
}

/* ember_session_cancel_arm: a cancel that comes before the call is kept (it used to be cleared by the
 * call's start, so a cancel landing between an application's check and its call was lost), and stays
 * until the next arm; a session never armed keeps the old rule (each call starts uncancelled). */
static void test_cancel_armed(void **state) {
    (void)state;
    ember_session *s = make(g_other, 64);
    static const ember_token toks[] = {1, 40, 50, 60};
    ember_session_cancel(s);   /* not armed: forgotten by the next call */
    assert_int_equal(ember_session_feed(s, toks, 2), EMBER_OK);
    ember_session_cancel_arm(s);
    ember_session_cancel(s);   /* armed: kept */
    assert_int_equal(ember_session_feed(s, toks + 2, 2), EMBER_ERR_CANCELLED);
    assert_int_equal(ember_session_feed(s, toks + 2, 2), EMBER_ERR_CANCELLED);   /* until the next arm */
    uint32_t pos = 0;
    assert_int_equal(ember_session_position(s, &pos), EMBER_OK);
    assert_int_equal(pos, 2);
    ember_sampler *smp = test_greedy_sampler();
    size_t count = 99;
    assert_int_equal(ember_generate(s, smp, NULL, &count), EMBER_STOPPED);
    assert_int_equal(count, 0);
    ember_token t = 7;
    const char *text = NULL;
    assert_int_equal(ember_generate_next(s, smp, &t, &text, NULL), EMBER_STOPPED);
    assert_int_equal(t, -1);
    assert_string_equal(text, "");
    assert_int_equal(ember_session_position(s, &pos), EMBER_OK);
    assert_int_equal(pos, 2);
    ember_session_cancel_arm(s);   /* clears it */
    assert_int_equal(ember_session_feed(s, toks + 2, 2), EMBER_OK);
    assert_int_equal(ember_generate_next(s, smp, &t, NULL, NULL), EMBER_OK);
    ember_session_cancel_arm(NULL);
    ember_sampler_free(smp);
    ember_session_free(s);
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

static uint32_t position(const ember_session *s) {
    uint32_t pos = 0;
    assert_int_equal(ember_session_position(s, &pos), EMBER_OK);
    return pos;
}

/* A fresh session fed `n` tokens of `tokens`, for comparison. */
static ember_session *recomputed(const ember_token *tokens, size_t n, ember_kv_type kv_type) {
    ember_session *s = make_kv(g_model, 64, 1, kv_type);
    assert_int_equal(ember_session_feed(s, tokens, n), EMBER_OK);
    return s;
}

/* Forks share the prompt's blocks, including the partial last one (21 tokens: one full block of 16 and
 * 5 more), and diverge by copy-on-write: each branch's logits are bit-identical to recomputing its whole
 * token sequence, for either cache type, also after the parent is gone and for a fork of a fork. */
static void test_fork(void **state) {
    (void)state;
    for (int kv = 0; kv < 2; ++kv) {
        const ember_kv_type type = kv ? EMBER_KV_Q8_0 : EMBER_KV_F16;
        ember_session *a = make_kv(g_model, 64, 2, type);
        assert_int_equal(ember_session_feed(a, kPrompt, N_PROMPT), EMBER_OK);
        ember_session *b = NULL;
        assert_int_equal(ember_session_fork(a, &b), EMBER_OK);
        assert_int_equal(position(b), N_PROMPT);
        expect_same_logits(a, b);

        ember_token ta[N_PROMPT + 3], tb[N_PROMPT + 3];
        memcpy(ta, kPrompt, sizeof kPrompt);
        memcpy(tb, kPrompt, sizeof kPrompt);
        ta[N_PROMPT] = 450, ta[N_PROMPT + 1] = 11203, ta[N_PROMPT + 2] = 471;
        tb[N_PROMPT] = 3118, tb[N_PROMPT + 1] = 29892, tb[N_PROMPT + 2] = 322;
        assert_int_equal(ember_session_feed(a, ta + N_PROMPT, 2), EMBER_OK);
        assert_int_equal(ember_session_feed(b, tb + N_PROMPT, 2), EMBER_OK);
        ember_session *ra = recomputed(ta, N_PROMPT + 2, type), *rb = recomputed(tb, N_PROMPT + 2, type);
        expect_same_logits(a, ra);
        expect_same_logits(b, rb);

        /* A fork of the fork, after rolling it back into the shared full block; then the parents go. */
        assert_int_equal(ember_session_truncate(b, 12), EMBER_OK);
        ember_session *c = NULL;
        assert_int_equal(ember_session_fork(b, &c), EMBER_OK);
        ember_session_free(a);
        ember_session_free(b);
        assert_int_equal(ember_session_feed(c, ta + 12, N_PROMPT + 3 - 12), EMBER_OK);
        ember_session *rc = recomputed(ta, N_PROMPT + 3, type);
        expect_same_logits(c, rc);
        /* A fork's state saves like any session's. */
        size_t len = 0;
        unsigned char *buf = save(c, &len);
        ember_session *d = make_kv(g_model, 64, 1, type);
        assert_int_equal(ember_session_restore(d, buf, len), EMBER_OK);
        expect_same_logits(d, rc);
        free(buf);
        ember_session_free(ra);
        ember_session_free(rb);
        ember_session_free(rc);
        ember_session_free(c);
        ember_session_free(d);
    }
    assert_int_equal(ember_session_fork(NULL, NULL), EMBER_ERR_INVALID_ARGUMENT);
}

/* Forks of one session on different threads at once (their calls are serialized on the shared cache):
 * each thread feeds its own continuation token by token, and every branch ends bit-identical to
 * recomputing it alone. Run under ThreadSanitizer as well. */
struct branch {
    ember_session *s;
    ember_token tokens[N_PROMPT + 8];
};

static void *feed_branch(void *p) {
    struct branch *b = p;
    for (size_t i = N_PROMPT; i < N_PROMPT + 8; ++i)
        if (ember_session_feed(b->s, &b->tokens[i], 1) != EMBER_OK) return (void *)1;
    return NULL;
}

static void test_fork_threads(void **state) {
    (void)state;
    ember_session *root = make_kv(g_model, 64, 4, EMBER_KV_F16);
    assert_int_equal(ember_session_feed(root, kPrompt, N_PROMPT), EMBER_OK);
    struct branch br[3];
    pthread_t th[3];
    for (int i = 0; i < 3; ++i) {
        assert_int_equal(ember_session_fork(root, &br[i].s), EMBER_OK);
        memcpy(br[i].tokens, kPrompt, sizeof kPrompt);
        for (int j = 0; j < 8; ++j) br[i].tokens[N_PROMPT + j] = 300 + 1000 * i + 37 * j;
    }
    ember_session_free(root); /* the branches keep the shared cache alive */
    for (int i = 0; i < 3; ++i) assert_int_equal(pthread_create(&th[i], NULL, feed_branch, &br[i]), 0);
    for (int i = 0; i < 3; ++i) {
        void *rc = NULL;
        pthread_join(th[i], &rc);
        assert_null(rc);
    }
    for (int i = 0; i < 3; ++i) {
        ember_session *r = recomputed(br[i].tokens, N_PROMPT + 8, EMBER_KV_F16);
        expect_same_logits(br[i].s, r);
        ember_session_free(r);
        ember_session_free(br[i].s);
    }
}

/* A cache sized for one sequence of 32 tokens has 3 blocks. After a 20-token prompt (a full block and a
 * partial one) and two forks, all three share both blocks; the parent's next token copies the partial
 * block into the last free one; a fork's next token then needs a block too (the partial block is still
 * shared by the other fork) and gets EMBER_ERR_OUT_OF_MEMORY, changing nothing. Once the parent is
 * freed, it goes on. */
static void test_fork_out_of_blocks(void **state) {
    (void)state;
    ember_session *a = make_kv(g_model, 32, 1, EMBER_KV_F16);
    assert_int_equal(ember_session_feed(a, kPrompt, 20), EMBER_OK);
    ember_session *b = NULL, *c = NULL;
    assert_int_equal(ember_session_fork(a, &b), EMBER_OK);
    assert_int_equal(ember_session_fork(b, &c), EMBER_OK);
    assert_int_equal(ember_session_feed(a, kPrompt + 20, 1), EMBER_OK);
    assert_int_equal(ember_session_feed(b, kPrompt + 20, 1), EMBER_ERR_OUT_OF_MEMORY);
    assert_non_null(strstr(ember_last_error(), "n_seq_max"));
    assert_int_equal(position(b), 20);
    ember_session *r20 = recomputed(kPrompt, 20, EMBER_KV_F16);
    expect_same_logits(b, r20);
    /* Restoring a state into b runs into the same limit, and leaves b as it was. */
    size_t len = 0;
    unsigned char *buf = save(a, &len);
    assert_int_equal(ember_session_restore(b, buf, len), EMBER_ERR_OUT_OF_MEMORY);
    assert_int_equal(position(b), 20);
    expect_same_logits(b, r20);
    ember_session_free(a);
    assert_int_equal(ember_session_feed(b, kPrompt + 20, 1), EMBER_OK);
    ember_session *r21 = recomputed(kPrompt, 21, EMBER_KV_F16);
    expect_same_logits(b, r21);
    /* c, untouched by all this, still holds the 20-token state, and now owns the partial block alone. */
    ember_session_free(b);
    assert_int_equal(ember_session_feed(c, kPrompt + 20, 1), EMBER_OK);
    expect_same_logits(c, r21);
    free(buf);
    ember_session_free(c);
    ember_session_free(r20);
    ember_session_free(r21);
}

/* A quantized cache (`type`) against f16: the same greedy tokens for `n_same` of 24 steps on this
 * prompt, logits within `bound` times f16's largest |logit| while the tokens agree, its own states
 * round-trip (smaller than f16's), and a state of another cache type is refused, the session unchanged
 * (an f16 state by this type's session, this type's by an f16 or an `other` session). */
static void quant_cache_case(ember_kv_type type, ember_kv_type other, const char *name, int n_same, double bound) {
    ember_session *f = recomputed(kPrompt, N_PROMPT, EMBER_KV_F16);
    ember_session *q = recomputed(kPrompt, N_PROMPT, type);
    ember_sampler_params sp;
    ember_sampler_params_init(&sp);
    sp.temperature = 0;
    ember_sampler *s1 = NULL, *s2 = NULL;
    ember_sampler_create(&sp, &s1);
    ember_sampler_create(&sp, &s2);
    double max_diff = 0, max_logit = 0;
    int same = 0;
    for (int i = 0; i < 24; ++i) {
        const float *lf = NULL, *lq = NULL;
        size_t n = 0;
        assert_int_equal(ember_session_logits(f, &lf, &n), EMBER_OK);
        assert_int_equal(ember_session_logits(q, &lq, &n), EMBER_OK);
        for (size_t j = 0; j < n; ++j) {
            const double d = fabs((double)lf[j] - lq[j]);
            if (d > max_diff) max_diff = d;
            if (fabs(lf[j]) > max_logit) max_logit = fabs(lf[j]);
        }
        ember_token t1, t2;
        assert_int_equal(ember_generate_next(f, s1, &t1, NULL, NULL), EMBER_OK);
        assert_int_equal(ember_generate_next(q, s2, &t2, NULL, NULL), EMBER_OK);
        if (t1 != t2) break; /* the two now continue different texts */
        ++same;
    }
    printf("%s cache: the same greedy tokens for %d of 24 steps; max |logit difference| %.4f before "
           "(largest |logit| %.2f)\n",
           name, same, max_diff, max_logit);
    assert_true(same >= n_same);
    assert_true(max_diff < bound * max_logit);
    assert_true(max_diff > 0); /* it is really quantized */

    size_t len = 0;
    unsigned char *buf = save(q, &len);
    size_t flen = 0;
    unsigned char *fbuf = save(f, &flen);
    assert_true(len < flen);
    ember_session *q2 = make_kv(g_model, 64, 1, type);
    assert_int_equal(ember_session_restore(q2, buf, len), EMBER_OK);
    expect_same_logits(q2, q);
    assert_int_equal(ember_session_restore(q2, fbuf, flen), EMBER_ERR_CORRUPT_DATA);
    assert_non_null(strstr(ember_last_error(), "KV cache"));
    assert_int_equal(ember_session_restore(f, buf, len), EMBER_ERR_CORRUPT_DATA);
    ember_session *o = make_kv(g_model, 64, 1, other);
    assert_int_equal(ember_session_restore(o, buf, len), EMBER_ERR_CORRUPT_DATA);
    assert_non_null(strstr(ember_last_error(), "KV cache"));
    expect_same_logits(q2, q); /* unchanged by the refusal */
    free(buf);
    free(fbuf);
    ember_sampler_free(s1);
    ember_sampler_free(s2);
    ember_session_free(f);
    ember_session_free(q);
    ember_session_free(q2);
    ember_session_free(o);
}

/* The Q8_0 cache: the same greedy continuation as f16 on this prompt, logits close to f16's (the
 * quantization moves each K/V value by at most half a step, 1/254 of its block's largest value). An
 * unknown kv_type is refused. */
static void test_q8_0_cache(void **state) {
    (void)state;
    quant_cache_case(EMBER_KV_Q8_0, EMBER_KV_Q4_0, "q8_0", 24, 0.05);
    ember_session_params p;
    ember_session_params_init(&p);
    ember_session *bad = NULL;
    p.kv_type = (ember_kv_type)7;
    assert_int_equal(ember_session_create(g_model, &p, &bad), EMBER_ERR_INVALID_ARGUMENT);
    p.kv_type = (ember_kv_type)3; /* the first value past the known ones */
    assert_int_equal(ember_session_create(g_model, &p, &bad), EMBER_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ember_last_error(), "kv_type"));
    p.kv_type = (ember_kv_type)-1;
    assert_int_equal(ember_session_create(g_model, &p, &bad), EMBER_ERR_INVALID_ARGUMENT);
}

/* The Q4_0 cache: each K/V value moves by up to half of its block's step, 1/16 of the block's largest
 * value (a whole step for a value of the largest's size and the other sign), so the logits stray
 * further than Q8_0's (3.3 of 23.4 at most on this prompt, against 0.43). The greedy text is f16's for
 * all 24 steps at the AVX2 and AVX-512 levels, for 13 at the scalar one: a code is a sixteenth of the
 * block's range, so the last-bit differences between levels flip some codes, and a whole step moves a
 * value where Q8_0's would move it 1/127. Held to 12 steps, at every level. */
static void test_q4_0_cache(void **state) {
    (void)state;
    quant_cache_case(EMBER_KV_Q4_0, EMBER_KV_Q8_0, "q4_0", 12, 0.2);
}

/* ember_session_cancel from another thread stops a long feed with EMBER_ERR_CANCELLED and the session
 * as it was (position, logits, and what later feeds compute); from the token callback it stops
 * ember_generate with EMBER_STOPPED after that token; and a cancel only affects a call in progress. */
struct canceller {
    ember_session *s;
    useconds_t delay;
};

static void *cancel_later(void *arg) {
    const struct canceller *c = arg;
    usleep(c->delay);
    ember_session_cancel(c->s);
    return NULL;
}

struct third {
    ember_session *s;
    int n;
};

static bool cancel_on_third(ember_token token, const char *text, size_t len, void *ud) {
    (void)token, (void)text, (void)len;
    struct third *t = ud;
    if (++t->n == 3) ember_session_cancel(t->s);
    return true;
}

static void test_cancel(void **state) {
    (void)state;
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.n_ctx = 1024;
    sp.n_batch = 32;   /* many chunks: the cancel lands between them or inside one */
    ember_session *s = NULL;
    assert_int_equal(ember_session_create(g_model, &sp, &s), EMBER_OK);
    assert_int_equal(ember_session_feed(s, kPrompt, N_PROMPT), EMBER_OK);
    ember_session *ref = make(g_model, 1024);
    assert_int_equal(ember_session_feed(ref, kPrompt, N_PROMPT), EMBER_OK);

    ember_token many[960];
    for (size_t i = 0; i < 960; ++i) many[i] = kPrompt[1 + i % (N_PROMPT - 1)];
    /* A cancel before the call is not for it. */
    ember_session_cancel(s);
    ember_token one = 263;
    assert_int_equal(ember_session_feed(s, &one, 1), EMBER_OK);
    /* Back to the prompt, with its logits (the last prompt token evaluated again). */
    assert_int_equal(ember_session_truncate(s, N_PROMPT - 1), EMBER_OK);
    assert_int_equal(ember_session_feed(s, &kPrompt[N_PROMPT - 1], 1), EMBER_OK);

    /* The feed takes ~0.2 s here (longer on a loaded machine); cancelled after 20 ms, then later if it
     * ever finished first. */
    int cancelled = 0;
    for (useconds_t delay = 20000; delay <= 80000 && !cancelled; delay *= 2) {
        struct canceller c = {s, delay};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, cancel_later, &c), 0);
        const ember_status st = ember_session_feed(s, many, 960);
        pthread_join(th, NULL);
        if (st == EMBER_ERR_CANCELLED) {
            cancelled = 1;
            assert_non_null(strstr(ember_last_error(), "cancel"));
        } else {
            assert_int_equal(st, EMBER_OK);   /* finished before the cancel: roll back and retry */
            assert_int_equal(ember_session_truncate(s, N_PROMPT - 1), EMBER_OK);
            assert_int_equal(ember_session_feed(s, &kPrompt[N_PROMPT - 1], 1), EMBER_OK);
        }
    }
    assert_true(cancelled);
    uint32_t pos = 0;
    assert_int_equal(ember_session_position(s, &pos), EMBER_OK);
    assert_int_equal(pos, N_PROMPT);
    expect_same_logits(s, ref);
    /* Nothing of the cancelled feed is left: the same tokens now give what a fresh session gets. */
    assert_int_equal(ember_session_feed(s, many, 40), EMBER_OK);
    assert_int_equal(ember_session_feed(ref, many, 40), EMBER_OK);
    expect_same_logits(s, ref);

    /* From the callback: generation stops after the third token, which stays evaluated. */
    ember_sampler_params gp_s;
    ember_sampler_params_init(&gp_s);
    gp_s.temperature = 0;
    ember_sampler *smp = NULL;
    assert_int_equal(ember_sampler_create(&gp_s, &smp), EMBER_OK);
    struct third ud = {s, 0};
    ember_generate_params gp;
    ember_generate_params_init(&gp);
    gp.max_tokens = 10;
    gp.on_token = cancel_on_third;
    gp.user_data = &ud;
    size_t count = 0;
    assert_int_equal(ember_generate(s, smp, &gp, &count), EMBER_STOPPED);
    assert_int_equal(count, 3);
    assert_int_equal(ember_session_position(s, &pos), EMBER_OK);
    assert_int_equal(pos, N_PROMPT + 40 + 3);
    /* The next call starts uncancelled. */
    ud.n = 100;   /* never 3 again */
    gp.max_tokens = 2;
    assert_int_equal(ember_generate(s, smp, &gp, &count), EMBER_OK);
    assert_int_equal(count, 2);
    ember_sampler_free(smp);
    ember_session_free(ref);
    ember_session_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_bad_data),
        cmocka_unit_test(test_restore_file_header_first),
        cmocka_unit_test(test_state_of_modified_copy),
        cmocka_unit_test(test_cancel_armed),
        cmocka_unit_test(test_fork),
        cmocka_unit_test(test_fork_threads),
        cmocka_unit_test(test_fork_out_of_blocks),
        cmocka_unit_test(test_q8_0_cache),
        cmocka_unit_test(test_q4_0_cache),
        cmocka_unit_test(test_cancel),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
