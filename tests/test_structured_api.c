/* test_structured_api.c — grammars, stop strings and logprobs through the public API on stories15M:
 * malformed grammars and schemas are errors with line/column or a JSON pointer; greedy output under a
 * grammar is in its language and ends with end-of-generation only where complete; a grammar for one
 * generate call leaves the sampler's own; stop strings end generation across token boundaries without
 * emitting the stop text, with ember_generate and step by step with ember_generate_next; logprobs are the log-softmax of the logits; engine requests take all three. */
#include "test_api_util.h"

#include <ember/ember.h>

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ember_model *g_model;

static int setup(void **state) {
    (void)state;
    const char *p = test_find_model("stories15M-q8_0.gguf", "stories15M/stories15M-q8_0.gguf");
    test_require(p, "stories15M-q8_0.gguf");
    return ember_model_load(p, NULL, &g_model) == EMBER_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    ember_model_free(g_model);
    return 0;
}

struct text {
    char s[4096];
    size_t n;
    int calls;
};

static bool append(ember_token token, const char *t, size_t len, void *ud) {
    (void)token;
    struct text *x = ud;
    assert_true(x->n + len < sizeof x->s);
    memcpy(x->s + x->n, t, len);
    x->n += len;
    x->s[x->n] = 0;
    x->calls++;
    return true;
}

static ember_session *fed(const char *prompt) {
    ember_session *s;
    assert_int_equal(ember_session_create(g_model, NULL, &s), EMBER_OK);
    ember_token toks[256];
    const size_t n = test_tokenize(g_model, prompt, toks, 256);
    assert_int_equal(ember_session_feed(s, toks, n), EMBER_OK);
    return s;
}

/* Generates with `grammar` for the call (greedy unless sampler given), returning the status. */
static ember_status generate(const char *prompt, ember_sampler *sampler, const ember_grammar *grammar, const char *const *stop,
                             size_t n_stop, uint32_t max_tokens, struct text *out) {
    ember_session *s = fed(prompt);
    ember_sampler *own = sampler ? NULL : test_greedy_sampler();
    ember_generate_params gp;
    ember_generate_params_init(&gp);
    gp.max_tokens = max_tokens;
    gp.on_token = append;
    gp.user_data = out;
    gp.grammar = grammar;
    gp.stop = stop;
    gp.n_stop = n_stop;
    memset(out, 0, sizeof *out);
    const ember_status st = ember_generate(s, sampler ? sampler : own, &gp, NULL);
    ember_sampler_free(own);
    ember_session_free(s);
    return st;
}

static ember_grammar *gbnf(const char *text) {
    ember_grammar *g = NULL;
    const ember_status st = ember_grammar_create_gbnf(g_model, text, strlen(text), &g);
    if (st != EMBER_OK) fail_msg("%s: %s", ember_status_string(st), ember_last_error());
    return g;
}

static void test_errors(void **state) {
    (void)state;
    ember_grammar *g = (ember_grammar *)1;
    const char *bad = "root ::= \"a\" |\n  [b-";
    assert_int_equal(ember_grammar_create_gbnf(g_model, bad, strlen(bad), &g), EMBER_ERR_INVALID_ARGUMENT);
    assert_null(g);
    assert_non_null(strstr(ember_last_error(), "line 2, column 3"));
    const char *schema = "{\"type\":\"object\",\"properties\":{\"when\":{\"type\":\"string\",\"format\":\"date\"}}}";
    assert_int_equal(ember_grammar_create_json_schema(g_model, schema, strlen(schema), &g), EMBER_ERR_UNSUPPORTED);
    assert_non_null(strstr(ember_last_error(), "/properties/when/format"));
    assert_int_equal(ember_grammar_create_json_schema(g_model, "{\"type\":", 8, &g), EMBER_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ember_last_error(), "line 1, column 9"));
    assert_int_equal(ember_grammar_create_gbnf(NULL, "root ::= \"a\"", 12, &g), EMBER_ERR_INVALID_ARGUMENT);
    assert_string_equal(ember_status_string(EMBER_ERR_GRAMMAR_DEAD_END), "EMBER_ERR_GRAMMAR_DEAD_END");
    ember_grammar_free(NULL);

    /* A grammar does not refer to its model once made: it may outlive it (ASan checks the use below). */
    ember_model *vocab;
    ember_model_params mp;
    ember_model_params_init(&mp);
    mp.vocab_only = true;
    assert_int_equal(ember_model_load(test_find_model("stories15M-q8_0.gguf", "stories15M/stories15M-q8_0.gguf"), &mp, &vocab),
                     EMBER_OK);
    ember_grammar *yes = NULL;
    assert_int_equal(ember_grammar_create_gbnf(vocab, "root ::= \"yes\"", 14, &yes), EMBER_OK);
    ember_model_free(vocab);
    ember_sampler *sampler = test_greedy_sampler();
    assert_int_equal(ember_sampler_set_grammar(sampler, yes), EMBER_OK);
    ember_grammar_free(yes);
    static float logits[32000];
    ember_token tok;
    assert_int_equal(ember_sampler_sample(sampler, logits, 32000, &tok), EMBER_OK);
    assert_int_equal(ember_sampler_accept(sampler, tok), EMBER_OK);
    assert_int_equal(ember_sampler_sample(sampler, logits, 31999, &tok), EMBER_ERR_INVALID_ARGUMENT); /* another vocabulary */
    ember_sampler_free(sampler);
}

