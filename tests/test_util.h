/* test_util.h — helpers shared by the tests (C and C++). */
#ifndef EMBER_TEST_UTIL_H
#define EMBER_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include <cmocka.h> /* cmocka 1.1's header has no extern "C" of its own */

#ifdef __cplusplus
/* cmocka's fail() macro would shadow ember::fail (and std::ios::fail) in C++ tests: use fail_msg(). */
#undef fail
#undef fail_msg
#define fail_msg(msg, ...)                                  \
    do {                                                    \
        print_error("ERROR: " msg "\n", ##__VA_ARGS__);     \
        _fail(__FILE__, __LINE__);                          \
    } while (0)
#endif

/* The test's exit code for "skipped" under ctest (SKIP_RETURN_CODE). */
#define EMBER_TEST_SKIP 77

/* Path of a file under ../shared/models (env EMBER_SHARED_MODELS), or NULL if that file does not exist.
 * Returns a static buffer (valid until the next call). */
const char *test_shared_model(const char *relative);
/* Same for the repo's own models/ folder (env EMBER_REPO_MODELS). */
const char *test_repo_model(const char *relative);
/* The repo's model `repo_name` (NULL: none) if it is there, else ../shared/models/`shared_relative`, else
 * NULL: the small models the repo ships are also in the shared folder, so a test runs from either. */
const char *test_find_model(const char *repo_name, const char *shared_relative);
/* In a cmocka test: `const char *var` = test_find_model(repo_name, shared_relative), or the test is
 * skipped (the reason printed) when neither is there, while the program's other tests still run. */
#define TEST_REQUIRE_MODEL(var, repo_name, shared_relative)        \
    const char *var = test_find_model(repo_name, shared_relative); \
    if (!var) {                                                    \
        printf("SKIP: %s not found\n", shared_relative);           \
        skip();                                                    \
    }
/* Prints "SKIP: <reason>" and exits with EMBER_TEST_SKIP if path is NULL. */
void test_require(const char *path, const char *what);

/* Deterministic uniform floats in [lo, hi) (xorshift64*). */
float test_randf(uint64_t *state, float lo, float hi);

#ifdef __cplusplus
}
#endif

#endif
