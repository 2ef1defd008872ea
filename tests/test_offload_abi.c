/* test_offload_abi.c — placement across devices through the C ABI (EMBER_1.9): the params' older inits
 * write only their older structs, the new fields are checked, a session and an engine report where their
 * model runs, a split placement gives the CPU's greedy tokens (with a GPU module: Vulkan on lavapipe in
 * CI), `auto` with a small budget places what fits and says so, and a budget nothing fits is refused before
 * allocating, with the numbers. */
#define _GNU_SOURCE /* dlvsym */
#include "test_api_util.h"
#include "test_util.h"

#include <ember/ember.h>

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static ember_model *g_model;

static int setup(void **state) {
    (void)state;
    const char *p = test_find_model("stories15M-q8_0.gguf", "stories15M/stories15M-q8_0.gguf");
    if (!p) return 0;
    ember_model_params mp;
    ember_model_params_init(&mp);
    return ember_model_load(p, &mp, &g_model) == EMBER_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    ember_model_free(g_model);
    return 0;
}

/* A GPU backend to split with, or AUTO (none here). */
static ember_backend_kind gpu_backend(void) {
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.backend = EMBER_BACKEND_VULKAN;
    sp.n_ctx = 32;
    ember_session *s = NULL;
    if (g_model && ember_session_create(g_model, &sp, &s) == EMBER_OK) {
        ember_session_free(s);
        return EMBER_BACKEND_VULKAN;
    }
    return EMBER_BACKEND_AUTO;
}

static void test_old_inits(void **state) {
    (void)state;
    typedef void (*init_fn)(void *);
    const struct { const char *name, *node; uint32_t size; } grown_1_9[] = {
        {"ember_session_params_init", "EMBER_1.4", 48},
        {"ember_engine_params_init", "EMBER_1.4", 56},
    };
    for (size_t k = 0; k < 2; ++k) {
        init_fn old = (init_fn)dlvsym(RTLD_DEFAULT, grown_1_9[k].name, grown_1_9[k].node);
        if (!old) {
            printf("note: no %s@%s to check (static build?)\n", grown_1_9[k].name, grown_1_9[k].node);
            continue;
        }
        unsigned char buf[96];
        memset(buf, 0xCD, sizeof buf);
        old(buf);
        uint32_t size;
        memcpy(&size, buf, 4);
        assert_int_equal(size, grown_1_9[k].size);
        for (size_t i = grown_1_9[k].size; i < sizeof buf; ++i) assert_int_equal(buf[i], 0xCD);
    }
    ember_session_params sp;
    ember_session_params_init(&sp);
    assert_int_equal(sp.struct_size, sizeof sp);
    assert_int_equal(sp.gpu_layers, EMBER_GPU_LAYERS_ALL);
    assert_int_equal(sp.experts_on_cpu, 0);
    ember_engine_params ep;
    ember_engine_params_init(&ep);
    assert_int_equal(ep.gpu_layers, EMBER_GPU_LAYERS_ALL);
}

static void test_bad_fields_and_cpu(void **state) {
    (void)state;
    if (!g_model) skip();
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.n_ctx = 64;
    sp.gpu_layers = -3;
    ember_session *s = NULL;
    assert_int_equal(ember_session_create(g_model, &sp, &s), EMBER_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ember_last_error(), "gpu_layers"));
    sp.gpu_layers = 2;
    sp.experts_on_cpu = -2;
    assert_int_equal(ember_session_create(g_model, &sp, &s), EMBER_ERR_INVALID_ARGUMENT);
    /* On the CPU backend a layer count has nothing to split: every layer on the CPU. */
    sp.experts_on_cpu = 0;
    sp.backend = EMBER_BACKEND_CPU;
    assert_int_equal(ember_session_create(g_model, &sp, &s), EMBER_OK);
    ember_placement pl;
    ember_placement_init(&pl);
    assert_int_equal(ember_session_placement(s, &pl), EMBER_OK);
    assert_int_equal(pl.n_layer, 6);
    assert_int_equal(pl.gpu_layers, 0);
    assert_non_null(strstr(pl.description, "cpu"));
    pl.struct_size = 8;
    assert_int_equal(ember_session_placement(s, &pl), EMBER_ERR_INVALID_ARGUMENT);
    assert_int_equal(ember_session_placement(NULL, &pl), EMBER_ERR_INVALID_ARGUMENT);
    ember_session_free(s);
}

