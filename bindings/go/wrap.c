/* wrap.c — see wrap.h: each wrapper makes one ember call and copies ember_last_error() on failure. */
#include "wrap.h"

#include <string.h>

#include "_cgo_export.h"

/* A malloc'ed copy of this thread's last error ("" if none); NULL only when malloc fails. */
static char *eg_error_copy(void) {
    const char *msg = ember_last_error();
    if (!msg) msg = "";
    size_t n = strlen(msg);
    char *copy = malloc(n + 1);
    if (copy) memcpy(copy, msg, n + 1);
    return copy;
}

/* The body of every wrapper: call, and on error copy the message while still on this thread. */
#define EG_CALL(call)                          \
    do {                                       \
        *err = NULL;                           \
        ember_status st_ = (call);             \
        if (st_ < 0) *err = eg_error_copy();   \
        return st_;                            \
    } while (0)

/* Trampolines: C callbacks that forward to the //export'ed Go functions, with the cgo.Handle that
 * travels as user_data. */
static bool eg_progress_trampoline(float progress, void *user_data) {
    return emberGoProgress(progress, (uintptr_t)user_data);
}

static bool eg_token_trampoline(ember_token token, const char *text, size_t text_len, void *user_data) {
    return emberGoToken(token, (char *)text, text_len, (uintptr_t)user_data);
}

static void eg_model_log_trampoline(ember_log_level level, const char *message, void *user_data) {
    emberGoModelLog(level, (char *)message, (uintptr_t)user_data);
}

static void eg_log_trampoline(ember_log_level level, const char *message, void *user_data) {
    (void)user_data;
    emberGoLog(level, (char *)message);
}

void eg_log_set(_Bool on, ember_log_level min_level) {
    ember_log_set(on ? eg_log_trampoline : NULL, NULL, min_level);
}

ember_status eg_model_load(const char *path, _Bool vocab_only, _Bool metadata_only, uintptr_t progress, uintptr_t log,
                           ember_model **out, char **err) {
    ember_model_params p;
    ember_model_params_init(&p);
    p.vocab_only = vocab_only;
    if (progress) {
        p.progress = eg_progress_trampoline;
        p.progress_user_data = (void *)progress;
    }
    if (log) {
        p.log = eg_model_log_trampoline;
        p.log_user_data = (void *)log;
    }
    EG_CALL(metadata_only ? ember_model_load_metadata(path, &p, out) : ember_model_load(path, &p, out));
}

ember_status eg_model_get_info(const ember_model *m, ember_model_info *info, char **err) {
    EG_CALL(ember_model_get_info(m, info));
}

ember_status eg_model_meta_string(const ember_model *m, const char *key, char *buf, size_t cap, size_t *len,
                                  char **err) {
    EG_CALL(ember_model_meta_string(m, key, buf, cap, len));
}

ember_status eg_tokenize(const ember_model *m, const char *text, size_t text_len, uint32_t flags, ember_token *toks,
                         size_t cap, size_t *count, char **err) {
    EG_CALL(ember_tokenize(m, text, text_len, flags, toks, cap, count));
}

ember_status eg_token_to_piece(const ember_model *m, ember_token t, uint32_t flags, char *buf, size_t cap,
                               size_t *len, char **err) {
    EG_CALL(ember_token_to_piece(m, t, flags, buf, cap, len));
}

ember_status eg_detokenize(const ember_model *m, const ember_token *toks, size_t n, uint32_t flags, char *buf,
                           size_t cap, size_t *len, char **err) {
    EG_CALL(ember_detokenize(m, toks, n, flags, buf, cap, len));
}

ember_status eg_session_create(const ember_model *m, const ember_session_params *p, ember_session **out, char **err) {
    EG_CALL(ember_session_create(m, p, out));
}

ember_status eg_session_fork(ember_session *s, ember_session **out, char **err) {
    EG_CALL(ember_session_fork(s, out));
}

ember_status eg_session_feed(ember_session *s, const ember_token *toks, size_t n, char **err) {
    EG_CALL(ember_session_feed(s, toks, n));
}

ember_status eg_session_logits(const ember_session *s, const float **logits, size_t *n, char **err) {
    EG_CALL(ember_session_logits(s, logits, n));
}

ember_status eg_session_backend(const ember_session *s, ember_backend_kind *b, uint32_t *n, char **err) {
    EG_CALL(ember_session_backend(s, b, n));
}

ember_status eg_session_set_precision(ember_session *s, ember_precision p, char **err) {
    EG_CALL(ember_session_set_precision(s, p));
}

ember_status eg_session_position(const ember_session *s, uint32_t *pos, char **err) {
    EG_CALL(ember_session_position(s, pos));
}