static void test_greedy_in_language(void **state) {
    (void)state;
    struct text t;
    ember_grammar *yes_no = gbnf("root ::= \"yes\" | \"no\"");
    assert_int_equal(generate("Once upon a time", NULL, yes_no, NULL, 0, 20, &t), EMBER_END_OF_GENERATION);
    assert_true(strcmp(t.s, "yes") == 0 || strcmp(t.s, "no") == 0);
    ember_grammar *digits = gbnf("root ::= [0-9]{3} \"!\"   # exactly three digits, then !");
    assert_int_equal(generate("Once upon a time", NULL, digits, NULL, 0, 20, &t), EMBER_END_OF_GENERATION);
    assert_int_equal(t.n, 4);
    for (int i = 0; i < 3; ++i) assert_true(t.s[i] >= '0' && t.s[i] <= '9');
    assert_int_equal(t.s[3], '!');
    /* The model would rather go on than stop after two words: EOS is allowed only where complete. */
    ember_grammar *words = gbnf("root ::= \" Lily\" \" was\" [ a-z]{1,30} \".\"");
    assert_int_equal(generate("Once upon a time", NULL, words, NULL, 0, 60, &t), EMBER_END_OF_GENERATION);
    assert_memory_equal(t.s, " Lily was", 9);
    assert_int_equal(t.s[t.n - 1], '.');

    /* A grammar attached to the sampler persists across calls; a call's grammar replaces it only then. */
    ember_sampler *sampler = test_greedy_sampler();
    assert_int_equal(ember_sampler_set_grammar(sampler, yes_no), EMBER_OK);
    ember_grammar_free(yes_no); /* the sampler keeps its reference */
    assert_int_equal(generate("Once upon a time", sampler, digits, NULL, 0, 20, &t), EMBER_END_OF_GENERATION);
    assert_int_equal(t.n, 4);
    assert_int_equal(ember_sampler_reset(sampler), EMBER_OK);
    assert_int_equal(generate("Once upon a time", sampler, NULL, NULL, 0, 20, &t), EMBER_END_OF_GENERATION);
    assert_true(strcmp(t.s, "yes") == 0 || strcmp(t.s, "no") == 0);
    /* ember_sampler_accept refuses a token the grammar does not allow, changing nothing. */
    ember_token toks[8];
    test_tokenize(g_model, "zebra", toks, 8);
    assert_int_equal(ember_sampler_reset(sampler), EMBER_OK);
    assert_int_equal(ember_sampler_accept(sampler, toks[1]), EMBER_ERR_INVALID_ARGUMENT);
    assert_int_equal(ember_sampler_set_grammar(sampler, NULL), EMBER_OK);
    assert_int_equal(ember_sampler_accept(sampler, toks[1]), EMBER_OK);
    ember_sampler_free(sampler);
    ember_grammar_free(digits);
    ember_grammar_free(words);
}

