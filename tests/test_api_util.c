/* test_api_util.c — see test_api_util.h. */
#include "test_api_util.h"

#include <string.h>

size_t test_tokenize(const ember_model *model, const char *text, ember_token *out, size_t cap) {
    size_t n = 0;
    assert_int_equal(ember_tokenize(model, text, strlen(text), EMBER_TOKENIZE_ADD_SPECIAL, out, cap, &n), EMBER_OK);
    return n;
}

ember_sampler *test_greedy_sampler(void) {
    ember_sampler_params p;
    ember_sampler_params_init(&p);
    p.temperature = 0;
    ember_sampler *s = NULL;
    assert_int_equal(ember_sampler_create(&p, &s), EMBER_OK);
    return s;
}