ember_status eg_session_context_length(const ember_session *s, uint32_t *n, char **err) {
    EG_CALL(ember_session_context_length(s, n));
}

ember_status eg_session_truncate(ember_session *s, uint32_t n, char **err) {
    EG_CALL(ember_session_truncate(s, n));
}

ember_status eg_session_save(const ember_session *s, void *buf, size_t cap, size_t *len, char **err) {
    EG_CALL(ember_session_save(s, buf, cap, len));
}

ember_status eg_session_restore(ember_session *s, const void *data, size_t size, char **err) {
    EG_CALL(ember_session_restore(s, data, size));
}

ember_status eg_session_save_file(const ember_session *s, const char *path, char **err) {
    EG_CALL(ember_session_save_file(s, path));
}

ember_status eg_session_restore_file(ember_session *s, const char *path, char **err) {
    EG_CALL(ember_session_restore_file(s, path));
}

ember_status eg_session_set_speculation(ember_session *s, const ember_spec_params *p, char **err) {
    EG_CALL(ember_session_set_speculation(s, p));
}

ember_status eg_sampler_create(const ember_sampler_params *p, ember_sampler **out, char **err) {
    EG_CALL(ember_sampler_create(p, out));
}

ember_status eg_sampler_sample(ember_sampler *s, const float *logits, size_t n, ember_token *out, char **err) {
    EG_CALL(ember_sampler_sample(s, logits, n, out));
}

ember_status eg_sampler_accept(ember_sampler *s, ember_token t, char **err) {
    EG_CALL(ember_sampler_accept(s, t));
}

ember_status eg_sampler_reset(ember_sampler *s, char **err) {
    EG_CALL(ember_sampler_reset(s));
}

ember_status eg_grammar_create(const ember_model *m, const char *text, size_t len, int json_schema, ember_grammar **out,
                               char **err) {
    EG_CALL(json_schema ? ember_grammar_create_json_schema(m, text, len, out) : ember_grammar_create_gbnf(m, text, len, out));
}

ember_status eg_grammar_create_lazy(const ember_model *m, const char *text, size_t len, char **words, size_t n_words,
                                    const ember_token *tokens, size_t n_tokens, bool once, ember_grammar **out, char **err) {
    ember_grammar_triggers t;
    ember_grammar_triggers_init(&t);
    t.words = (const char *const *)words;
    t.n_words = n_words;
    t.tokens = tokens;
    t.n_tokens = n_tokens;
    t.once = once;
    EG_CALL(ember_grammar_create_lazy(m, text, len, &t, out));
}

ember_status eg_sampler_grammar_constraining(const ember_sampler *s, bool *out, char **err) {
    EG_CALL(ember_sampler_grammar_constraining(s, out));
}

ember_status eg_sampler_set_grammar(ember_sampler *s, const ember_grammar *g, char **err) {
    EG_CALL(ember_sampler_set_grammar(s, g));
}

ember_status eg_generate_next(ember_session *s, ember_sampler *smp, ember_token *tok, const char **text,
                              size_t *text_len, char **err) {
    EG_CALL(ember_generate_next(s, smp, tok, text, text_len));
}

ember_status eg_session_set_stop(ember_session *s, char **stop, size_t n_stop, char **err) {
    EG_CALL(ember_session_set_stop(s, (const char *const *)stop, n_stop));
}

ember_status eg_session_flush_stop(ember_session *s, const char **text, size_t *text_len, char **err) {
    EG_CALL(ember_session_flush_stop(s, text, text_len));
}

ember_status eg_sampler_logprobs(const ember_sampler *s, ember_token_logprob *sampled, ember_token_logprob *top,
                                 size_t cap, size_t *count, char **err) {
    EG_CALL(ember_sampler_logprobs(s, sampled, top, cap, count));
}

ember_status eg_generate(ember_session *s, ember_sampler *smp, uint32_t max_tokens, uintptr_t handle,
                         const ember_grammar *g, char **stop, size_t n_stop, size_t *count, char **err) {
    ember_generate_params p;
    ember_generate_params_init(&p);
    p.max_tokens = max_tokens;
    p.grammar = g;
    p.stop = (const char *const *)stop;
    p.n_stop = n_stop;
    if (handle) {
        p.on_token = eg_token_trampoline;
        p.user_data = (void *)handle;
    }
    EG_CALL(ember_generate(s, smp, &p, count));
}

ember_status eg_engine_create(const ember_model *m, const ember_engine_params *p, ember_engine **out, char **err) {
    EG_CALL(ember_engine_create(m, p, out));
}

ember_status eg_engine_get_stats(ember_engine *e, ember_engine_stats *stats, char **err) {
    EG_CALL(ember_engine_get_stats(e, stats));
}