static void test_stop_strings(void **state) {
    (void)state;
    struct text full, cut;
    assert_int_equal(generate("Once upon a time", NULL, NULL, NULL, 0, 40, &full), EMBER_OK);
    /* A stop string that starts inside one token and ends in a later one. */
    const char *word = strstr(full.s, "Lily");
    assert_non_null(word);
    char stop[16];
    memcpy(stop, word + 2, 4); /* "ly" + two characters after it */
    stop[4] = 0;
    const char *stops[] = {"never-appears", stop};
    assert_int_equal(generate("Once upon a time", NULL, NULL, stops, 2, 40, &cut), EMBER_END_OF_GENERATION);
    const size_t before = (size_t)(strstr(full.s, stop) - full.s);
    assert_int_equal(cut.n, before);
    assert_memory_equal(cut.s, full.s, before);
    /* Without a match the held-back text comes out at the end: the whole text, unchanged. */
    const char *nomatch[] = {"Lily zzz"};
    assert_int_equal(generate("Once upon a time", NULL, NULL, nomatch, 1, 40, &cut), EMBER_OK);
    assert_string_equal(cut.s, full.s);
    const char *null_stop[] = {NULL};
    assert_int_equal(generate("Once upon a time", NULL, NULL, null_stop, 1, 40, &cut), EMBER_ERR_INVALID_ARGUMENT);
}

/* ember_generate_next with ember_session_set_stop: greedy steps from the prompt, each step's text kept. */
#define NEXT_STEPS 40
struct steps {
    char piece[NEXT_STEPS][64];
    ember_status status[NEXT_STEPS];
    ember_token token[NEXT_STEPS];
    char all[4096];
    int n;   /* steps taken */
};

/* Runs up to `max` steps (stopping at EMBER_END_OF_GENERATION) on `s`, appending each step's text. */
static void next_steps(ember_session *s, ember_sampler *sampler, int max, struct steps *out) {
    memset(out, 0, sizeof *out);
    size_t n = 0;
    for (int i = 0; i < max; ++i) {
        const char *text;
        size_t len;
        const ember_status st = ember_generate_next(s, sampler, &out->token[i], &text, &len);
        assert_true(st == EMBER_OK || st == EMBER_END_OF_GENERATION);
        assert_true(len < sizeof out->piece[i] && n + len < sizeof out->all);
        memcpy(out->piece[i], text, len);
        memcpy(out->all + n, text, len);
        n += len;
        out->status[i] = st;
        out->n = i + 1;
        if (st == EMBER_END_OF_GENERATION) break;
    }
}

