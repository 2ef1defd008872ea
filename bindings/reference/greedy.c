/*
 * ember-greedy-ref: the C API's own greedy continuation of a prompt, as token ids, one per line.
 *
 * Each binding's chat sample is run in CI on the same model and prompt with greedy sampling and must
 * print exactly these ids: the check that a binding passes prompts, sessions and sampling through
 * without changing them. Usage: ember-greedy-ref MODEL PROMPT N_TOKENS
 * The prompt is tokenized with EMBER_TOKENIZE_ADD_SPECIAL (BOS where the model wants one), as the
 * samples do; generation stops after N_TOKENS or at an end-of-generation token.
 */
#include <ember/ember.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, ember_status st) {
    fprintf(stderr, "ember-greedy-ref: %s: %s: %s\n", what, ember_status_string(st), ember_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: ember-greedy-ref MODEL PROMPT N_TOKENS\n");
        return 2;
    }
    const char *prompt = argv[2];
    long n_tokens = strtol(argv[3], NULL, 10);
    ember_model *model = NULL;
    ember_status st = ember_model_load(argv[1], NULL, &model);
    if (st != EMBER_OK) return fail("load", st);

    size_t n_prompt = 0;
    st = ember_tokenize(model, prompt, strlen(prompt), EMBER_TOKENIZE_ADD_SPECIAL, NULL, 0, &n_prompt);
    if (st != EMBER_OK && st != EMBER_ERR_BUFFER_TOO_SMALL) return fail("tokenize", st);
    ember_token *tokens = malloc((n_prompt ? n_prompt : 1) * sizeof *tokens);
    if (!tokens) return 1;
    st = ember_tokenize(model, prompt, strlen(prompt), EMBER_TOKENIZE_ADD_SPECIAL, tokens, n_prompt, &n_prompt);
    if (st != EMBER_OK) return fail("tokenize", st);

    ember_session *session = NULL;
    st = ember_session_create(model, NULL, &session);
    if (st != EMBER_OK) return fail("session", st);
    st = ember_session_feed(session, tokens, n_prompt);
    if (st != EMBER_OK) return fail("feed", st);

    ember_sampler_params sp;
    ember_sampler_params_init(&sp);
    sp.temperature = 0.0f;  /* greedy */
    ember_sampler *sampler = NULL;
    st = ember_sampler_create(&sp, &sampler);
    if (st != EMBER_OK) return fail("sampler", st);

    for (long i = 0; i < n_tokens; i++) {
        ember_token token;
        st = ember_generate_next(session, sampler, &token, NULL, NULL);
        if (st == EMBER_END_OF_GENERATION) break;
        if (st != EMBER_OK) return fail("generate", st);
        printf("%d\n", (int)token);
    }
    ember_sampler_free(sampler);
    ember_session_free(session);
    ember_model_free(model);
    free(tokens);
    return 0;
}