/* Greedy tokens of a session with these params. */
static void greedy(const ember_session_params *sp, ember_token *out, size_t n) {
    ember_session *s = NULL;
    assert_int_equal(ember_session_create(g_model, sp, &s), EMBER_OK);
    ember_token prompt[16];
    const size_t np = test_tokenize(g_model, "Once upon a time", prompt, 16);
    assert_int_equal(ember_session_feed(s, prompt, np), EMBER_OK);
    ember_sampler *smp = test_greedy_sampler();
    for (size_t i = 0; i < n; ++i) {
        const float *logits = NULL;
        size_t n_vocab = 0;
        assert_int_equal(ember_session_logits(s, &logits, &n_vocab), EMBER_OK);
        assert_int_equal(ember_sampler_sample(smp, logits, n_vocab, &out[i]), EMBER_OK);
        assert_int_equal(ember_session_feed(s, &out[i], 1), EMBER_OK);
    }
    ember_sampler_free(smp);
    ember_session_free(s);
}

static void test_split_session_and_engine(void **state) {
    (void)state;
    if (!g_model) skip();
    const ember_backend_kind gpu = gpu_backend();
    if (gpu == EMBER_BACKEND_AUTO) {
        printf("note: no GPU module here: the split cases ran in test_offload with the CPU standing in\n");
        skip();
    }
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.n_ctx = 128;
    sp.backend = EMBER_BACKEND_CPU;
    ember_token ref[12], got[12];
    greedy(&sp, ref, 12);
    sp.backend = gpu;
    for (int g = 1; g < 6; ++g) {
        sp.gpu_layers = g;
        greedy(&sp, got, 12);
        assert_memory_equal(ref, got, sizeof ref);
    }
    /* Where it went, through the ABI. */
    sp.gpu_layers = 3;
    ember_session *s = NULL;
    assert_int_equal(ember_session_create(g_model, &sp, &s), EMBER_OK);
    ember_placement pl;
    ember_placement_init(&pl);
    assert_int_equal(ember_session_placement(s, &pl), EMBER_OK);
    assert_int_equal(pl.gpu_layers, 3);
    assert_true(pl.gpu_bytes > 0 && pl.cpu_bytes > 0);
    assert_false(pl.automatic);
    printf("%s\n", pl.description);
    ember_session_free(s);

    /* An engine on the split model. */
    ember_engine_params ep;
    ember_engine_params_init(&ep);
    ep.n_ctx = 128, ep.n_seq_max = 2, ep.backend = gpu, ep.gpu_layers = 3;
    ember_engine *e = NULL;
    assert_int_equal(ember_engine_create(g_model, &ep, &e), EMBER_OK);
    ember_placement_init(&pl);
    assert_int_equal(ember_engine_placement(e, &pl), EMBER_OK);
    assert_int_equal(pl.gpu_layers, 3);
    ember_engine_free(e);
}

struct collected {
    ember_token t[32];
    size_t n;
};

static bool collect(ember_token token, const char *text, size_t len, void *ud) {
    (void)text, (void)len;
    struct collected *c = ud;
    if (c->n < 32) c->t[c->n++] = token;
    return true;
}

static void test_split_speculation(void **state) {
    /* A split target with a draft (the same file: every proposal is accepted), the draft placed by the
     * target's rule: the greedy tokens are the CPU's. */
    (void)state;
    if (!g_model) skip();
    const ember_backend_kind gpu = gpu_backend();
    if (gpu == EMBER_BACKEND_AUTO) skip();
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.n_ctx = 128;
    sp.backend = EMBER_BACKEND_CPU;
    ember_token ref[12];
    greedy(&sp, ref, 12);
    sp.backend = gpu, sp.gpu_layers = 4;
    ember_session *s = NULL;
    assert_int_equal(ember_session_create(g_model, &sp, &s), EMBER_OK);
    ember_token prompt[16];
    const size_t np = test_tokenize(g_model, "Once upon a time", prompt, 16);
    assert_int_equal(ember_session_feed(s, prompt, np), EMBER_OK);
    ember_spec_params spec;
    ember_spec_params_init(&spec);
    spec.mode = EMBER_SPEC_DRAFT, spec.draft_model = g_model, spec.k = 3;
    assert_int_equal(ember_session_set_speculation(s, &spec), EMBER_OK);
    ember_sampler *smp = test_greedy_sampler();
    ember_generate_params gp;
    ember_generate_params_init(&gp);
    struct collected c = {{0}, 0};
    gp.max_tokens = 12, gp.on_token = collect, gp.user_data = &c;
    assert_int_equal(ember_generate(s, smp, &gp, NULL), EMBER_OK);
    assert_int_equal(c.n, 12);
    assert_memory_equal(ref, c.t, sizeof ref);
    ember_sampler_free(smp);
    ember_session_free(s);
}