static void test_next_stop_strings(void **state) {
    (void)state;
    ember_sampler *greedy = test_greedy_sampler();
    ember_session *s = fed("Once upon a time");
    struct steps ref, got;
    next_steps(s, greedy, NEXT_STEPS, &ref);
    ember_session_free(s);
    assert_int_equal(ref.n, NEXT_STEPS);

    /* A boundary between steps i and i+1 whose four bytes around it occur nowhere earlier: the stop
     * string is the last two bytes of step i's text and the first two of step i+1's. */
    int at = -1;
    char stop[8] = {0};
    size_t before = 0; /* bytes of text before the stop string */
    for (int i = 0, end = 0; i + 1 < NEXT_STEPS && at < 0; ++i) {
        const size_t a = strlen(ref.piece[i]), b = strlen(ref.piece[i + 1]);
        end += (int)a;
        if (a < 2 || b < 2) continue;
        memcpy(stop, ref.piece[i] + a - 2, 2);
        memcpy(stop + 2, ref.piece[i + 1], 2);
        stop[4] = 0;
        if ((size_t)(strstr(ref.all, stop) - ref.all) == (size_t)end - 2) {
            at = i;
            before = (size_t)end - 2;
        }
    }
    assert_true(at >= 0);

    /* The stop string ends generation at step at+1; its text is not emitted, and step `at` held back
     * its last two bytes (they may begin the stop string). */
    s = fed("Once upon a time");
    const char *stops[] = {"never-appears", stop};
    assert_int_equal(ember_session_set_stop(s, stops, 2), EMBER_OK);
    next_steps(s, greedy, NEXT_STEPS, &got);
    assert_int_equal(got.n, at + 2);
    assert_int_equal(got.status[at + 1], EMBER_END_OF_GENERATION);
    assert_int_equal(strlen(got.all), before);
    assert_memory_equal(got.all, ref.all, before);
    assert_int_equal(strlen(got.piece[at]), strlen(ref.piece[at]) - 2);
    /* The token that completed the stop string was fed: the next step goes on from it, matching anew. */
    const char *text;
    size_t len;
    ember_token tok;
    assert_int_equal(ember_generate_next(s, greedy, &tok, &text, &len), EMBER_OK);
    assert_int_equal(tok, ref.token[at + 2]);
    ember_session_free(s);

    /* A stop string that begins like the end of step `at` but never completes: the held bytes come out
     * with step at+1, and the whole text is as without stop strings. */
    char nomatch[8];
    memcpy(nomatch, stop, 2);
    memcpy(nomatch + 2, "\x01z", 3);
    const char *nomatches[] = {nomatch};
    s = fed("Once upon a time");
    assert_int_equal(ember_session_set_stop(s, nomatches, 1), EMBER_OK);
    next_steps(s, greedy, NEXT_STEPS, &got);
    assert_int_equal(got.n, NEXT_STEPS);
    assert_string_equal(got.all, ref.all);
    assert_int_equal(strlen(got.piece[at]), strlen(ref.piece[at]) - 2);
    assert_int_equal(strlen(got.piece[at + 1]), strlen(ref.piece[at + 1]) + 2);
    ember_session_free(s);

    /* Ending before the match is decided: ember_session_flush_stop gives the held bytes. */
    s = fed("Once upon a time");
    assert_int_equal(ember_session_set_stop(s, nomatches, 1), EMBER_OK);
    next_steps(s, greedy, at + 1, &got);
    assert_int_equal(ember_session_flush_stop(s, &text, &len), EMBER_OK);
    assert_int_equal(len, 2);
    assert_memory_equal(text, stop, 2);
    /* Flushed: the next step's text is its own only. */
    assert_int_equal(ember_generate_next(s, greedy, &tok, &text, &len), EMBER_OK);
    assert_int_equal(len, strlen(ref.piece[at + 1]));
    ember_session_free(s);

    /* A feed between two steps starts the match anew: the held bytes are dropped, not put before the
     * text of a step that does not follow them. */
    s = fed("Once upon a time");
    assert_int_equal(ember_session_set_stop(s, nomatches, 1), EMBER_OK);
    next_steps(s, greedy, at + 1, &got);
    assert_int_equal(ember_session_feed(s, &ref.token[at + 1], 1), EMBER_OK);
    assert_int_equal(ember_generate_next(s, greedy, &tok, &text, &len), EMBER_OK);
    assert_int_equal(tok, ref.token[at + 2]);
    assert_true(len <= strlen(ref.piece[at + 2]));   /* its own text at most (its end may be held) */
    assert_memory_equal(text, ref.piece[at + 2], len);

    /* Bad arguments change nothing; NULL/0 removes the strings. */
    assert_int_equal(ember_session_set_stop(s, NULL, 1), EMBER_ERR_INVALID_ARGUMENT);
    const char *null_stop[] = {NULL};
    assert_int_equal(ember_session_set_stop(s, null_stop, 1), EMBER_ERR_INVALID_ARGUMENT);
    const char *many[17];
    for (int i = 0; i < 17; ++i) many[i] = "x";
    assert_int_equal(ember_session_set_stop(s, many, 17), EMBER_ERR_INVALID_ARGUMENT);
    assert_int_equal(ember_session_set_stop(s, NULL, 0), EMBER_OK);
    assert_int_equal(ember_session_set_stop(NULL, NULL, 0), EMBER_ERR_INVALID_ARGUMENT);
    assert_int_equal(ember_session_flush_stop(NULL, NULL, NULL), EMBER_ERR_INVALID_ARGUMENT);
    ember_session_free(s);
    ember_sampler_free(greedy);
}

