/* embed_speed.c — `ember-embed-speed`: texts per second of ember_embed on a file, for the comparison with
 * llama.cpp (bench/peer_embed.mjs; docs/embeddings.md). The texts are the words of the synthetic BERT
 * vocabulary (src/testing/synthetic_bert.cpp): each word one token there; with `letters`, runs of lowercase
 * letters instead, one token each in the synthetic SentencePiece vocabularies (src/testing/synthetic.cpp).
 *   ember-embed-speed MODEL THREADS N_TEXTS TOKENS_PER_TEXT ROUNDS [letters]
 * Prints one JSON line: the median of ROUNDS calls embedding all N_TEXTS texts (one call each round). */
#include <ember/ember.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const kWords[] = {"the", "of", "and", "to", "in", "is", "was", "it", "for", "on", "with",
                                     "hello", "world", "cat", "dog", "sat", "mat", "run", "walk", "tree", "river",
                                     "stone", "light", "dark", "city", "game", "player", "sword", "shield", "king"};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc != 6 && !(argc == 7 && strcmp(argv[6], "letters") == 0)) {
        fprintf(stderr, "usage: ember-embed-speed MODEL THREADS N_TEXTS TOKENS_PER_TEXT ROUNDS [letters]\n");
        return 2;
    }
    const int letters = argc == 7;
    const int threads = atoi(argv[2]), n = atoi(argv[3]), tokens = atoi(argv[4]), rounds = atoi(argv[5]);
    ember_model *m;
    if (ember_model_load(argv[1], NULL, &m) != EMBER_OK) {
        fprintf(stderr, "load: %s\n", ember_last_error());
        return 1;
    }
    ember_embed_params p;
    ember_embed_params_init(&p);
    p.n_threads = (uint32_t)threads;
    p.backend = EMBER_BACKEND_CPU;
    ember_embedder *e;
    if (ember_embedder_create(m, &p, &e) != EMBER_OK) {
        fprintf(stderr, "embedder: %s\n", ember_last_error());
        return 1;
    }
    /* Texts of tokens-2 words or letters (the special tokens and, for letters, the leading "▁" make up the
     * rest), each a different rotation. */
    char **texts = calloc((size_t)n, sizeof *texts);
    const size_t nw = sizeof kWords / sizeof kWords[0];
    for (int i = 0; i < n; ++i) {
        texts[i] = calloc((size_t)tokens * 8 + 1, 1);
        for (int w = 0; w < tokens - 2; ++w) {
            if (letters) {
                texts[i][w] = (char)('a' + (i * 7 + w) % 26);
                continue;
            }
            if (w) strcat(texts[i], " ");
            strcat(texts[i], kWords[((size_t)i * 7 + (size_t)w) % nw]);
        }
    }
    size_t count = 0;
    ember_tokenize(m, texts[0], strlen(texts[0]), EMBER_TOKENIZE_ADD_SPECIAL, NULL, 0, &count);
    const size_t dim = ember_embedder_dim(e);
    float *out = malloc((size_t)n * dim * sizeof *out);
    double *t = malloc((size_t)rounds * sizeof *t);
    for (int r = 0; r < rounds; ++r) {
        const double t0 = now();
        if (ember_embed(e, (const char *const *)texts, NULL, (size_t)n, out, (size_t)n * dim) != EMBER_OK) {
            fprintf(stderr, "embed: %s\n", ember_last_error());
            return 1;
        }
        t[r] = now() - t0;
    }
    qsort(t, (size_t)rounds, sizeof *t, cmp);
    printf("{\"runtime\": \"ember\", \"model\": \"%s\", \"threads\": %d, \"texts\": %d, \"tokens_per_text\": %zu, "
           "\"rounds\": %d, \"texts_s\": %.2f, \"seconds\": %.4f}\n",
           argv[1], threads, n, count, rounds, n / t[rounds / 2], t[rounds / 2]);
    ember_embedder_free(e);
    ember_model_free(m);
    return 0;
}
