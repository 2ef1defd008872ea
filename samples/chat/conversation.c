/* conversation.c — messages, their rendering through the chat template, and /save, /load. */
#include "conversation.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The file's first line; a later format gets another number. */
#define CONVERSATION_MAGIC "ember-chat conversation 1"

void conversation_init(conversation *c) {
    memset(c, 0, sizeof *c);
}

static void free_messages(ember_chat_message *m, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        free((char *)m[i].role);
        free((char *)m[i].content);
    }
    free(m);
}

void conversation_free(conversation *c) {
    free_messages(c->messages, c->n_messages);
    free(c->tokens);
    conversation_init(c);
}

static char *dup_bytes(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

static bool add_owned(conversation *c, char *role, char *content) {
    if (!role || !content) goto fail;
    if (c->n_messages == c->cap_messages) {
        const size_t cap = c->cap_messages ? 2 * c->cap_messages : 8;
        ember_chat_message *m = realloc(c->messages, cap * sizeof *m);
        if (!m) goto fail;
        c->messages = m;
        c->cap_messages = cap;
    }
    c->messages[c->n_messages].role = role;
    c->messages[c->n_messages].content = content;
    ++c->n_messages;
    return true;
fail:
    free(role);
    free(content);
    return false;
}

bool conversation_add(conversation *c, const char *role, const char *content) {
    return add_owned(c, dup_bytes(role, strlen(role)), dup_bytes(content, strlen(content)));
}

void conversation_pop(conversation *c) {
    if (c->n_messages == 0) return;
    --c->n_messages;
    free((char *)c->messages[c->n_messages].role);
    free((char *)c->messages[c->n_messages].content);
}

void conversation_drop(conversation *c, size_t first, size_t count) {
    if (first >= c->n_messages) return;
    if (count > c->n_messages - first) count = c->n_messages - first;
    for (size_t i = first; i < first + count; ++i) {
        free((char *)c->messages[i].role);
        free((char *)c->messages[i].content);
    }
    memmove(c->messages + first, c->messages + first + count, (c->n_messages - first - count) * sizeof *c->messages);
    c->n_messages -= count;
}

void conversation_keep(conversation *c, size_t n) {
    while (c->n_messages > n) conversation_pop(c);
}

static bool reserve_tokens(conversation *c, size_t n) {
    if (n <= c->cap_tokens) return true;
    size_t cap = c->cap_tokens ? c->cap_tokens : 256;
    while (cap < n) cap *= 2;
    ember_token *t = realloc(c->tokens, cap * sizeof *t);
    if (!t) return false;
    c->tokens = t;
    c->cap_tokens = cap;
    return true;
}

bool conversation_set_tokens(conversation *c, const ember_token *tokens, size_t n) {
    if (!reserve_tokens(c, n)) return false;
    if (n) memmove(c->tokens, tokens, n * sizeof *tokens);
    c->n_tokens = n;
    return true;
}

bool conversation_push_tokens(conversation *c, const ember_token *tokens, size_t n) {
    if (!reserve_tokens(c, c->n_tokens + n)) return false;
    if (n) memcpy(c->tokens + c->n_tokens, tokens, n * sizeof *tokens);
    c->n_tokens += n;
    return true;
}

char *conversation_render(const conversation *c, const ember_model *model, bool add_generation_prompt) {
    size_t len = 0;
    ember_status st = ember_chat_apply_template(model, NULL, c->messages, c->n_messages, add_generation_prompt, NULL, 0,
                                                &len);
    if (st != EMBER_OK) {
        fprintf(stderr, "chat: rendering the conversation failed: %s (%s)\n", ember_status_string(st), ember_last_error());
        return NULL;
    }
    char *text = malloc(len + 1);
    if (!text) {
        fprintf(stderr, "chat: out of memory\n");
        return NULL;
    }
    st = ember_chat_apply_template(model, NULL, c->messages, c->n_messages, add_generation_prompt, text, len + 1, &len);
    if (st != EMBER_OK) {
        fprintf(stderr, "chat: rendering the conversation failed: %s (%s)\n", ember_status_string(st), ember_last_error());
        free(text);
        return NULL;
    }
    return text;
}

/* ---- /save and /load ----
 * The file is the first line CONVERSATION_MAGIC, then "messages N" and for each message a line
 * "ROLE_BYTES CONTENT_BYTES" followed by the raw role and content and a newline (so content may hold
 * any byte), then "tokens K" and K token ids. The session's state (its KV cache) goes beside it, in
 * PATH.session, written by ember_session_save_file: it is large and has a format of its own. */

static char *session_path(const char *path) {
    const size_t n = strlen(path);
    char *p = malloc(n + sizeof ".session");
    if (p) {
        memcpy(p, path, n);
        memcpy(p + n, ".session", sizeof ".session");
    }
    return p;
}

bool conversation_save(const conversation *c, const ember_session *session, const char *path) {
    char *spath = session_path(path);
    if (!spath) {
        fprintf(stderr, "chat: out of memory\n");
        return false;
    }
    const ember_status st = ember_session_save_file(session, spath);
    if (st != EMBER_OK) {
        fprintf(stderr, "chat: saving the session to %s failed: %s (%s)\n", spath, ember_status_string(st), ember_last_error());
        free(spath);
        return false;
    }
    free(spath);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        return false;
    }
    fprintf(f, "%s\nmessages %zu\n", CONVERSATION_MAGIC, c->n_messages);
    for (size_t i = 0; i < c->n_messages; ++i) {
        const ember_chat_message *m = &c->messages[i];
        fprintf(f, "%zu %zu\n%s%s\n", strlen(m->role), strlen(m->content), m->role, m->content);
    }
    fprintf(f, "tokens %zu\n", c->n_tokens);
    for (size_t i = 0; i < c->n_tokens; ++i) fprintf(f, "%d%c", (int)c->tokens[i], i + 1 == c->n_tokens ? '\n' : ' ');
    const bool ok = !ferror(f);
    if (fclose(f) != 0 || !ok) {
        fprintf(stderr, "chat: writing %s failed\n", path);
        return false;
    }
    return true;
}