static void test_logprobs(void **state) {
    (void)state;
    ember_sampler_params sp;
    ember_sampler_params_init(&sp);
    assert_int_equal(sp.n_logprobs, 0);
    sp.temperature = 0;
    sp.n_logprobs = 5;
    ember_sampler *sampler;
    assert_int_equal(ember_sampler_create(&sp, &sampler), EMBER_OK);
    ember_token_logprob top[8], sampled;
    size_t n;
    assert_int_equal(ember_sampler_logprobs(sampler, &sampled, top, 8, &n), EMBER_ERR_INVALID_STATE);
    ember_session *s = fed("Once upon a time");
    const float *logits;
    size_t n_vocab;
    assert_int_equal(ember_session_logits(s, &logits, &n_vocab), EMBER_OK);
    ember_token tok;
    assert_int_equal(ember_sampler_sample(sampler, logits, n_vocab, &tok), EMBER_OK);
    assert_int_equal(ember_sampler_logprobs(sampler, &sampled, top, 8, &n), EMBER_OK);
    assert_int_equal(n, 5);
    assert_int_equal(sampled.token, tok);
    assert_int_equal(top[0].token, tok); /* greedy: the most probable */
    double max = logits[0], z = 0;
    for (size_t i = 0; i < n_vocab; ++i) max = logits[i] > max ? logits[i] : max;
    for (size_t i = 0; i < n_vocab; ++i) z += exp(logits[i] - max);
    for (size_t i = 0; i < n; ++i) {
        assert_true(top[i].logprob <= 0.0f);
        if (i) assert_true(top[i].logprob <= top[i - 1].logprob);
        const double want = logits[top[i].token] - max - log(z);
        assert_true(fabs(top[i].logprob - want) < 1e-4);
    }
    sp.n_logprobs = 21;
    ember_sampler *too_many = NULL;
    assert_int_equal(ember_sampler_create(&sp, &too_many), EMBER_ERR_INVALID_ARGUMENT);
    ember_session_free(s);
    ember_sampler_free(sampler);
}

static void test_engine_request(void **state) {
    (void)state;
    ember_engine *engine;
    assert_int_equal(ember_engine_create(g_model, NULL, &engine), EMBER_OK);
    const char *schema = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},"
                         "\"age\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":99}},\"required\":[\"name\",\"age\"]}";
    ember_grammar *g;
    assert_int_equal(ember_grammar_create_json_schema(g_model, schema, strlen(schema), &g), EMBER_OK);
    ember_token prompt[64];
    ember_sampler_params sp;
    ember_sampler_params_init(&sp);
    sp.temperature = 0;
    sp.n_logprobs = 3;
    ember_request_params rp;
    ember_request_params_init(&rp);
    rp.prompt = prompt;
    rp.n_prompt = test_tokenize(g_model, "Once upon a time", prompt, 64);
    rp.max_tokens = 64;
    rp.sampling = &sp;
    rp.grammar = g;
    ember_request *r;
    assert_int_equal(ember_request_submit(engine, &rp, &r), EMBER_OK);
    ember_grammar_free(g); /* the request keeps its reference */
    assert_int_equal(ember_request_wait(r, UINT32_MAX), EMBER_OK);
    char text[512];
    size_t len;
    assert_int_equal(ember_request_text(r, text, sizeof text, &len), EMBER_OK);
    text[len] = 0;
    assert_int_equal(text[0], '{');
    assert_non_null(strstr(text, "\"name\""));
    assert_non_null(strstr(text, "\"age\""));
    assert_int_equal(text[len - 1], '}');
    ember_token_logprob top[3], sampled;
    size_t n;
    assert_int_equal(ember_request_logprobs(r, 0, &sampled, top, 3, &n), EMBER_OK);
    assert_int_equal(n, 3);
    assert_true(sampled.logprob <= top[0].logprob);
    assert_int_equal(ember_request_logprobs(r, 1000, &sampled, top, 3, &n), EMBER_ERR_NOT_FOUND);
    ember_request_free(r);

    /* Stop strings on a request: the text ends before the stop, which never appears in it. */
    const char *stops[] = {"\"age"};
    rp.grammar = NULL;
    rp.stop = stops;
    rp.n_stop = 1;
    ember_grammar *g2;
    assert_int_equal(ember_grammar_create_json_schema(g_model, schema, strlen(schema), &g2), EMBER_OK);
    rp.grammar = g2;
    assert_int_equal(ember_request_submit(engine, &rp, &r), EMBER_OK);
    assert_int_equal(ember_request_wait(r, UINT32_MAX), EMBER_OK);
    assert_int_equal(ember_request_text(r, text, sizeof text, &len), EMBER_OK);
    text[len] = 0;
    assert_non_null(strstr(text, "\"name\""));
    assert_null(strstr(text, "\"age"));
    while (len > 0 && text[len - 1] == ' ') --len;
    assert_int_equal(text[len - 1], ','); /* what came just before the stop string */
    ember_request_free(r);
    ember_grammar_free(g2);
    ember_engine_free(engine);
}

