/* reply.h — one turn on the session: prefill only what is new, then stream the reply. */
#ifndef EMBER_CHAT_REPLY_H
#define EMBER_CHAT_REPLY_H

#include "conversation.h"

#include <signal.h>

/* Set by the SIGINT handler while a turn runs (main.c); the reply stops at the next token. */
extern volatile sig_atomic_t chat_interrupted;

/* Tokenizes a rendered conversation as chat_prefill feeds it (special text parsed, BOS added where the
 * template wrote none and the model wants one) into *out (malloc'ed; the caller frees it). */
ember_status chat_tokenize(const ember_model *model, const char *text, ember_token **out, size_t *out_n);

/* Brings the session to `text` (the rendered conversation): tokenizes it, rolls the session back to the
 * longest prefix it shares with the tokens already there (c->tokens) and feeds only the rest, so that a
 * turn costs its new tokens rather than the whole conversation. *out_new and *out_reused receive the
 * two counts. Returns the status of the feed (EMBER_ERR_CANCELLED after Ctrl-C: the session then holds
 * the shared prefix, and c->tokens says so). */
ember_status chat_prefill(ember_session *session, const ember_model *model, conversation *c, const char *text,
                          size_t *out_new, size_t *out_reused);

/* Generates up to max_tokens, writing the text to stdout as it comes, until end of generation or an
 * end-of-turn marker written as text (the marker is neither printed nor kept). *out_reply receives the
 * reply (malloc'ed; NULL if out of memory) and c->tokens the tokens the session was fed. Returns the
 * status of ember_generate (EMBER_STOPPED for a marker or Ctrl-C: chat_interrupted tells them apart). */
ember_status chat_reply(ember_session *session, ember_sampler *sampler, conversation *c, uint32_t max_tokens,
                        char **out_reply);

#endif