static void test_fit_and_refusal(void **state) {
    (void)state;
    if (!g_model) skip();
    const ember_backend_kind gpu = gpu_backend();
    if (gpu == EMBER_BACKEND_AUTO) skip();
    ember_engine_params ep;
    ember_engine_params_init(&ep);
    ep.n_ctx = 128, ep.n_seq_max = 1, ep.backend = gpu;
    ember_placement whole, pl;
    ember_placement_init(&whole);
    assert_int_equal(ember_estimate_placement(g_model, &ep, &whole), EMBER_OK);
    assert_int_equal(whole.gpu_layers, 6);
    /* auto with a budget of 60% of the whole: some layers, and it says so. */
    ep.gpu_layers = EMBER_GPU_LAYERS_AUTO;
    ep.gpu_budget_bytes = 1 << 30;
    ember_placement_init(&whole);
    assert_int_equal(ember_estimate_placement(g_model, &ep, &whole), EMBER_OK);
    assert_int_equal(whole.gpu_layers, 6);
    ep.gpu_budget_bytes = whole.gpu_bytes * 6 / 10;
    ember_placement_init(&pl);
    assert_int_equal(ember_estimate_placement(g_model, &ep, &pl), EMBER_OK);
    assert_true(pl.gpu_layers > 0 && pl.gpu_layers < 6);
    assert_true(pl.gpu_bytes <= ep.gpu_budget_bytes);
    assert_true(pl.automatic);
    assert_non_null(strstr(pl.description, "chosen to fit"));
    /* A session: its whole placement measured (within a large budget), then auto within 90% of it. (A
     * session's output takes n_batch logits rows, on the GPU with its last layers: most of a small model's
     * GPU part, so less than the whole fits only a little less.) */
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.n_ctx = 128, sp.backend = gpu, sp.gpu_budget_bytes = 1 << 30;
    ember_session *s = NULL;
    assert_int_equal(ember_session_create(g_model, &sp, &s), EMBER_OK);
    ember_placement spl;
    ember_placement_init(&spl);
    assert_int_equal(ember_session_placement(s, &spl), EMBER_OK);
    assert_int_equal(spl.gpu_layers, 6);
    ember_session_free(s);
    sp.gpu_layers = EMBER_GPU_LAYERS_AUTO, sp.gpu_budget_bytes = spl.gpu_bytes * 9 / 10;
    assert_int_equal(ember_session_create(g_model, &sp, &s), EMBER_OK);
    ember_placement_init(&spl);
    assert_int_equal(ember_session_placement(s, &spl), EMBER_OK);
    assert_true(spl.gpu_layers > 0 && spl.gpu_layers < 6);
    assert_true(spl.gpu_bytes <= sp.gpu_budget_bytes);
    ember_session_free(s);
    /* Every layer within a budget of 1 MiB: refused before allocating, with the numbers. */
    sp.gpu_layers = EMBER_GPU_LAYERS_ALL, sp.gpu_budget_bytes = 1 << 20;
    assert_int_equal(ember_session_create(g_model, &sp, &s), EMBER_ERR_OUT_OF_MEMORY);
    assert_null(s);
    assert_non_null(strstr(ember_last_error(), "budget of 1.0 MiB"));
    ep.gpu_layers = EMBER_GPU_LAYERS_ALL, ep.gpu_budget_bytes = 1 << 20;
    ember_engine *e = NULL;
    assert_int_equal(ember_engine_create(g_model, &ep, &e), EMBER_ERR_OUT_OF_MEMORY);
    assert_null(e);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_old_inits),
        cmocka_unit_test(test_bad_fields_and_cpu),
        cmocka_unit_test(test_split_session_and_engine),
        cmocka_unit_test(test_split_speculation),
        cmocka_unit_test(test_fit_and_refusal),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