/* A request whose grammar fails (here: more parse stacks than the limit, after a few "(") fails alone;
 * the plain requests of the same steps run to their end (before, every request of the step failed). */
static void test_request_failure_isolated(void **state) {
    (void)state;
    ember_engine *engine;
    ember_engine_params ep;
    ember_engine_params_init(&ep);
    ep.n_seq_max = 4;
    assert_int_equal(ember_engine_create(g_model, &ep, &engine), EMBER_OK);
    ember_grammar *amb = gbnf("root ::= \"(\" ( root \")\" | root \"]\" )\n"); /* stacks double with each "(" */
    ember_token prompt[64];
    ember_request_params rp;
    ember_request_params_init(&rp);
    rp.prompt = prompt;
    rp.n_prompt = test_tokenize(g_model, "Once upon a time", prompt, 64);
    rp.max_tokens = 24;
    ember_request *r[4];
    for (int i = 0; i < 4; ++i) {
        rp.grammar = i == 2 ? amb : NULL;
        assert_int_equal(ember_request_submit(engine, &rp, &r[i]), EMBER_OK);
    }
    for (int i = 0; i < 4; ++i) {
        assert_int_equal(ember_request_wait(r[i], UINT32_MAX), EMBER_OK);
        ember_request_state st;
        size_t n;
        assert_int_equal(ember_request_poll(r[i], NULL, 0, &n, &st), EMBER_OK);
        ember_status err;
        const char *msg;
        assert_int_equal(ember_request_error(r[i], &err, &msg), EMBER_OK);
        if (i == 2) {
            assert_int_equal(st, EMBER_REQUEST_FAILED);
            assert_int_equal(err, EMBER_ERR_OUT_OF_MEMORY);
            assert_non_null(strstr(msg, "parse stacks"));
        } else {
            if (st != EMBER_REQUEST_DONE) fail_msg("request %d: state %d, %s", i, (int)st, msg);
            assert_int_equal(n, 24);
        }
        ember_request_free(r[i]);
    }
    ember_grammar_free(amb);
    ember_engine_free(engine);
}

/* The grammar's size is checked before its text is read (len = SIZE_MAX copied first), and a grammar
 * reports the bytes it holds, which stay within the documented 128 MiB. */
static void test_grammar_size_and_memory(void **state) {
    (void)state;
    ember_grammar *g = (ember_grammar *)1;
    assert_int_equal(ember_grammar_create_gbnf(g_model, "root ::= \"a\"", SIZE_MAX, &g), EMBER_ERR_INVALID_ARGUMENT);
    assert_null(g);
    assert_non_null(strstr(ember_last_error(), "limit"));
    assert_int_equal(ember_grammar_create_json_schema(g_model, "{}", (size_t)1 << 40, &g), EMBER_ERR_INVALID_ARGUMENT);
    g = gbnf("root ::= [a-z ]+ \".\"\n");
    size_t before = 0, after = 0;
    assert_int_equal(ember_grammar_memory(g, &before), EMBER_OK);
    struct text out;
    const ember_status st = generate("Once upon a time", NULL, g, NULL, 0, 16, &out);
    assert_true(st == EMBER_OK || st == EMBER_END_OF_GENERATION);
    assert_int_equal(ember_grammar_memory(g, &after), EMBER_OK);
    assert_true(after > before); /* the states and masks it built */
    assert_true(after <= (size_t)128 << 20);
    assert_int_equal(ember_grammar_memory(NULL, &after), EMBER_ERR_INVALID_ARGUMENT);
    assert_int_equal(ember_grammar_memory(g, NULL), EMBER_ERR_INVALID_ARGUMENT);
    ember_grammar_free(g);
    /* Stop strings are whole UTF-8: a lone continuation byte is refused. */
    const char *stop[] = {"\xA9"};
    assert_int_equal(generate("Once upon a time", NULL, NULL, stop, 1, 4, &out), EMBER_ERR_INVALID_ARGUMENT);
}

