/* reply.c — prefill by common prefix, and a streamed reply that stops at the end of the turn. */
#include "reply.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

volatile sig_atomic_t chat_interrupted = 0;

ember_status chat_tokenize(const ember_model *model, const char *text, ember_token **out, size_t *out_n) {
    *out = NULL;
    *out_n = 0;
    /* The template writes its special tokens (<|im_start|>, and usually the BOS text) as text: parse
     * them. ember_chat_apply_template's notes say how: no EMBER_TOKENIZE_ADD_SPECIAL, which could add a
     * second BOS (and an EOS); a BOS only where the template wrote none and the tokenizer would add one
     * (ChatML on a Llama vocabulary). Parsing special text also parses any the user typed; an app that
     * must not allow that checks the messages before rendering. */
    const size_t len = strlen(text);
    size_t n = 0, n_added = 0;
    ember_token added[4];
    ember_status st = ember_tokenize(model, "", 0, EMBER_TOKENIZE_ADD_SPECIAL, added, 4, &n_added);
    if (st != EMBER_OK) return st;
    const ember_token bos = ember_token_bos(model);
    const bool wants_bos = n_added > 0 && bos >= 0 && added[0] == bos;
    st = ember_tokenize(model, text, len, EMBER_TOKENIZE_PARSE_SPECIAL, NULL, 0, &n);
    if (st != EMBER_OK) return st;
    ember_token *tokens = malloc((n + 1) * sizeof *tokens);
    if (!tokens) return EMBER_ERR_OUT_OF_MEMORY;
    st = ember_tokenize(model, text, len, EMBER_TOKENIZE_PARSE_SPECIAL, tokens + 1, n, &n);
    if (st != EMBER_OK) {
        free(tokens);
        return st;
    }
    if (wants_bos && (n == 0 || tokens[1] != bos)) {
        tokens[0] = bos;
        ++n;
    } else {
        memmove(tokens, tokens + 1, n * sizeof *tokens);
    }
    if (n == 0) {
        free(tokens);
        return EMBER_ERR_INVALID_ARGUMENT;
    }
    *out = tokens;
    *out_n = n;
    return EMBER_OK;
}

ember_status chat_prefill(ember_session *session, const ember_model *model, conversation *c, const char *text,
                          size_t *out_new, size_t *out_reused) {
    *out_new = *out_reused = 0;
    ember_token *tokens = NULL;
    size_t n = 0;
    ember_status st = chat_tokenize(model, text, &tokens, &n);
    if (st != EMBER_OK) return st;
    uint32_t n_ctx = 0;
    ember_session_context_length(session, &n_ctx);
    if (n >= n_ctx) {
        fprintf(stderr, "chat: the conversation takes %zu tokens, the context holds %u: /reset, a larger -c, or "
                        "--context-policy slide (drops the oldest turns)\n", n, n_ctx);
        st = EMBER_ERR_CONTEXT_FULL;
        goto done;
    }

    size_t common = 0;
    while (common < n && common < c->n_tokens && tokens[common] == c->tokens[common]) ++common;
    /* At least one token is fed, for fresh logits (a truncated session has none). */
    if (common == n) --common;
    st = ember_session_truncate(session, (uint32_t)common);
    if (st != EMBER_OK) goto done;
    c->n_tokens = common;
    st = ember_session_feed(session, tokens + common, n - common);
    if (st == EMBER_OK && !conversation_push_tokens(c, tokens + common, n - common)) {
        /* The mirror could not grow: make it honest (empty) by emptying the session too. */
        ember_session_truncate(session, 0);
        c->n_tokens = 0;
        st = EMBER_ERR_OUT_OF_MEMORY;
    }
    *out_new = n - common;
    *out_reused = common;
done:
    free(tokens);
    return st;
}

/* End-of-turn markers as text. A chat model has them as special tokens, which end generation by
 * themselves (ember_token_is_eog); a model whose vocabulary lacks them (stories15M under the built-in
 * ChatML) spells them out piece by piece, and this is where the turn ends then. The start of a new
 * turn ends it too. They are the library's stop strings (ember_generate_params.stop): it holds back
 * text that may start one and never passes one on. */
static const char *const kMarkers[] = {"<|im_end|>", "<|im_start|>", "<|eot_id|>", "<|end|>", "<end_of_turn>"};
#define N_MARKERS (sizeof kMarkers / sizeof kMarkers[0])

typedef struct stream {
    char *text;
    size_t len, cap;
    ember_token *tokens;
    size_t n_tokens, cap_tokens;
    bool oom;
} stream;

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

static bool on_token(ember_token token, const char *text, size_t text_len, void *user_data) {
    stream *s = user_data;
    if (!grow((void **)&s->tokens, &s->cap_tokens, s->n_tokens + 1, sizeof *s->tokens) ||
        !grow((void **)&s->text, &s->cap, s->len + text_len + 1, 1)) {
        s->oom = true;
        return false;
    }
    s->tokens[s->n_tokens++] = token;
    memcpy(s->text + s->len, text, text_len);
    s->len += text_len;
    s->text[s->len] = '\0';
    fwrite(text, 1, text_len, stdout);
    fflush(stdout);
    return !chat_interrupted;
}

ember_status chat_reply(ember_session *session, ember_sampler *sampler, conversation *c, uint32_t max_tokens,
                        char **out_reply) {
    *out_reply = NULL;
    stream s;
    memset(&s, 0, sizeof s);
    uint32_t pos0 = 0, n_ctx = 0;
    ember_session_position(session, &pos0);
    ember_session_context_length(session, &n_ctx);
    /* Room for the reply: stop at a full context rather than fail there. */
    if (max_tokens == 0 || max_tokens > n_ctx - pos0 - 1) max_tokens = n_ctx - pos0 - 1;
    if (max_tokens == 0) {
        fprintf(stderr, "chat: the context is full: /reset, a larger -c, or --context-policy slide (drops the oldest "
                        "turns)\n");
        return EMBER_ERR_CONTEXT_FULL;
    }
    ember_status st = EMBER_STOPPED;
    if (!chat_interrupted) {
        ember_generate_params gp;
        ember_generate_params_init(&gp);
        gp.max_tokens = max_tokens;
        gp.on_token = on_token;
        gp.user_data = &s;
        gp.stop = kMarkers;
        gp.n_stop = N_MARKERS;
        st = ember_generate(session, sampler, &gp, NULL);
    }
    if (s.oom && st >= 0) st = EMBER_ERR_OUT_OF_MEMORY;

    /* Which of the streamed tokens the session was fed: all but an end-of-generation token, which
     * ember_generate returns without feeding. The position says it exactly. */
    uint32_t pos = 0;
    ember_session_position(session, &pos);
    size_t fed = pos - pos0;
    if (fed > s.n_tokens || !conversation_push_tokens(c, s.tokens, fed)) {
        ember_session_truncate(session, 0);  /* cannot mirror it: start the next turn from scratch */
        c->n_tokens = 0;
    }
    free(s.tokens);
    if (!s.text) s.text = calloc(1, 1);
    *out_reply = s.text;
    return st;
}
