#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const char *find_in(const char *env, const char *fallback, const char *relative) {
    static char buf[4096];
    const char *dir = getenv(env);
    if (!dir || !*dir) dir = fallback;
    snprintf(buf, sizeof buf, "%s/%s", dir, relative);
    return access(buf, R_OK) == 0 ? buf : NULL;
}

const char *test_shared_model(const char *relative) {
    return find_in("EMBER_SHARED_MODELS", "../shared/models", relative);
}

const char *test_repo_model(const char *relative) {
    return find_in("EMBER_REPO_MODELS", "models", relative);
}

const char *test_find_model(const char *repo_name, const char *shared_relative) {
    const char *p = repo_name ? test_repo_model(repo_name) : NULL;
    return p ? p : test_shared_model(shared_relative);
}

void test_require(const char *path, const char *what) {
    if (!path) {
        printf("SKIP: %s not found (looked in $EMBER_SHARED_MODELS / $EMBER_REPO_MODELS)\n", what);
        fflush(stdout);
        exit(EMBER_TEST_SKIP);
    }
}

float test_randf(uint64_t *state, float lo, float hi) {
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    uint64_t r = x * 0x2545F4914F6CDD1DULL;
    return lo + (hi - lo) * (float)((r >> 40) * (1.0 / 16777216.0));
}
