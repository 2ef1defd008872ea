/* test_abi.c — the C ABI contract, from C: statuses and messages, NULLs, struct_size, two-call idiom,
 * cancellation, state errors, and that malformed input comes back as an error and never a crash. */
#define _GNU_SOURCE /* dlvsym */
#include "test_util.h"

#include <ember/ember.h>

#include <dlfcn.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *model_260k(void) {
    const char *p = test_find_model("stories260K.gguf", "stories260K/stories260K.gguf");
    test_require(p, "stories260K.gguf");
    static char path[4096];
    snprintf(path, sizeof path, "%s", p);
    return path;
}

static ember_model *load(const char *path) {
    ember_model *m = NULL;
    ember_status st = ember_model_load(path, NULL, &m);
    if (st != EMBER_OK) fprintf(stderr, "load failed: %s\n", ember_last_error());
    assert_int_equal(st, EMBER_OK);
    assert_non_null(m);
    return m;
}

static void test_versions_and_statuses(void **state) {
    (void)state;
    assert_string_equal(ember_version(), EMBER_VERSION_STRING);
    assert_int_equal(ember_abi_version(), EMBER_ABI_VERSION);
    assert_string_equal(ember_status_string(EMBER_OK), "EMBER_OK");
    assert_string_equal(ember_status_string(EMBER_ERR_INVALID_MODEL), "EMBER_ERR_INVALID_MODEL");
    assert_string_equal(ember_status_string(EMBER_ERR_CONTEXT_FULL), "EMBER_ERR_CONTEXT_FULL");
    assert_string_equal(ember_status_string((ember_status)-77), "unknown status");
    /* The numbers are part of the ABI. */
    assert_int_equal(EMBER_ERR_INVALID_ARGUMENT, -1);
    assert_int_equal(EMBER_ERR_INVALID_MODEL, -4);
    assert_int_equal(EMBER_ERR_INTERNAL, -100);
}

static void test_nulls(void **state) {
    (void)state;
    ember_model *m = (ember_model *)0x1;
    assert_int_equal(ember_model_load(NULL, NULL, &m), EMBER_ERR_INVALID_ARGUMENT);
    assert_null(m);
    assert_non_null(strstr(ember_last_error(), "path"));
    assert_int_equal(ember_model_load("x", NULL, NULL), EMBER_ERR_INVALID_ARGUMENT);
    ember_model_free(NULL);
    ember_session_free(NULL);
    ember_sampler_free(NULL);
    size_t n = 0;
    assert_int_equal(ember_tokenize(NULL, "a", 1, 0, NULL, 0, &n), EMBER_ERR_INVALID_ARGUMENT);
    assert_int_equal(ember_session_feed(NULL, NULL, 0), EMBER_ERR_INVALID_ARGUMENT);
    assert_int_equal(ember_sampler_sample(NULL, NULL, 0, NULL), EMBER_ERR_INVALID_ARGUMENT);
    assert_int_equal(ember_generate_next(NULL, NULL, NULL, NULL, NULL), EMBER_ERR_INVALID_ARGUMENT);
    assert_int_equal(ember_token_bos(NULL), -1);
    assert_false(ember_token_is_eog(NULL, 2));
    ember_model_params_init(NULL); /* must not crash */
}