/* Reads exactly n bytes into a new string. */
static char *read_bytes(FILE *f, size_t n) {
    if (n > ((size_t)1 << 30)) return NULL;
    char *s = malloc(n + 1);
    if (!s) return NULL;
    if (fread(s, 1, n, f) != n) {
        free(s);
        return NULL;
    }
    s[n] = '\0';
    return s;
}

bool conversation_load(conversation *c, ember_session *session, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return false;
    }
    conversation loaded;
    conversation_init(&loaded);
    char magic[64] = "";
    size_t n_messages = 0, n_tokens = 0;
    bool ok = fgets(magic, sizeof magic, f) && strncmp(magic, CONVERSATION_MAGIC "\n", sizeof magic) == 0 &&
              fscanf(f, "messages %zu", &n_messages) == 1 && fgetc(f) == '\n';
    for (size_t i = 0; ok && i < n_messages; ++i) {
        size_t role_len = 0, content_len = 0;
        ok = fscanf(f, "%zu %zu", &role_len, &content_len) == 2 && fgetc(f) == '\n';
        if (!ok) break;
        char *role = read_bytes(f, role_len);
        char *content = role ? read_bytes(f, content_len) : NULL;
        ok = add_owned(&loaded, role, content) && fgetc(f) == '\n';
    }
    ok = ok && fscanf(f, "tokens %zu", &n_tokens) == 1 && n_tokens < ((size_t)1 << 24) && reserve_tokens(&loaded, n_tokens);
    for (size_t i = 0; ok && i < n_tokens; ++i) {
        int t = 0;
        ok = fscanf(f, "%d", &t) == 1;
        loaded.tokens[i] = t;
    }
    loaded.n_tokens = ok ? n_tokens : 0;
    fclose(f);
    if (!ok) {
        fprintf(stderr, "chat: %s is not a conversation saved by ember-chat (or it is truncated)\n", path);
        conversation_free(&loaded);
        return false;
    }

    /* The session's state last: ember_session_restore_file changes nothing when it fails. */
    char *spath = session_path(path);
    const ember_status st = spath ? ember_session_restore_file(session, spath) : EMBER_ERR_OUT_OF_MEMORY;
    if (st != EMBER_OK) {
        fprintf(stderr, "chat: restoring the session from %s failed: %s (%s)\n", spath ? spath : path, ember_status_string(st),
                ember_last_error());
        free(spath);
        conversation_free(&loaded);
        return false;
    }
    free(spath);
    uint32_t pos = 0;
    ember_session_position(session, &pos);
    if (pos != loaded.n_tokens) {
        /* The two files do not belong together: forget the session's tokens, so that the next turn
         * prefills everything instead of trusting a mismatched mirror. */
        fprintf(stderr, "chat: %s holds %zu tokens but its session %u; the next turn will prefill everything\n", path,
                loaded.n_tokens, pos);
        ember_session_truncate(session, 0);
        loaded.n_tokens = 0;
    }
    conversation_free(c);
    *c = loaded;
    return true;
}