/* The prompt, the sampler params and the stop strings are copied by ember_request_submit, so memory
 * passed here is not kept after the call. */
ember_status eg_request_submit(ember_engine *e, const ember_token *prompt, size_t n_prompt, uint32_t max_tokens,
                               const ember_sampler_params *sampling, const ember_grammar *g, char **stop,
                               size_t n_stop, bool speculate, ember_request **out, char **err) {
    ember_request_params p;
    ember_request_params_init(&p);
    p.prompt = prompt;
    p.n_prompt = n_prompt;
    p.max_tokens = max_tokens;
    p.sampling = sampling;
    p.grammar = g;   /* the request takes its own reference */
    p.stop = (const char *const *)stop;
    p.n_stop = n_stop;
    p.speculate = speculate;
    EG_CALL(ember_request_submit(e, &p, out));
}

ember_status eg_request_get_stats(ember_request *r, ember_request_stats *stats, char **err) {
    EG_CALL(ember_request_get_stats(r, stats));
}

ember_status eg_request_logprobs(ember_request *r, size_t i, ember_token_logprob *sampled, ember_token_logprob *top,
                                 size_t cap, size_t *count, char **err) {
    EG_CALL(ember_request_logprobs(r, i, sampled, top, cap, count));
}

ember_status eg_request_poll(ember_request *r, ember_token *toks, size_t cap, size_t *count,
                             ember_request_state *state, char **err) {
    EG_CALL(ember_request_poll(r, toks, cap, count, state));
}

ember_status eg_request_text(ember_request *r, char *buf, size_t cap, size_t *len, char **err) {
    EG_CALL(ember_request_text(r, buf, cap, len));
}

ember_status eg_request_wait(ember_request *r, uint32_t timeout_ms, char **err) {
    EG_CALL(ember_request_wait(r, timeout_ms));
}

ember_status eg_request_cancel(ember_request *r, char **err) {
    EG_CALL(ember_request_cancel(r));
}

ember_status eg_request_error(ember_request *r, ember_status *status, char **message, char **err) {
    const char *msg = NULL;
    *message = NULL;
    *err = NULL;
    ember_status st = ember_request_error(r, status, &msg);
    if (st < 0) {
        *err = eg_error_copy();
        return st;
    }
    if (msg) {
        size_t n = strlen(msg);
        *message = malloc(n + 1);
        if (*message) memcpy(*message, msg, n + 1);
    }
    return st;
}

ember_status eg_chat_apply_template(const ember_model *m, const char *tmpl, const ember_chat_message *msgs, size_t n,
                                    _Bool add_generation_prompt, char *buf, size_t cap, size_t *len, char **err) {
    EG_CALL(ember_chat_apply_template(m, tmpl, msgs, n, add_generation_prompt, buf, cap, len));
}

ember_status eg_embedder_create(const ember_model *m, int normalize, uint32_t dimensions, int pooling, uint32_t n_threads,
                                uint32_t max_tokens, int truncate, ember_embedder **out, char **err) {
    ember_embed_params p;
    ember_embed_params_init(&p);
    p.normalize = normalize != 0;
    p.dimensions = dimensions;
    p.pooling = (ember_pooling)pooling;
    p.n_threads = n_threads;
    p.max_tokens = max_tokens;
    p.truncate = truncate != 0;
    EG_CALL(ember_embedder_create(m, &p, out));
}

ember_status eg_embed(ember_embedder *e, const char *const *texts, const size_t *lengths, size_t n, float *out,
                      size_t capacity, char **err) {
    EG_CALL(ember_embed(e, texts, lengths, n, out, capacity));
}

ember_status eg_rerank(ember_embedder *e, const char *query, const char *const *docs, size_t n, float *scores, char **err) {
    EG_CALL(ember_rerank(e, query, docs, n, scores));
}

ember_status eg_engine_submit_embed(ember_engine *e, const char *const *texts, const size_t *lengths, size_t n, int pooling,
                                    int normalize, uint32_t dimensions, int truncate, uint32_t max_tokens, const char *query,
                                    ember_request **out, char **err) {
    ember_embed_request_params p;
    ember_embed_request_params_init(&p);
    p.texts = texts;
    p.lengths = lengths;
    p.n_texts = n;
    p.pooling = (ember_pooling)pooling;
    p.normalize = normalize != 0;
    p.dimensions = dimensions;
    p.truncate = truncate != 0;
    p.max_tokens = max_tokens;
    p.query = query;
    EG_CALL(ember_engine_submit_embed(e, &p, out));
}

ember_status eg_request_embeddings(ember_request *r, float *out, size_t capacity, size_t *count, char **err) {
    EG_CALL(ember_request_embeddings(r, out, capacity, count));
}