/* ember_sampler_set_grammar from ember_generate's callback on the running sampler is refused (the
 * header allows only ember_sampler_free there); it returned EMBER_OK and changed the grammar under the
 * running generation. */
static ember_sampler *g_running_sampler;
static ember_status g_set_grammar_status;
static bool set_grammar_cb(ember_token token, const char *t, size_t len, void *ud) {
    (void)token, (void)t, (void)len, (void)ud;
    g_set_grammar_status = ember_sampler_set_grammar(g_running_sampler, NULL);
    return false;
}
static void test_set_grammar_in_callback(void **state) {
    (void)state;
    ember_session *s = fed("Once upon a time");
    g_running_sampler = test_greedy_sampler();
    ember_generate_params gp;
    ember_generate_params_init(&gp);
    gp.max_tokens = 4;
    gp.on_token = set_grammar_cb;
    g_set_grammar_status = EMBER_OK;
    assert_int_equal(ember_generate(s, g_running_sampler, &gp, NULL), EMBER_STOPPED);
    assert_int_equal(g_set_grammar_status, EMBER_ERR_INVALID_STATE);
    ember_sampler_free(g_running_sampler);
    ember_session_free(s);
}

/* A session or sampler used by a second thread while a call on it runs is refused with
 * EMBER_ERR_INVALID_STATE (ThreadSanitizer reported races there before); the call in progress goes on. */
struct overlap {
    ember_session *session;
    ember_sampler *sampler;
    atomic_int phase; /* 1: the generation is inside its callback; 2: the other thread has tried */
    ember_status feed, position, sample, set_stop;
    char message[256];
};
static bool overlap_cb(ember_token token, const char *t, size_t len, void *ud) {
    (void)token, (void)t, (void)len;
    struct overlap *o = ud;
    if (atomic_load(&o->phase) == 0) {
        atomic_store(&o->phase, 1);
        while (atomic_load(&o->phase) != 2) {
        }
    }
    return true;
}
static void *overlap_thread(void *arg) {
    struct overlap *o = arg;
    while (atomic_load(&o->phase) != 1) {
    }
    ember_token tok = 1;
    uint32_t pos;
    float logits[4] = {0};
    o->feed = ember_session_feed(o->session, &tok, 1);
    o->position = ember_session_position(o->session, &pos);
    o->sample = ember_sampler_sample(o->sampler, logits, 4, &tok);
    o->set_stop = ember_session_set_stop(o->session, NULL, 0);
    snprintf(o->message, sizeof o->message, "%s", ember_last_error());
    atomic_store(&o->phase, 2);
    return NULL;
}
static void test_concurrent_use_refused(void **state) {
    (void)state;
    struct overlap o = {fed("Once upon a time"), test_greedy_sampler(), 0, EMBER_OK, EMBER_OK, EMBER_OK, EMBER_OK, ""};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, overlap_thread, &o), 0);
    ember_generate_params gp;
    ember_generate_params_init(&gp);
    gp.max_tokens = 4;
    gp.on_token = overlap_cb;
    gp.user_data = &o;
    size_t count = 0;
    assert_int_equal(ember_generate(o.session, o.sampler, &gp, &count), EMBER_OK);
    pthread_join(th, NULL);
    assert_int_equal(count, 4);
    assert_int_equal(o.feed, EMBER_ERR_INVALID_STATE);
    assert_int_equal(o.position, EMBER_ERR_INVALID_STATE);
    assert_int_equal(o.sample, EMBER_ERR_INVALID_STATE);
    assert_int_equal(o.set_stop, EMBER_ERR_INVALID_STATE);
    assert_non_null(strstr(o.message, "another thread"));
    /* Once the call has returned, either thread may use them again. */
    ember_token tok = 1;
    assert_int_equal(ember_session_feed(o.session, &tok, 1), EMBER_OK);
    ember_sampler_free(o.sampler);
    ember_session_free(o.session);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_greedy_in_language),
        cmocka_unit_test(test_stop_strings),
        cmocka_unit_test(test_next_stop_strings),
        cmocka_unit_test(test_logprobs),
        cmocka_unit_test(test_engine_request),
        cmocka_unit_test(test_request_failure_isolated),
        cmocka_unit_test(test_grammar_size_and_memory),
        cmocka_unit_test(test_set_grammar_in_callback),
        cmocka_unit_test(test_concurrent_use_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
