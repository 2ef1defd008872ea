/* test_tokenize_limits.c — the tokenizer's limits: text over 16 MiB refused with a clear error, and time
 * growing linearly with the text, also for one giant "word" (4 MB of one letter took 21 times as long as
 * 1 MB with byte-level BPE: its merge queue outgrew the caches) and long runs of spaces. Uses
 * models/stories15M-q8_0.gguf (SentencePiece) and, when present, ../shared/models' Llama 3 vocabulary
 * (byte-level BPE). */
#include "test_api_util.h"

#include <ember/ember.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static ember_model *load_vocab(const char *path) {
    ember_model_params mp;
    ember_model_params_init(&mp);
    mp.vocab_only = true;
    ember_model *m = NULL;
    assert_int_equal(ember_model_load(path, &mp, &m), EMBER_OK);
    return m;
}

/* The fastest of two runs: the machine is shared, and a slow run says nothing about the algorithm. */
static double tokenize_time(const ember_model *m, const char *text, size_t n) {
    double best = 1e9;
    for (int i = 0; i < 2; ++i) {
        size_t count = 0;
        const double t0 = now_s();
        assert_int_equal(ember_tokenize(m, text, n, 0, NULL, 0, &count), EMBER_OK);
        const double t = now_s() - t0;
        if (t < best) best = t;
    }
    return best;
}

static void check_linear(const ember_model *m, const char *name) {
    const size_t small = 1u << 20, large = 4u << 20;
    char *text = malloc(large);
    static const char *const kinds[] = {"one letter", "spaces", "words"};
    for (int kind = 0; kind < 3; ++kind) {
        for (size_t i = 0; i < large; ++i)
            text[i] = kind == 0 ? 'a' : kind == 1 ? ' ' : "the dog ran, "[i % 13];
        const double t1 = tokenize_time(m, text, small), t4 = tokenize_time(m, text, large);
        printf("%s, %s: 1 MiB %.3f s, 4 MiB %.3f s (x%.1f)\n", name, kinds[kind], t1, t4, t4 / t1);
        /* Linear is x4; what this replaced was x16 to x21 (a loaded machine adds noise, not a factor 2.5). */
        assert_true(t4 < 10 * t1 + 0.05);
    }
    free(text);
}

static void test_limits(void **state) {
    (void)state;
    const char *p = test_repo_model("stories15M-q8_0.gguf");
    test_require(p, "models/stories15M-q8_0.gguf");
    ember_model *spm = load_vocab(p);
    /* Over the limit: refused before any work, with the figure. */
    const size_t over = (16u << 20) + 1;
    char *big = calloc(over, 1);
    memset(big, 'a', over);
    size_t count = 99;
    assert_int_equal(ember_tokenize(spm, big, over, 0, NULL, 0, &count), EMBER_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ember_last_error(), "limit"));
    free(big);
    check_linear(spm, "SentencePiece");
    ember_model_free(spm);

    const char *bpe_path = test_shared_model("ggml-vocab/ggml-vocab-llama-bpe.gguf");
    if (!bpe_path) {
        printf("SKIP part: ../shared/models/ggml-vocab/ggml-vocab-llama-bpe.gguf absent\n");
        return;
    }
    ember_model *bpe = load_vocab(bpe_path);
    check_linear(bpe, "byte-level BPE");
    ember_model_free(bpe);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_limits)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
