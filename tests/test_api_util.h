/* test_api_util.h — helpers for the tests of the public API (C tests and the ABI C++ tests; they link
 * libember, which the helpers in test_util.h do not need). */
#ifndef EMBER_TEST_API_UTIL_H
#define EMBER_TEST_API_UTIL_H

#include "test_util.h"

#include <ember/ember.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Tokenizes text with the model's special tokens (BOS); asserts success; returns the count. */
size_t test_tokenize(const ember_model *model, const char *text, ember_token *out, size_t cap);
/* A greedy sampler (temperature 0); asserts success. */
ember_sampler *test_greedy_sampler(void);

#ifdef __cplusplus
}
#endif

#endif