static void test_bad_files(void **state) {
    (void)state;
    ember_model *m = NULL;
    assert_int_equal(ember_model_load("/nonexistent/model.gguf", NULL, &m), EMBER_ERR_IO);
    assert_non_null(strstr(ember_last_error(), "/nonexistent/model.gguf"));

    char path[] = "/tmp/ember_test_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char junk[] = "this is not a gguf file at all, just text";
    assert_int_equal(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
    close(fd);
    assert_int_equal(ember_model_load(path, NULL, &m), EMBER_ERR_INVALID_MODEL);
    assert_null(m);
    assert_non_null(strstr(ember_last_error(), "magic"));

    /* A real model cut short at several points: always INVALID_MODEL, never a crash. */
    FILE *f = fopen(model_260k(), "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *bytes = malloc((size_t)size);
    assert_int_equal(fread(bytes, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    const long cuts[] = {0, 3, 10, 24, 100, 1000, 20000, size / 2, size - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; ++i) {
        FILE *o = fopen(path, "wb");
        fwrite(bytes, 1, (size_t)cuts[i], o);
        fclose(o);
        ember_status st = ember_model_load(path, NULL, &m);
        if (st != EMBER_ERR_INVALID_MODEL) fprintf(stderr, "cut at %ld: %d %s\n", cuts[i], st, ember_last_error());
        assert_int_equal(st, EMBER_ERR_INVALID_MODEL);
        assert_null(m);
        assert_true(strlen(ember_last_error()) > 10);
    }
    free(bytes);
    unlink(path);
}

static bool cancel_at_half(float p, void *ud) {
    float *last = ud;
    assert_true(p >= *last); /* progress never goes back */
    *last = p;
    return p < 0.5f;
}

static bool record(float p, void *ud) {
    float *last = ud;
    assert_true(p >= *last && p <= 1.0f);
    *last = p;
    return true;
}

static void test_progress_and_cancel(void **state) {
    (void)state;
    ember_model_params mp;
    ember_model_params_init(&mp);
    assert_int_equal(mp.struct_size, sizeof mp);
    float last = 0;
    mp.progress = cancel_at_half;
    mp.progress_user_data = &last;
    ember_model *m = (ember_model *)0x1;
    assert_int_equal(ember_model_load(model_260k(), &mp, &m), EMBER_ERR_CANCELLED);
    assert_null(m);
    last = 0;
    mp.progress = record;
    assert_int_equal(ember_model_load(model_260k(), &mp, &m), EMBER_OK);
    assert_true(last == 1.0f);
    ember_model_free(m);
}

static void test_struct_size(void **state) {
    (void)state;
    ember_model *m = load(model_260k());
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.struct_size = 3; /* smaller than any version */
    ember_session *s = NULL;
    assert_int_equal(ember_session_create(m, &sp, &s), EMBER_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ember_last_error(), "struct_size"));
    /* A NULL params pointer means defaults. */
    assert_int_equal(ember_session_create(m, NULL, &s), EMBER_OK);
    uint32_t n_ctx = 0;
    assert_int_equal(ember_session_context_length(s, &n_ctx), EMBER_OK);
    assert_int_equal(n_ctx, 2048); /* the trained context of stories260K */
    ember_session_free(s);

    /* An EMBER_1 caller's struct is 32 bytes: what lies past it (garbage here, which as a kv_type would be
     * refused) is not read, and the fields added since take their defaults. */
    ember_session_params big[2];
    memset(big, 0xAB, sizeof big);
    ember_session_params_init(&big[0]);
    memset((char *)&big[0] + 32, 0xAB, sizeof big[0] - 32);
    big[0].struct_size = 32;
    big[0].n_ctx = 64;
    assert_int_equal(ember_session_create(m, &big[0], &s), EMBER_OK);
    ember_session_free(s);
    big[0].struct_size = sizeof big[0];
    assert_int_equal(ember_session_create(m, &big[0], &s), EMBER_ERR_INVALID_ARGUMENT); /* now it is read */
    assert_non_null(strstr(ember_last_error(), "kv_type"));
    /* A newer caller's larger struct: the bytes past what this library knows are ignored. */
    memset(big, 0xAB, sizeof big);
    ember_session_params_init(&big[0]);
    big[0].struct_size = sizeof big;
    big[0].n_ctx = 64;
    assert_int_equal(ember_session_create(m, &big[0], &s), EMBER_OK);
    ember_session_free(s);
    ember_engine_params ep[2];
    memset(ep, 0xAB, sizeof ep);
    ember_engine_params_init(&ep[0]);
    memset((char *)&ep[0] + 40, 0xAB, sizeof ep[0] - 40);
    ep[0].struct_size = 40;
    ep[0].n_ctx = 64;
    ep[0].n_seq_max = 1;
    ep[0].manual_step = true;
    ember_engine *e = NULL;
    assert_int_equal(ember_engine_create(m, &ep[0], &e), EMBER_OK);
    ember_engine_free(e);

    /* The inits a program built against EMBER_1 calls write only the EMBER_1 struct (ELF symbol
     * versions; in a static build there are none to look up). */
    typedef void (*init_fn)(void *);
    init_fn old_session = (init_fn)dlvsym(RTLD_DEFAULT, "ember_session_params_init", "EMBER_1");
    init_fn old_engine = (init_fn)dlvsym(RTLD_DEFAULT, "ember_engine_params_init", "EMBER_1");
    init_fn old_generate = (init_fn)dlvsym(RTLD_DEFAULT, "ember_generate_params_init", "EMBER_1");
    if (old_session && old_engine && old_generate) {
        unsigned char buf[64];
        memset(buf, 0xCD, sizeof buf);
        old_session(buf);
        uint32_t size;
        memcpy(&size, buf, 4);
        assert_int_equal(size, 32);
        for (size_t i = 32; i < sizeof buf; ++i) assert_int_equal(buf[i], 0xCD);
        memset(buf, 0xCD, sizeof buf);
        old_engine(buf);
        memcpy(&size, buf, 4);
        assert_int_equal(size, 40);
        for (size_t i = 40; i < sizeof buf; ++i) assert_int_equal(buf[i], 0xCD);
        memset(buf, 0xCD, sizeof buf);
        old_generate(buf);
        memcpy(&size, buf, 4);
        assert_int_equal(size, 24);
        for (size_t i = 24; i < sizeof buf; ++i) assert_int_equal(buf[i], 0xCD);
    } else {
        printf("note: no EMBER_1 symbol versions to check (static build?)\n");
    }
    /* The structs that grew in EMBER_1.4: their older inits write only the older struct. */
    const struct { const char *name, *node; uint32_t size; } grown_1_4[] = {
        {"ember_generate_params_init", "EMBER_1.2", 32},
        {"ember_session_params_init", "EMBER_1.1", 40}, /* before the device field */
        {"ember_engine_params_init", "EMBER_1.1", 48},
        {"ember_sampler_params_init", "EMBER_1", 48},
        {"ember_request_params_init", "EMBER_1", 56},
        /* and in EMBER_1.10 (speculation): the EMBER_1.9 engine params, the EMBER_1.4 request params */
        {"ember_engine_params_init", "EMBER_1.9", 72},
        {"ember_request_params_init", "EMBER_1.4", 80},
    };
    for (size_t k = 0; k < sizeof grown_1_4 / sizeof grown_1_4[0]; ++k) {
        init_fn old = (init_fn)dlvsym(RTLD_DEFAULT, grown_1_4[k].name, grown_1_4[k].node);
        if (!old) {
            printf("note: no %s@%s to check (static build?)\n", grown_1_4[k].name, grown_1_4[k].node);
            continue;
        }
        unsigned char buf[96];
        memset(buf, 0xCD, sizeof buf);
        old(buf);
        uint32_t size;
        memcpy(&size, buf, 4);
        assert_int_equal(size, grown_1_4[k].size);
        for (size_t i = grown_1_4[k].size; i < sizeof buf; ++i) assert_int_equal(buf[i], 0xCD);
    }
    /* Callers built before EMBER_1.4: what lies past their structs (garbage here: as a grammar or stop
     * pointer it would crash) is not read. */
    {
        union { ember_sampler_params s; unsigned char bytes[sizeof(ember_sampler_params) + 32]; } smp_old;
        memset(&smp_old, 0xAB, sizeof smp_old);
        ember_sampler_params_init(&smp_old.s);
        memset(&smp_old.s.n_logprobs, 0xAB, sizeof smp_old.s.n_logprobs);
        smp_old.s.temperature = 0;
        smp_old.s.struct_size = 48;
        ember_sampler *old_sampler = NULL;
        assert_int_equal(ember_sampler_create(&smp_old.s, &old_sampler), EMBER_OK);   /* n_logprobs not read */
        ember_session *os = NULL;
        assert_int_equal(ember_session_create(m, NULL, &os), EMBER_OK);
        const ember_token p3[3] = {1, 403, 407};
        assert_int_equal(ember_session_feed(os, p3, 3), EMBER_OK);
        union { ember_generate_params s; unsigned char bytes[sizeof(ember_generate_params) + 32]; } gp_old;
        memset(&gp_old, 0xAB, sizeof gp_old);
        ember_generate_params_init(&gp_old.s);
        memset(gp_old.bytes + 25, 0xAB, sizeof gp_old - 25);
        gp_old.s.struct_size = 32;
        gp_old.s.max_tokens = 1;
        size_t n_gen = 0;
        const ember_status gst = ember_generate(os, old_sampler, &gp_old.s, &n_gen);
        assert_true(gst == EMBER_OK || gst == EMBER_END_OF_GENERATION);
        assert_int_equal(n_gen, 1);
        ember_session_free(os);
        ember_sampler_free(old_sampler);
        ember_engine_params ep1;
        ember_engine_params_init(&ep1);
        ep1.n_ctx = 64;
        ep1.n_seq_max = 1;
        ep1.manual_step = true;
        ember_engine *e1 = NULL;
        assert_int_equal(ember_engine_create(m, &ep1, &e1), EMBER_OK);
        union { ember_request_params s; unsigned char bytes[sizeof(ember_request_params) + 32]; } rp_old;
        memset(&rp_old, 0xAB, sizeof rp_old);
        ember_request_params_init(&rp_old.s);
        memset(&rp_old.s.grammar, 0xAB, sizeof rp_old - offsetof(ember_request_params, grammar));
        rp_old.s.struct_size = 56;
        rp_old.s.prompt = p3;
        rp_old.s.n_prompt = 3;
        rp_old.s.max_tokens = 1;
        ember_request *r1 = NULL;
        assert_int_equal(ember_request_submit(e1, &rp_old.s, &r1), EMBER_OK);
        ember_request_free(r1);
        ember_engine_free(e1);
    }

    /* Output struct: an older, smaller ember_model_info gets only the fields it has. */
    ember_model_info info;
    memset(&info, 0xAB, sizeof info);
    info.struct_size = (uint32_t)offsetof(ember_model_info, kv_bytes_per_token);
    assert_int_equal(ember_model_get_info(m, &info), EMBER_OK);
    assert_int_equal(info.n_layer, 5);
    assert_true(info.kv_bytes_per_token == 0xABABABABABABABABull); /* untouched */
    ember_model_free(m);
}

/* Every params and output struct of the header, at a struct_size below any version (refused, naming
 * struct_size) and at one larger than this library knows (a newer caller's: the unknown tail is not
 * read, and for output structs not written, and their struct_size is kept). Structs that grew since
 * EMBER_1 (session, engine and generate params, model_info) are also tested at their EMBER_1 size above.
 * (Add every new struct here.) */
#define EXTRA 32
#define BIG(type, var)                                        \
    union {                                                   \
        type s;                                               \
        unsigned char bytes[sizeof(type) + EXTRA];            \
    } var;                                                    \
    memset(&var, 0xAB, sizeof var)

static void expect_tail_untouched(const unsigned char *bytes, size_t from) {
    for (size_t i = from; i < from + EXTRA; ++i) assert_int_equal(bytes[i], 0xAB);
}

static void expect_struct_size_error(ember_status st) {
    assert_int_equal(st, EMBER_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ember_last_error(), "struct_size"));
}

/* The EMBER_1.4 CPU budget: defaults, a round trip, a smaller (older) struct refused below its first
 * version, a larger (newer) one's tail left alone by _get, undefined priorities and flags refused, and
 * NULL restoring the defaults. */
static void test_cpu_budget(void **state) {
    (void)state;
    BIG(ember_cpu_budget, b);
    ember_cpu_budget_init(&b.s);
    assert_int_equal(b.s.struct_size, sizeof b.s);
    assert_int_equal(b.s.max_threads, 0);
    assert_int_equal(b.s.priority, EMBER_CPU_PRIORITY_NORMAL);
    assert_int_equal(b.s.flags, 0);
    b.s.max_threads = 1;
    b.s.priority = EMBER_CPU_PRIORITY_LOW;
    b.s.flags = EMBER_CPU_BUDGET_FIXED_THREADS;
    assert_int_equal(ember_cpu_budget_set(&b.s), EMBER_OK);
    BIG(ember_cpu_budget, g);
    ember_cpu_budget_init(&g.s);
    g.s.struct_size = sizeof g.s + EXTRA;
    assert_int_equal(ember_cpu_budget_get(&g.s), EMBER_OK);
    assert_int_equal(g.s.struct_size, sizeof g.s + EXTRA);
    assert_int_equal(g.s.max_threads, 1);
    assert_int_equal(g.s.priority, EMBER_CPU_PRIORITY_LOW);
    assert_int_equal(g.s.flags, EMBER_CPU_BUDGET_FIXED_THREADS);
    expect_tail_untouched(g.bytes, sizeof g.s);
    b.s.priority = 3;
    assert_int_equal(ember_cpu_budget_set(&b.s), EMBER_ERR_INVALID_ARGUMENT);
    b.s.priority = EMBER_CPU_PRIORITY_HIGH;
    b.s.flags = 2;
    assert_int_equal(ember_cpu_budget_set(&b.s), EMBER_ERR_INVALID_ARGUMENT);
    b.s.flags = 0;
    b.s.struct_size = 4;
    expect_struct_size_error(ember_cpu_budget_set(&b.s));
    g.s.struct_size = 4;
    expect_struct_size_error(ember_cpu_budget_get(&g.s));
    assert_int_equal(ember_cpu_budget_get(NULL), EMBER_ERR_INVALID_ARGUMENT);
    assert_int_equal(ember_cpu_budget_set(NULL), EMBER_OK);
    ember_cpu_budget_init(&g.s);
    assert_int_equal(ember_cpu_budget_get(&g.s), EMBER_OK);
    assert_int_equal(g.s.max_threads, 0);
    assert_int_equal(g.s.priority, EMBER_CPU_PRIORITY_NORMAL);
    assert_int_equal(g.s.flags, 0);
}

/* The EMBER_1.2 device structs: ember_vulkan_device_params and ember_cuda_device_params below any version are refused before any
 * device is touched; ember_device_info (an output) keeps a newer caller's tail, where a Vulkan device
 * exists to list. */
static void test_struct_size_device_structs(void **state) {
    (void)state;
    BIG(ember_vulkan_device_params, vp);
    ember_vulkan_device_params_init(&vp.s);
    vp.s.struct_size = 4;
    expect_struct_size_error(ember_vulkan_set_device(&vp.s));
    BIG(ember_cuda_device_params, cp);
    ember_cuda_device_params_init(&cp.s);
    assert_int_equal(cp.s.device_index, -1);
    assert_null(cp.s.stream);
    cp.s.struct_size = 4;
    expect_struct_size_error(ember_cuda_set_device(&cp.s));
    BIG(ember_device_info, di);
    ember_device_info_init(&di.s);
    di.s.struct_size = sizeof di.s + EXTRA;
    size_t n = 0;
    if (ember_backend_devices(EMBER_BACKEND_VULKAN, &di.s, 1, &n) == EMBER_OK && n > 0) {
        assert_int_equal(di.s.struct_size, sizeof di.s + EXTRA);
        assert_true(di.s.name[0] != 0);
        expect_tail_untouched(di.bytes, sizeof di.s);
    }
}

static void test_struct_size_every_struct(void **state) {
    (void)state;
    ember_model *m = load(model_260k());

    /* ember_model_params */
    BIG(ember_model_params, mp);
    ember_model_params_init(&mp.s);
    mp.s.struct_size = sizeof mp.s + EXTRA;
    ember_model *m2 = NULL;
    assert_int_equal(ember_model_load(model_260k(), &mp.s, &m2), EMBER_OK);
    ember_model_free(m2);
    mp.s.struct_size = (uint32_t)offsetof(ember_model_params, log);
    expect_struct_size_error(ember_model_load(model_260k(), &mp.s, &m2));
    assert_null(m2);

    /* ember_session_params (the EMBER_1 size is tested in test_struct_size) */
    BIG(ember_session_params, sp);
    ember_session_params_init(&sp.s);
    sp.s.n_ctx = 32;
    sp.s.struct_size = sizeof sp.s + EXTRA;
    ember_session *s = NULL;
    assert_int_equal(ember_session_create(m, &sp.s, &s), EMBER_OK);
    ember_session_free(s);
    sp.s.struct_size = 0;
    expect_struct_size_error(ember_session_create(m, &sp.s, &s));

    /* ember_sampler_params, directly and inside ember_request_params */
    BIG(ember_sampler_params, smp);
    ember_sampler_params_init(&smp.s);
    smp.s.struct_size = sizeof smp.s + EXTRA;
    ember_sampler *sampler = NULL;
    assert_int_equal(ember_sampler_create(&smp.s, &sampler), EMBER_OK);
    ember_sampler_free(sampler);
    smp.s.struct_size = (uint32_t)offsetof(ember_sampler_params, seed);
    expect_struct_size_error(ember_sampler_create(&smp.s, &sampler));
    assert_null(sampler);

    /* ember_generate_params */
    ember_sampler_params greedy;
    ember_sampler_params_init(&greedy);
    greedy.temperature = 0;
    assert_int_equal(ember_sampler_create(&greedy, &sampler), EMBER_OK);
    ember_session_params_init(&sp.s);
    sp.s.n_ctx = 32;
    assert_int_equal(ember_session_create(m, &sp.s, &s), EMBER_OK);
    const ember_token prompt[3] = {1, 403, 407};
    assert_int_equal(ember_session_feed(s, prompt, 3), EMBER_OK);
    BIG(ember_generate_params, gp);
    ember_generate_params_init(&gp.s);
    gp.s.max_tokens = 2;
    gp.s.struct_size = sizeof gp.s + EXTRA;
    size_t count = 0;
    ember_status st = ember_generate(s, sampler, &gp.s, &count);
    assert_true(st == EMBER_OK || st == EMBER_END_OF_GENERATION);
    /* An EMBER_1 caller's ember_generate_params is 24 bytes; what lies past it is not read. */
    memset(&gp, 0xAB, sizeof gp);
    gp.s.struct_size = 24;
    gp.s.max_tokens = 1;
    gp.s.on_token = NULL;
    gp.s.user_data = NULL;
    st = ember_generate(s, sampler, &gp.s, &count);
    assert_true(st == EMBER_OK || st == EMBER_END_OF_GENERATION);
    assert_int_equal(count, 1);
    gp.s.struct_size = 4;
    expect_struct_size_error(ember_generate(s, sampler, &gp.s, &count));
    ember_session_free(s);
    ember_sampler_free(sampler);

    /* ember_engine_params (for engines and estimates), ember_request_params */
    BIG(ember_engine_params, ep);
    ember_engine_params_init(&ep.s);
    ep.s.n_ctx = 64;
    ep.s.n_seq_max = 1;
    ep.s.manual_step = true;
    ep.s.struct_size = sizeof ep.s + EXTRA;
    ember_engine *e = NULL;
    assert_int_equal(ember_engine_create(m, &ep.s, &e), EMBER_OK);
    BIG(ember_memory_estimate, est);
    ember_memory_estimate_init(&est.s);
    assert_int_equal(ember_estimate_memory(m, &ep.s, &est.s), EMBER_OK);
    BIG(ember_request_params, rp);
    ember_request_params_init(&rp.s);
    rp.s.prompt = prompt;
    rp.s.n_prompt = 3;
    rp.s.max_tokens = 1;
    rp.s.sampling = &smp.s;
    smp.s.struct_size = sizeof smp.s + EXTRA;
    rp.s.struct_size = sizeof rp.s + EXTRA;
    ember_request *r = NULL;
    assert_int_equal(ember_request_submit(e, &rp.s, &r), EMBER_OK);
    ember_request_free(r);
    smp.s.struct_size = 8;
    expect_struct_size_error(ember_request_submit(e, &rp.s, &r));
    assert_null(r);
    smp.s.struct_size = sizeof smp.s;
    rp.s.struct_size = (uint32_t)offsetof(ember_request_params, user_data);
    expect_struct_size_error(ember_request_submit(e, &rp.s, &r));
    ep.s.struct_size = 36; /* below EMBER_1's 40 */
    ember_engine *e2 = NULL;
    expect_struct_size_error(ember_engine_create(m, &ep.s, &e2));
    assert_null(e2);
    expect_struct_size_error(ember_estimate_memory(m, &ep.s, &est.s));

    /* Output structs: ember_model_info, ember_tensor_info, ember_engine_stats, ember_memory_estimate. */
    BIG(ember_model_info, info);
    ember_model_info_init(&info.s);
    info.s.struct_size = sizeof info.s + EXTRA;
    assert_int_equal(ember_model_get_info(m, &info.s), EMBER_OK);
    assert_int_equal(info.s.struct_size, sizeof info.s + EXTRA);
    assert_int_equal(info.s.n_layer, 5);
    expect_tail_untouched(info.bytes, sizeof info.s);
    info.s.struct_size = (uint32_t)offsetof(ember_model_info, n_ctx_train);
    expect_struct_size_error(ember_model_get_info(m, &info.s));

    BIG(ember_tensor_info, ti);
    ember_tensor_info_init(&ti.s);
    ti.s.struct_size = sizeof ti.s + EXTRA;
    assert_int_equal(ember_model_tensor_info(m, 0, &ti.s), EMBER_OK);
    assert_int_equal(ti.s.struct_size, sizeof ti.s + EXTRA);
    assert_non_null(ti.s.name);
    expect_tail_untouched(ti.bytes, sizeof ti.s);
    ti.s.struct_size = (uint32_t)offsetof(ember_tensor_info, n_bytes);
    expect_struct_size_error(ember_model_tensor_info(m, 0, &ti.s));

    BIG(ember_engine_stats, es);
    ember_engine_stats_init(&es.s);
    es.s.struct_size = sizeof es.s + EXTRA;
    assert_int_equal(ember_engine_get_stats(e, &es.s), EMBER_OK);
    assert_int_equal(es.s.struct_size, sizeof es.s + EXTRA);
    assert_int_equal(es.s.block_size, 16);
    expect_tail_untouched(es.bytes, sizeof es.s);
    es.s.struct_size = 0;
    expect_struct_size_error(ember_engine_get_stats(e, &es.s));

    ember_engine_params_init(&ep.s);
    ep.s.n_ctx = 64;
    memset(&est, 0xAB, sizeof est);
    ember_memory_estimate_init(&est.s);
    est.s.struct_size = sizeof est.s + EXTRA;
    assert_int_equal(ember_estimate_memory(m, &ep.s, &est.s), EMBER_OK);
    assert_int_equal(est.s.struct_size, sizeof est.s + EXTRA);
    assert_true(est.s.total_bytes == est.s.weights_bytes + est.s.kv_bytes + est.s.compute_bytes);
    expect_tail_untouched(est.bytes, sizeof est.s);
    est.s.struct_size = (uint32_t)offsetof(ember_memory_estimate, total_bytes);
    expect_struct_size_error(ember_estimate_memory(m, &ep.s, &est.s));

    /* ember_spec_params (lookup decoding needs no draft model) and ember_spec_stats. */
    ember_session_params_init(&sp.s);
    sp.s.n_ctx = 32;
    assert_int_equal(ember_session_create(m, &sp.s, &s), EMBER_OK);
    BIG(ember_spec_params, spec);
    ember_spec_params_init(&spec.s);
    spec.s.mode = EMBER_SPEC_LOOKUP;
    spec.s.struct_size = sizeof spec.s + EXTRA;
    assert_int_equal(ember_session_set_speculation(s, &spec.s), EMBER_OK);
    spec.s.struct_size = (uint32_t)offsetof(ember_spec_params, n_threads);
    expect_struct_size_error(ember_session_set_speculation(s, &spec.s));
    BIG(ember_spec_stats, ss);
    ember_spec_stats_init(&ss.s);
    ss.s.struct_size = sizeof ss.s + EXTRA;
    assert_int_equal(ember_session_spec_stats(s, &ss.s), EMBER_OK);
    assert_int_equal(ss.s.struct_size, sizeof ss.s + EXTRA);
    expect_tail_untouched(ss.bytes, sizeof ss.s);
    ss.s.struct_size = (uint32_t)offsetof(ember_spec_stats, tokens_per_pass);
    expect_struct_size_error(ember_session_spec_stats(s, &ss.s));
    ember_session_free(s);

    ember_engine_free(e);
    ember_model_free(m);
}

static void test_model_queries(void **state) {
    (void)state;
    ember_model *m = load(model_260k());
    ember_model_info info;
    ember_model_info_init(&info);
    assert_int_equal(ember_model_get_info(m, &info), EMBER_OK);
    assert_string_equal(info.architecture, "llama");
    assert_int_equal(info.n_vocab, 512);
    assert_int_equal(info.n_embd, 64);
    assert_int_equal(info.n_layer, 5);
    assert_int_equal(info.n_head, 8);
    assert_int_equal(info.n_head_kv, 4);
    assert_int_equal(info.n_ctx_train, 2048);
    assert_true(info.n_params > 200000 && info.n_params < 400000);
    assert_int_equal(info.kv_bytes_per_token, 2 * 5 * 32 * 2);
    assert_int_equal(info.n_kv_layers, 5); /* attention only: every layer keeps KV rows, none a state */
    assert_int_equal(info.n_recurrent_layers, 0);
    assert_true(info.state_bytes_per_sequence == 0);

    size_t len = 0;
    assert_int_equal(ember_model_meta_string(m, "general.architecture", NULL, 0, &len), EMBER_OK);
    assert_int_equal(len, 5);
    char small[3];
    assert_int_equal(ember_model_meta_string(m, "general.architecture", small, sizeof small, &len),
                     EMBER_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(len, 5);
    char buf[16];
    assert_int_equal(ember_model_meta_string(m, "general.architecture", buf, sizeof buf, &len), EMBER_OK);
    assert_string_equal(buf, "llama");
    int64_t v = 0;
    assert_int_equal(ember_model_meta_int(m, "llama.block_count", &v), EMBER_OK);
    assert_int_equal(v, 5);
    assert_int_equal(ember_model_meta_int(m, "general.architecture", &v), EMBER_ERR_TYPE_MISMATCH);
    assert_int_equal(ember_model_meta_int(m, "no.such.key", &v), EMBER_ERR_NOT_FOUND);
    double d = 0;
    assert_int_equal(ember_model_meta_float(m, "llama.attention.layer_norm_rms_epsilon", &d), EMBER_OK);
    assert_true(d > 0.9e-5 && d < 1.1e-5);
    size_t count = 0;
    assert_int_equal(ember_model_meta_count(m, &count), EMBER_OK);
    assert_true(count >= 10);
    const char *key = NULL;
    assert_int_equal(ember_model_meta_key(m, 0, &key), EMBER_OK);
    assert_non_null(key);
    assert_int_equal(ember_model_meta_key(m, count, &key), EMBER_ERR_NOT_FOUND);
    assert_int_equal(ember_model_tensor_count(m, &count), EMBER_OK);
    assert_int_equal(count, 48);
    ember_tensor_info ti;
    ember_tensor_info_init(&ti);
    assert_int_equal(ember_model_tensor_info(m, 0, &ti), EMBER_OK);
    assert_string_equal(ti.type, "F32");
    assert_int_equal(ember_model_tensor_info(m, 48, &ti), EMBER_ERR_NOT_FOUND);
    ember_model_free(m);
}

static void test_tokenizer_api(void **state) {
    (void)state;
    ember_model *m = load(model_260k());
    const char *text = "Once upon a time";
    size_t n = 0;
    assert_int_equal(ember_tokenize(m, text, strlen(text), EMBER_TOKENIZE_ADD_SPECIAL, NULL, 0, &n), EMBER_OK);
    assert_true(n >= 2);
    ember_token one[1];
    size_t n2 = 0;
    assert_int_equal(ember_tokenize(m, text, strlen(text), EMBER_TOKENIZE_ADD_SPECIAL, one, 1, &n2),
                     EMBER_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(n2, n);
    ember_token toks[64];
    assert_int_equal(ember_tokenize(m, text, strlen(text), EMBER_TOKENIZE_ADD_SPECIAL, toks, 64, &n2), EMBER_OK);
    assert_int_equal(toks[0], ember_token_bos(m));
    assert_int_equal(ember_tokenize(m, text, strlen(text), 0x80, toks, 64, &n2), EMBER_ERR_INVALID_ARGUMENT);
    assert_int_equal(ember_tokenize(m, NULL, 5, 0, toks, 64, &n2), EMBER_ERR_INVALID_ARGUMENT);

    char out[128];
    size_t len = 0;
    assert_int_equal(ember_detokenize(m, toks, n, 0, out, sizeof out, &len), EMBER_OK);
    assert_string_equal(out, text);
    assert_int_equal(len, strlen(text));
    assert_int_equal(ember_token_to_piece(m, 512, 0, out, sizeof out, &len), EMBER_ERR_INVALID_ARGUMENT);
    assert_int_equal(ember_token_to_piece(m, -1, 0, out, sizeof out, &len), EMBER_ERR_INVALID_ARGUMENT);
    /* BOS renders as nothing unless asked. */
    assert_int_equal(ember_token_to_piece(m, ember_token_bos(m), 0, out, sizeof out, &len), EMBER_OK);
    assert_int_equal(len, 0);
    assert_int_equal(ember_token_to_piece(m, ember_token_bos(m), EMBER_DETOKENIZE_RENDER_SPECIAL, out, sizeof out, &len),
                     EMBER_OK);
    assert_true(len > 0);
    assert_true(ember_token_is_eog(m, ember_token_eos(m)));
    assert_false(ember_token_is_eog(m, toks[1]));
    ember_model_free(m);
}

static void test_session_states(void **state) {
    (void)state;
    ember_model *m = load(model_260k());
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.n_ctx = 8;
    sp.n_threads = 2;
    ember_session *s = NULL;
    assert_int_equal(ember_session_create(m, &sp, &s), EMBER_OK);
    const float *logits = NULL;
    size_t nv = 0;
    assert_int_equal(ember_session_logits(s, &logits, &nv), EMBER_ERR_INVALID_STATE);
    ember_token bad = 9999;
    assert_int_equal(ember_session_feed(s, &bad, 1), EMBER_ERR_INVALID_ARGUMENT);
    ember_token toks[9] = {1, 403, 407, 261, 378, 432, 383, 286, 261};
    assert_int_equal(ember_session_feed(s, toks, 9), EMBER_ERR_CONTEXT_FULL);
    uint32_t pos = 99;
    assert_int_equal(ember_session_position(s, &pos), EMBER_OK);
    assert_int_equal(pos, 0); /* nothing was evaluated */
    assert_int_equal(ember_session_feed(s, toks, 4), EMBER_OK);
    assert_int_equal(ember_session_logits(s, &logits, &nv), EMBER_OK);
    assert_int_equal(nv, 512);
    float saved[512];
    memcpy(saved, logits, sizeof saved);
    assert_int_equal(ember_session_truncate(s, 5), EMBER_ERR_INVALID_ARGUMENT);
    /* Roll back one token and evaluate it again: the same logits. */
    assert_int_equal(ember_session_truncate(s, 3), EMBER_OK);
    assert_int_equal(ember_session_logits(s, &logits, &nv), EMBER_ERR_INVALID_STATE);
    assert_int_equal(ember_session_feed(s, toks + 3, 1), EMBER_OK);
    assert_int_equal(ember_session_logits(s, &logits, &nv), EMBER_OK);
    for (int i = 0; i < 512; ++i) assert_true(fabsf(logits[i] - saved[i]) <= 1e-4f);
    /* Roll back into a different continuation: different logits. */
    assert_int_equal(ember_session_truncate(s, 3), EMBER_OK);
    assert_int_equal(ember_session_feed(s, toks + 5, 1), EMBER_OK);
    assert_int_equal(ember_session_logits(s, &logits, &nv), EMBER_OK);
    int differ = 0;
    for (int i = 0; i < 512; ++i) differ += fabsf(logits[i] - saved[i]) > 1e-3f;
    assert_true(differ > 10);
    ember_session_free(s);

    /* A vocab-only model cannot run. */
    ember_model_params mp;
    ember_model_params_init(&mp);
    mp.vocab_only = true;
    ember_model *vm = NULL;
    assert_int_equal(ember_model_load(model_260k(), &mp, &vm), EMBER_OK);
    assert_int_equal(ember_session_create(vm, NULL, &s), EMBER_ERR_INVALID_ARGUMENT);
    assert_null(s);
    ember_model_free(vm);

    /* A metadata-only model describes the file (its info and tensors) but has no tokenizer: the
     * tokenizer's calls are refused or answer "none", never crash. */
    assert_int_equal(ember_model_load_metadata(model_260k(), NULL, &vm), EMBER_OK);
    ember_model_info info;
    ember_model_info_init(&info);
    assert_int_equal(ember_model_get_info(vm, &info), EMBER_OK);
    assert_string_equal(info.architecture, "llama");
    assert_int_equal(info.n_vocab, 512);
    assert_int_equal(info.n_layer, 0);
    size_t n = 0;
    assert_int_equal(ember_model_tensor_count(vm, &n), EMBER_OK);
    assert_true(n > 0);
    assert_int_equal(ember_tokenize(vm, "hi", 2, 0, NULL, 0, &n), EMBER_ERR_UNSUPPORTED);
    assert_non_null(strstr(ember_last_error(), "metadata-only"));
    assert_int_equal(ember_token_bos(vm), -1);
    assert_int_equal(ember_token_eos(vm), -1);
    assert_false(ember_token_is_eog(vm, 0));
    assert_int_equal(ember_session_create(vm, NULL, &s), EMBER_ERR_INVALID_ARGUMENT);
    ember_model_free(vm);
    assert_int_equal(ember_model_load_metadata("/nonexistent.gguf", NULL, &vm), EMBER_ERR_IO);
    assert_null(vm);
    ember_model_free(m);
}

static void test_sampler_api(void **state) {
    (void)state;
    ember_sampler_params p;
    ember_sampler_params_init(&p);
    ember_sampler *s = NULL;
    p.top_p = 0;
    assert_int_equal(ember_sampler_create(&p, &s), EMBER_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ember_last_error(), "top_p"));
    ember_sampler_params_init(&p);
    p.top_k = -1;
    assert_int_equal(ember_sampler_create(&p, &s), EMBER_ERR_INVALID_ARGUMENT);
    ember_sampler_params_init(&p);
    p.temperature = 0;
    assert_int_equal(ember_sampler_create(&p, &s), EMBER_OK);
    float logits[5] = {0.1f, 2.0f, -1.0f, 2.0f, 1.5f};
    ember_token t = -1;
    assert_int_equal(ember_sampler_sample(s, logits, 5, &t), EMBER_OK);
    assert_int_equal(t, 1); /* greedy, lowest id on ties */
    assert_int_equal(ember_sampler_sample(s, logits, 0, &t), EMBER_ERR_INVALID_ARGUMENT);
    ember_sampler_free(s);
}

static void test_logging(void **state);
static void test_devices(void **state);

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_versions_and_statuses),
        cmocka_unit_test(test_nulls),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_progress_and_cancel),
        cmocka_unit_test(test_struct_size),
        cmocka_unit_test(test_struct_size_every_struct),
        cmocka_unit_test(test_model_queries),
        cmocka_unit_test(test_tokenizer_api),
        cmocka_unit_test(test_session_states),
        cmocka_unit_test(test_sampler_api),
        cmocka_unit_test(test_logging),
        cmocka_unit_test(test_struct_size_device_structs),
        cmocka_unit_test(test_devices),
        cmocka_unit_test(test_cpu_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

static int g_log_count;
static void log_sink(ember_log_level level, const char *msg, void *ud) {
    (void)level;
    if (strstr(msg, "loaded")) ++*(int *)ud;
}

/* Devices as objects (EMBER_1.4): the CPU listed first; a session or engine on a device handle runs
 * there (the same greedy tokens as backend CPU); a pointer that is not a device is refused. */
static void greedy(ember_model *m, const ember_session_params *sp, ember_token *out, int n) {
    ember_session *s = NULL;
    assert_int_equal(ember_session_create(m, sp, &s), EMBER_OK);
    ember_token prompt[16];
    size_t np = 0;
    assert_int_equal(ember_tokenize(m, "Once upon a time", 16, EMBER_TOKENIZE_ADD_SPECIAL, prompt, 16, &np), EMBER_OK);
    assert_int_equal(ember_session_feed(s, prompt, np), EMBER_OK);
    ember_sampler_params smp;
    ember_sampler_params_init(&smp);
    smp.temperature = 0;
    ember_sampler *smpl = NULL;
    assert_int_equal(ember_sampler_create(&smp, &smpl), EMBER_OK);
    for (int i = 0; i < n; ++i) {
        const char *text;
        size_t len;
        assert_int_equal(ember_generate_next(s, smpl, &out[i], &text, &len), EMBER_OK);
    }
    ember_sampler_free(smpl);
    ember_session_free(s);
}

static void test_devices(void **state) {
    (void)state;
    size_t n = 0;
    assert_int_equal(ember_devices(NULL, 0, &n), EMBER_OK);
    assert_true(n >= 1);
    const ember_device *devs[16];
    size_t n2 = 0;
    assert_int_equal(ember_devices(devs, 16, &n2), EMBER_OK);
    assert_int_equal(n2, n);
    const ember_device *again[1];
    assert_int_equal(ember_devices(again, 1, &n2), EMBER_OK);
    assert_ptr_equal(again[0], devs[0]); /* the same handles every time */
    ember_device_info info;
    ember_device_info_init(&info);
    ember_backend_kind kind = EMBER_BACKEND_AUTO;
    assert_int_equal(ember_device_get_info(devs[0], &info, &kind), EMBER_OK);
    assert_int_equal(kind, EMBER_BACKEND_CPU);
    assert_true(strlen(info.name) > 0);
    assert_true(info.score >= 1);
    for (size_t i = 0; i < n && i < 16; ++i) {
        assert_int_equal(ember_device_get_info(devs[i], NULL, &kind), EMBER_OK);
        printf("device %zu: backend %d\n", i, (int)kind);
    }
    assert_int_equal(ember_devices(NULL, 3, &n2), EMBER_ERR_INVALID_ARGUMENT);
    assert_int_equal(ember_device_get_info(NULL, &info, &kind), EMBER_ERR_INVALID_ARGUMENT);
    ember_device_info bogus_storage;
    assert_int_equal(ember_device_get_info((const ember_device *)&bogus_storage, &info, &kind), EMBER_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ember_last_error(), "not one of ember_devices"));

    ember_model *m = load(model_260k());
    ember_session_params sp;
    ember_session_params_init(&sp);
    assert_int_equal(sp.struct_size, sizeof sp);
    assert_null(sp.device);
    sp.n_threads = 1;
    sp.backend = EMBER_BACKEND_CPU;
    ember_token by_kind[12], by_device[12];
    greedy(m, &sp, by_kind, 12);
    sp.backend = EMBER_BACKEND_VULKAN; /* ignored: the device decides */
    sp.device = devs[0];
    greedy(m, &sp, by_device, 12);
    assert_memory_equal(by_kind, by_device, sizeof by_kind);
    sp.device = (const ember_device *)&bogus_storage;
    ember_session *s = NULL;
    assert_int_equal(ember_session_create(m, &sp, &s), EMBER_ERR_INVALID_ARGUMENT);
    assert_null(s);

    ember_engine_params ep;
    ember_engine_params_init(&ep);
    assert_null(ep.device);
    ep.device = devs[0];
    ep.n_threads = 1;
    ep.manual_step = true;
    ember_engine *e = NULL;
    assert_int_equal(ember_engine_create(m, &ep, &e), EMBER_OK);
    ember_engine_free(e);
    ember_model_free(m);
}

static void test_logging(void **state) {
    (void)state;
    /* Silent by default; a process-wide sink sees load messages; a per-model sink takes precedence. */
    ember_log_set(log_sink, &g_log_count, EMBER_LOG_DEBUG);
    ember_model *m = load(model_260k());
    ember_model_free(m);
    assert_int_equal(g_log_count, 1);
    int own = 0;
    ember_model_params mp;
    ember_model_params_init(&mp);
    mp.log = log_sink;
    mp.log_user_data = &own;
    assert_int_equal(ember_model_load(model_260k(), &mp, &m), EMBER_OK);
    ember_model_free(m);
    assert_int_equal(own, 1);
    assert_int_equal(g_log_count, 1);
    ember_log_set(NULL, NULL, EMBER_LOG_INFO);
    m = load(model_260k());
    ember_model_free(m);
    assert_int_equal(g_log_count, 1);
}
