/* conversation.h — the chat as messages, and the tokens the session holds for it.
 *
 * The conversation is kept as messages (role, content) and rendered with the model's chat template
 * each turn; `tokens` mirrors what has been fed into the ember session, so that a turn can find how much
 * of the new rendering the session already holds (see reply.h). */
#ifndef EMBER_CHAT_CONVERSATION_H
#define EMBER_CHAT_CONVERSATION_H

#include <ember/ember.h>

#include <stdbool.h>
#include <stddef.h>

typedef struct conversation {
    ember_chat_message *messages; /* role and content are owned (malloc'ed) by the conversation */
    size_t n_messages, cap_messages;
    ember_token *tokens;          /* what the session holds, token for token */
    size_t n_tokens, cap_tokens;
} conversation;

void conversation_init(conversation *c);
void conversation_free(conversation *c);

/* Appends a message (both strings copied). false when out of memory. */
bool conversation_add(conversation *c, const char *role, const char *content);
/* Drops the last message (a turn that could not be answered). */
void conversation_pop(conversation *c);
/* Removes `count` messages starting at index `first` (the oldest turns, when the context is full). */
void conversation_drop(conversation *c, size_t first, size_t count);
/* Keeps only the first n messages (n: 1 to keep a system prompt, 0 for none). */
void conversation_keep(conversation *c, size_t n);

/* Sets the session mirror. false when out of memory. */
bool conversation_set_tokens(conversation *c, const ember_token *tokens, size_t n);
bool conversation_push_tokens(conversation *c, const ember_token *tokens, size_t n);

/* Renders the messages with the model's template (ChatML when it has none) into a malloc'ed string,
 * ending with the assistant's opening when add_generation_prompt. NULL on error (message on stderr). */
char *conversation_render(const conversation *c, const ember_model *model, bool add_generation_prompt);

/* Writes the conversation (messages and token mirror) to `path` and the session's state to
 * `path`.session; conversation_load reads both back into `c` and `session`, changing nothing when any
 * part fails. Both print the reason to stderr on failure. */
bool conversation_save(const conversation *c, const ember_session *session, const char *path);
bool conversation_load(conversation *c, ember_session *session, const char *path);

#endif
