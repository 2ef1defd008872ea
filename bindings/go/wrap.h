/*
 * wrap.h — the C side of the Go binding: one wrapper per fallible ember call.
 *
 * ember_last_error() is thread-local, and Go may move a goroutine to another OS thread between two cgo
 * calls, so the message has to be read in the same C call as the failing function. Each wrapper calls
 * the real function and, when it fails (status < 0), hands back a malloc'ed copy of the message in
 * *err, which the Go side frees. Callbacks into Go get a runtime/cgo.Handle as user_data (an integer,
 * never a Go pointer that C keeps).
 */
#ifndef EMBER_GO_WRAP_H
#define EMBER_GO_WRAP_H

#include <ember/ember.h>

#include <stdint.h>
#include <stdlib.h>

/* progress and log: cgo.Handles of the Go callbacks, 0 for none. */
/* metadata_only: ember_model_load_metadata instead of ember_model_load. */
ember_status eg_model_load(const char *path, _Bool vocab_only, _Bool metadata_only, uintptr_t progress, uintptr_t log,
                           ember_model **out, char **err);
/* Sets (on) or clears the process-wide log sink: the Go side keeps the function itself. */
void eg_log_set(_Bool on, ember_log_level min_level);
ember_status eg_model_get_info(const ember_model *m, ember_model_info *info, char **err);
ember_status eg_model_meta_string(const ember_model *m, const char *key, char *buf, size_t cap, size_t *len,
                                  char **err);
ember_status eg_tokenize(const ember_model *m, const char *text, size_t text_len, uint32_t flags, ember_token *toks,
                         size_t cap, size_t *count, char **err);
ember_status eg_token_to_piece(const ember_model *m, ember_token t, uint32_t flags, char *buf, size_t cap,
                               size_t *len, char **err);
ember_status eg_detokenize(const ember_model *m, const ember_token *toks, size_t n, uint32_t flags, char *buf,
                           size_t cap, size_t *len, char **err);

ember_status eg_session_create(const ember_model *m, const ember_session_params *p, ember_session **out, char **err);
ember_status eg_session_fork(ember_session *s, ember_session **out, char **err);
ember_status eg_session_feed(ember_session *s, const ember_token *toks, size_t n, char **err);
ember_status eg_session_logits(const ember_session *s, const float **logits, size_t *n, char **err);
ember_status eg_session_position(const ember_session *s, uint32_t *pos, char **err);
ember_status eg_session_context_length(const ember_session *s, uint32_t *n, char **err);
ember_status eg_session_backend(const ember_session *s, ember_backend_kind *b, uint32_t *n, char **err);
ember_status eg_session_set_precision(ember_session *s, ember_precision p, char **err);
ember_status eg_session_truncate(ember_session *s, uint32_t n, char **err);
ember_status eg_session_save(const ember_session *s, void *buf, size_t cap, size_t *len, char **err);
ember_status eg_session_restore(ember_session *s, const void *data, size_t size, char **err);
ember_status eg_session_save_file(const ember_session *s, const char *path, char **err);
ember_status eg_session_restore_file(ember_session *s, const char *path, char **err);
ember_status eg_session_set_speculation(ember_session *s, const ember_spec_params *p, char **err);

ember_status eg_sampler_create(const ember_sampler_params *p, ember_sampler **out, char **err);
ember_status eg_sampler_sample(ember_sampler *s, const float *logits, size_t n, ember_token *out, char **err);
ember_status eg_sampler_accept(ember_sampler *s, ember_token t, char **err);
ember_status eg_sampler_reset(ember_sampler *s, char **err);
ember_status eg_grammar_create(const ember_model *m, const char *text, size_t len, int json_schema, ember_grammar **out,
                               char **err);
ember_status eg_grammar_create_lazy(const ember_model *m, const char *text, size_t len, char **words, size_t n_words,
                                    const ember_token *tokens, size_t n_tokens, bool once, ember_grammar **out, char **err);
ember_status eg_sampler_grammar_constraining(const ember_sampler *s, bool *out, char **err);
ember_status eg_sampler_set_grammar(ember_sampler *s, const ember_grammar *g, char **err);

ember_status eg_generate_next(ember_session *s, ember_sampler *smp, ember_token *tok, const char **text,
                              size_t *text_len, char **err);
ember_status eg_session_set_stop(ember_session *s, char **stop, size_t n_stop, char **err);
ember_status eg_session_flush_stop(ember_session *s, const char **text, size_t *text_len, char **err);
/* ember_generate with the Go token callback (cgo.Handle `handle`), max_tokens, a grammar for the call
 * (may be NULL) and stop strings (C copies, read during the call only). */
ember_status eg_generate(ember_session *s, ember_sampler *smp, uint32_t max_tokens, uintptr_t handle,
                         const ember_grammar *g, char **stop, size_t n_stop, size_t *count, char **err);
ember_status eg_sampler_logprobs(const ember_sampler *s, ember_token_logprob *sampled, ember_token_logprob *top,
                                 size_t cap, size_t *count, char **err);

ember_status eg_engine_create(const ember_model *m, const ember_engine_params *p, ember_engine **out, char **err);
ember_status eg_engine_get_stats(ember_engine *e, ember_engine_stats *stats, char **err);
ember_status eg_request_submit(ember_engine *e, const ember_token *prompt, size_t n_prompt, uint32_t max_tokens,
                               const ember_sampler_params *sampling, const ember_grammar *g, char **stop,
                               size_t n_stop, bool speculate, ember_request **out, char **err);
ember_status eg_request_get_stats(ember_request *r, ember_request_stats *stats, char **err);
ember_status eg_request_logprobs(ember_request *r, size_t i, ember_token_logprob *sampled, ember_token_logprob *top,
                                 size_t cap, size_t *count, char **err);
ember_status eg_request_poll(ember_request *r, ember_token *toks, size_t cap, size_t *count,
                             ember_request_state *state, char **err);
ember_status eg_request_text(ember_request *r, char *buf, size_t cap, size_t *len, char **err);
ember_status eg_request_wait(ember_request *r, uint32_t timeout_ms, char **err);
ember_status eg_request_cancel(ember_request *r, char **err);
/* ember_request_error with the message copied (malloc'ed) into *message. */
ember_status eg_request_error(ember_request *r, ember_status *status, char **message, char **err);

/* tmpl NULL: the model's own template. */
ember_status eg_chat_apply_template(const ember_model *m, const char *tmpl, const ember_chat_message *msgs, size_t n,
                                    _Bool add_generation_prompt, char *buf, size_t cap, size_t *len, char **err);

/* Embeddings and reranking (embed.go): the params as Go passes them (pooling as ember_pooling's number). */
ember_status eg_embedder_create(const ember_model *m, int normalize, uint32_t dimensions, int pooling, uint32_t n_threads,
                                uint32_t max_tokens, int truncate, ember_embedder **out, char **err);
ember_status eg_embed(ember_embedder *e, const char *const *texts, const size_t *lengths, size_t n, float *out,
                      size_t capacity, char **err);
ember_status eg_rerank(ember_embedder *e, const char *query, const char *const *docs, size_t n, float *scores, char **err);
/* Embedding requests on an engine (engine_embed.go, EMBER_1.11): the params as Go passes them. */
ember_status eg_engine_submit_embed(ember_engine *e, const char *const *texts, const size_t *lengths, size_t n, int pooling,
                                    int normalize, uint32_t dimensions, int truncate, uint32_t max_tokens, const char *query,
                                    ember_request **out, char **err);
ember_status eg_request_embeddings(ember_request *r, float *out, size_t capacity, size_t *count, char **err);

#endif
