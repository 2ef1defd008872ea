/*
 * ember_layout.c — the one description of the C ABI that the language bindings are checked against.
 *
 * Bindings for C#, Rust and Go declare ember.h's structs, enums and functions again in their own
 * language; nothing in those compilers reads a C header, so a declaration could drift from the library
 * without any build failing. This program is the bridge: every struct, field, enum value, constant,
 * callback type and function of ember.h is listed below once, each entry is checked against the real
 * header by the C compiler (types compatible, sizes and offsets taken with sizeof/offsetof), and the
 * result is printed as a plain table (ember.layout, committed beside this file) that each binding's
 * layout test compares with what that binding declares.
 *
 * Completeness is checked too: the table must name every EMBER_API function and every struct field of
 * the header (tests/bindings_layout.sh compares with the header's text), and the fields of a struct
 * must tile it (each at the first aligned offset after the one before, the last reaching the size), so a
 * field added to the header but not here is an error, not a silent gap.
 *
 * Output lines, fields separated by one space (C type strings may contain spaces, so they come last):
 *   struct NAME SIZE ALIGN
 *   field STRUCT NAME OFFSET SIZE CTYPE
 *   enum TYPE NAME VALUE
 *   const NAME VALUE
 *   callback NAME RET|ARG, ARG, ...
 *   fn NAME RET|ARG, ARG, ...
 * Sizes are those of the platform it runs on; the committed table is x86-64 / AArch64 Linux (LP64).
 */
#include <ember/ember.h>

#include <stdalign.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* True when expression E has exactly type T (qualifiers and all): what keeps each entry honest. */
#define SAME_TYPE(E, T) __builtin_types_compatible_p(__typeof__(E), T)

/* ---- structs: STRUCT(name, fields...) with F(field, C type) ---- */
#define EMBER_STRUCTS(S, F)                                                                          \
    S(ember_model_params,                                                                            \
      F(ember_model_params, struct_size, uint32_t)                                                   \
      F(ember_model_params, progress, ember_progress_fn)                                             \
      F(ember_model_params, progress_user_data, void *)                                              \
      F(ember_model_params, vocab_only, bool)                                                        \
      F(ember_model_params, log, ember_log_fn)                                                       \
      F(ember_model_params, log_user_data, void *))                                                  \
    S(ember_model_info,                                                                              \
      F(ember_model_info, struct_size, uint32_t)                                                     \
      F(ember_model_info, architecture, const char *)                                                \
      F(ember_model_info, name, const char *)                                                        \
      F(ember_model_info, n_params, uint64_t)                                                        \
      F(ember_model_info, size_bytes, uint64_t)                                                      \
      F(ember_model_info, n_ctx_train, uint32_t)                                                     \
      F(ember_model_info, n_vocab, uint32_t)                                                         \
      F(ember_model_info, n_embd, uint32_t)                                                          \
      F(ember_model_info, n_layer, uint32_t)                                                         \
      F(ember_model_info, n_head, uint32_t)                                                          \
      F(ember_model_info, n_head_kv, uint32_t)                                                       \
      F(ember_model_info, kv_bytes_per_token, uint64_t)                                              \
      F(ember_model_info, state_bytes_per_sequence, uint64_t)                                        \
      F(ember_model_info, n_kv_layers, uint32_t)                                                     \
      F(ember_model_info, n_recurrent_layers, uint32_t))                                             \
    S(ember_tensor_info,                                                                             \
      F(ember_tensor_info, struct_size, uint32_t)                                                    \
      F(ember_tensor_info, name, const char *)                                                       \
      F(ember_tensor_info, type, const char *)                                                       \
      F(ember_tensor_info, n_dims, uint32_t)                                                         \
      F(ember_tensor_info, dims, int64_t[4])                                                         \
      F(ember_tensor_info, n_bytes, uint64_t))                                                       \
    S(ember_session_params,                                                                          \
      F(ember_session_params, struct_size, uint32_t)                                                 \
      F(ember_session_params, n_ctx, uint32_t)                                                       \
      F(ember_session_params, n_threads, uint32_t)                                                   \
      F(ember_session_params, n_batch, uint32_t)                                                     \
      F(ember_session_params, seed, uint64_t)                                                        \
      F(ember_session_params, backend, ember_backend_kind)                                           \
      F(ember_session_params, reserved, uint32_t)                                                    \
      F(ember_session_params, n_seq_max, uint32_t)                                                   \
      F(ember_session_params, kv_type, ember_kv_type)                                                \
      F(ember_session_params, device, const ember_device *)                                          \
      F(ember_session_params, gpu_layers, int32_t)                                                   \
      F(ember_session_params, experts_on_cpu, int32_t)                                               \
      F(ember_session_params, gpu_budget_bytes, uint64_t))                                           \
    S(ember_sampler_params,                                                                          \
      F(ember_sampler_params, struct_size, uint32_t)                                                 \
      F(ember_sampler_params, temperature, float)                                                    \
      F(ember_sampler_params, top_k, int32_t)                                                        \
      F(ember_sampler_params, top_p, float)                                                          \
      F(ember_sampler_params, min_p, float)                                                          \
      F(ember_sampler_params, repeat_penalty, float)                                                 \
      F(ember_sampler_params, frequency_penalty, float)                                              \
      F(ember_sampler_params, presence_penalty, float)                                               \
      F(ember_sampler_params, penalty_last_n, int32_t)                                               \
      F(ember_sampler_params, seed, uint64_t)                                                        \
      F(ember_sampler_params, n_logprobs, int32_t))                                                  \
    S(ember_token_logprob,                                                                           \
      F(ember_token_logprob, token, ember_token)                                                     \
      F(ember_token_logprob, logprob, float))                                                        \
    S(ember_generate_params,                                                                         \
      F(ember_generate_params, struct_size, uint32_t)                                                \
      F(ember_generate_params, max_tokens, uint32_t)                                                 \
      F(ember_generate_params, on_token, ember_token_fn)                                             \
      F(ember_generate_params, user_data, void *)                                                    \
      F(ember_generate_params, speculate, bool)                                                      \
      F(ember_generate_params, reserved_1_4, uint8_t[7])                                             \
      F(ember_generate_params, grammar, const ember_grammar *)                                       \
      F(ember_generate_params, stop, const char *const *)                                            \
      F(ember_generate_params, n_stop, size_t))                                                      \
    S(ember_spec_params,                                                                             \
      F(ember_spec_params, struct_size, uint32_t)                                                    \
      F(ember_spec_params, mode, ember_spec_mode)                                                    \
      F(ember_spec_params, draft_model, const ember_model *)                                         \
      F(ember_spec_params, k, uint32_t)                                                              \
      F(ember_spec_params, adaptive, bool)                                                           \
      F(ember_spec_params, k_max, uint32_t)                                                          \
      F(ember_spec_params, ngram_max, uint32_t)                                                      \
      F(ember_spec_params, n_threads, uint32_t))                                                     \
    S(ember_spec_stats,                                                                              \
      F(ember_spec_stats, struct_size, uint32_t)                                                     \
      F(ember_spec_stats, k, uint32_t)                                                               \
      F(ember_spec_stats, drafted, uint64_t)                                                         \
      F(ember_spec_stats, accepted, uint64_t)                                                        \
      F(ember_spec_stats, target_passes, uint64_t)                                                   \
      F(ember_spec_stats, generated, uint64_t)                                                       \
      F(ember_spec_stats, acceptance_rate, double)                                                   \
      F(ember_spec_stats, tokens_per_pass, double))                                                  \
    S(ember_engine_params,                                                                           \
      F(ember_engine_params, struct_size, uint32_t)                                                  \
      F(ember_engine_params, n_ctx, uint32_t)                                                        \
      F(ember_engine_params, n_seq_max, uint32_t)                                                    \
      F(ember_engine_params, kv_bytes, uint64_t)                                                     \
      F(ember_engine_params, n_threads, uint32_t)                                                    \
      F(ember_engine_params, n_batch, uint32_t)                                                      \
      F(ember_engine_params, backend, ember_backend_kind)                                            \
      F(ember_engine_params, manual_step, bool)                                                      \
      F(ember_engine_params, kv_type, ember_kv_type)                                                 \
      F(ember_engine_params, reserved, uint32_t)                                                     \
      F(ember_engine_params, device, const ember_device *)                                           \
      F(ember_engine_params, gpu_layers, int32_t)                                                    \
      F(ember_engine_params, experts_on_cpu, int32_t)                                                \
      F(ember_engine_params, gpu_budget_bytes, uint64_t)                                             \
      F(ember_engine_params, speculation, ember_spec_mode)                                           \
      F(ember_engine_params, spec_k, uint32_t)                                                       \
      F(ember_engine_params, spec_ngram_max, uint32_t)                                               \
      F(ember_engine_params, reserved_1_10, uint32_t))                                               \
    S(ember_engine_stats,                                                                            \
      F(ember_engine_stats, struct_size, uint32_t)                                                   \
      F(ember_engine_stats, n_blocks, uint32_t)                                                      \
      F(ember_engine_stats, n_blocks_used, uint32_t)                                                 \
      F(ember_engine_stats, n_blocks_cached, uint32_t)                                               \
      F(ember_engine_stats, block_size, uint32_t)                                                    \
      F(ember_engine_stats, n_running, uint32_t)                                                     \
      F(ember_engine_stats, n_queued, uint32_t)                                                      \
      F(ember_engine_stats, kv_bytes, uint64_t))                                                     \
    S(ember_memory_estimate,                                                                         \
      F(ember_memory_estimate, struct_size, uint32_t)                                                \
      F(ember_memory_estimate, weights_bytes, uint64_t)                                              \
      F(ember_memory_estimate, kv_bytes, uint64_t)                                                   \
      F(ember_memory_estimate, compute_bytes, uint64_t)                                              \
      F(ember_memory_estimate, total_bytes, uint64_t))                                               \
    S(ember_placement,                                                                               \
      F(ember_placement, struct_size, uint32_t)                                                      \
      F(ember_placement, n_layer, uint32_t)                                                          \
      F(ember_placement, gpu_layers, uint32_t)                                                       \
      F(ember_placement, experts_on_cpu, uint32_t)                                                   \
      F(ember_placement, gpu_bytes, uint64_t)                                                        \
      F(ember_placement, cpu_bytes, uint64_t)                                                        \
      F(ember_placement, gpu_budget_bytes, uint64_t)                                                 \
      F(ember_placement, automatic, bool)                                                            \
      F(ember_placement, description, char[512]))                                                   \
    S(ember_grammar_triggers,                                                                        \
      F(ember_grammar_triggers, struct_size, uint32_t)                                               \
      F(ember_grammar_triggers, words, const char *const *)                                          \
      F(ember_grammar_triggers, n_words, size_t)                                                     \
      F(ember_grammar_triggers, tokens, const ember_token *)                                         \
      F(ember_grammar_triggers, n_tokens, size_t)                                                    \
      F(ember_grammar_triggers, once, bool))                                                         \
    S(ember_request_params,                                                                          \
      F(ember_request_params, struct_size, uint32_t)                                                 \
      F(ember_request_params, prompt, const ember_token *)                                           \
      F(ember_request_params, n_prompt, size_t)                                                      \
      F(ember_request_params, max_tokens, uint32_t)                                                  \
      F(ember_request_params, sampling, const ember_sampler_params *)                                \
      F(ember_request_params, on_token, ember_request_token_fn)                                      \
      F(ember_request_params, user_data, void *)                                                     \
      F(ember_request_params, grammar, const ember_grammar *)                                        \
      F(ember_request_params, stop, const char *const *)                                             \
      F(ember_request_params, n_stop, size_t)                                                        \
      F(ember_request_params, speculate, bool))                                                      \
    S(ember_request_stats,                                                                           \
      F(ember_request_stats, struct_size, uint32_t)                                                  \
      F(ember_request_stats, reserved, uint32_t)                                                     \
      F(ember_request_stats, n_tokens, uint64_t)                                                     \
      F(ember_request_stats, decode_steps, uint64_t)                                                 \
      F(ember_request_stats, drafted, uint64_t)                                                      \
      F(ember_request_stats, accepted, uint64_t)                                                     \
      F(ember_request_stats, acceptance_rate, double))                                               \
    S(ember_device_info,                                                                             \
      F(ember_device_info, struct_size, uint32_t)                                                    \
      F(ember_device_info, index, uint32_t)                                                          \
      F(ember_device_info, name, char[128])                                                          \
      F(ember_device_info, type, uint32_t)                                                           \
      F(ember_device_info, score, int32_t))                                                          \
    S(ember_vulkan_device_params,                                                                    \
      F(ember_vulkan_device_params, struct_size, uint32_t)                                           \
      F(ember_vulkan_device_params, device_index, int32_t)                                           \
      F(ember_vulkan_device_params, instance, void *)                                                \
      F(ember_vulkan_device_params, physical_device, void *)                                         \
      F(ember_vulkan_device_params, device, void *)                                                  \
      F(ember_vulkan_device_params, queue, void *)                                                   \
      F(ember_vulkan_device_params, queue_family, uint32_t))                                         \
    S(ember_cuda_device_params,                                                                      \
      F(ember_cuda_device_params, struct_size, uint32_t)                                             \
      F(ember_cuda_device_params, device_index, int32_t)                                             \
      F(ember_cuda_device_params, stream, void *))                                                   \
    S(ember_chat_message,                                                                            \
      F(ember_chat_message, role, const char *)                                                      \
      F(ember_chat_message, content, const char *))                                                  \
    S(ember_cpu_budget,                                                                              \
      F(ember_cpu_budget, struct_size, uint32_t)                                                     \
      F(ember_cpu_budget, max_threads, uint32_t)                                                     \
      F(ember_cpu_budget, priority, int32_t)                                                         \
      F(ember_cpu_budget, flags, uint32_t))                                                          \
    S(ember_logit_bias,                                                                              \
      F(ember_logit_bias, token, ember_token)                                                        \
      F(ember_logit_bias, bias, float))                                                              \
    S(ember_chat_tool,                                                                               \
      F(ember_chat_tool, name, const char *)                                                         \
      F(ember_chat_tool, description, const char *)                                                  \
      F(ember_chat_tool, parameters, const char *))                                                  \
    S(ember_chat_tool_call,                                                                          \
      F(ember_chat_tool_call, id, const char *)                                                      \
      F(ember_chat_tool_call, name, const char *)                                                    \
      F(ember_chat_tool_call, arguments, const char *))                                              \
    S(ember_chat_turn,                                                                               \
      F(ember_chat_turn, role, const char *)                                                         \
      F(ember_chat_turn, content, const char *)                                                      \
      F(ember_chat_turn, reasoning_content, const char *)                                            \
      F(ember_chat_turn, tool_calls, const ember_chat_tool_call *)                                   \
      F(ember_chat_turn, n_tool_calls, size_t)                                                       \
      F(ember_chat_turn, tool_call_id, const char *)                                                 \
      F(ember_chat_turn, name, const char *))                                                        \
    S(ember_chat_params,                                                                             \
      F(ember_chat_params, struct_size, uint32_t)                                                    \
      F(ember_chat_params, tmpl, const char *)                                                       \
      F(ember_chat_params, messages, const ember_chat_turn *)                                        \
      F(ember_chat_params, n_messages, size_t)                                                       \
      F(ember_chat_params, tools, const ember_chat_tool *)                                           \
      F(ember_chat_params, n_tools, size_t)                                                          \
      F(ember_chat_params, add_generation_prompt, bool)                                              \
      F(ember_chat_params, reasoning, ember_reasoning)                                               \
      F(ember_chat_params, tools_json, const char *))                                              \
    S(ember_chat_parser_params,                                                                      \
      F(ember_chat_parser_params, struct_size, uint32_t)                                             \
      F(ember_chat_parser_params, format, ember_chat_format)                                         \
      F(ember_chat_parser_params, tmpl, const char *)                                                \
      F(ember_chat_parser_params, reasoning_open, bool)                                              \
      F(ember_chat_parser_params, tools, const ember_chat_tool *)                                    \
      F(ember_chat_parser_params, n_tools, size_t))                                                  \
    S(ember_chat_delta,                                                                              \
      F(ember_chat_delta, struct_size, uint32_t)                                                     \
      F(ember_chat_delta, content, const char *)                                                     \
      F(ember_chat_delta, content_len, size_t)                                                       \
      F(ember_chat_delta, reasoning, const char *)                                                   \
      F(ember_chat_delta, reasoning_len, size_t)                                                     \
      F(ember_chat_delta, first_call, size_t)                                                        \
      F(ember_chat_delta, n_calls, size_t)                                                           \
      F(ember_chat_delta, malformed, bool))                                                          \
    S(ember_tool_grammar_params,                                                                     \
      F(ember_tool_grammar_params, struct_size, uint32_t)                                            \
      F(ember_tool_grammar_params, format, ember_chat_format)                                        \
      F(ember_tool_grammar_params, tmpl, const char *)                                               \
      F(ember_tool_grammar_params, tools, const ember_chat_tool *)                                   \
      F(ember_tool_grammar_params, n_tools, size_t)                                                  \
      F(ember_tool_grammar_params, choice, ember_tool_choice)                                        \
      F(ember_tool_grammar_params, name, const char *)                                               \
      F(ember_tool_grammar_params, parallel, bool)                                                   \
      F(ember_tool_grammar_params, tools_json, const char *))                                         \
    S(ember_embed_params,                                                                            \
      F(ember_embed_params, struct_size, uint32_t)                                                   \
      F(ember_embed_params, backend, ember_backend_kind)                                             \
      F(ember_embed_params, n_threads, uint32_t)                                                     \
      F(ember_embed_params, n_batch, uint32_t)                                                       \
      F(ember_embed_params, max_tokens, uint32_t)                                                    \
      F(ember_embed_params, truncate, bool)                                                          \
      F(ember_embed_params, normalize, bool)                                                         \
      F(ember_embed_params, dimensions, uint32_t)                                                    \
      F(ember_embed_params, pooling, ember_pooling))                                                 \
    S(ember_embed_request_params,                                                                    \
      F(ember_embed_request_params, struct_size, uint32_t)                                           \
      F(ember_embed_request_params, texts, const char *const *)                                      \
      F(ember_embed_request_params, lengths, const size_t *)                                         \
      F(ember_embed_request_params, tokens, const ember_token *const *)                              \
      F(ember_embed_request_params, n_tokens, const size_t *)                                        \
      F(ember_embed_request_params, n_texts, size_t)                                                 \
      F(ember_embed_request_params, pooling, ember_pooling)                                          \
      F(ember_embed_request_params, dimensions, uint32_t)                                            \
      F(ember_embed_request_params, normalize, bool)                                                 \
      F(ember_embed_request_params, truncate, bool)                                                  \
      F(ember_embed_request_params, max_tokens, uint32_t)                                           \
      F(ember_embed_request_params, query, const char *))

/* ---- enums: E(type, NAME) ---- */
#define EMBER_ENUMS(E)                                                                               \
    E(ember_status, EMBER_OK) E(ember_status, EMBER_END_OF_GENERATION) E(ember_status, EMBER_STOPPED)  \
    E(ember_status, EMBER_ERR_INVALID_ARGUMENT) E(ember_status, EMBER_ERR_OUT_OF_MEMORY)              \
    E(ember_status, EMBER_ERR_IO) E(ember_status, EMBER_ERR_INVALID_MODEL)                            \
    E(ember_status, EMBER_ERR_UNSUPPORTED) E(ember_status, EMBER_ERR_CANCELLED)                       \
    E(ember_status, EMBER_ERR_CONTEXT_FULL) E(ember_status, EMBER_ERR_BUFFER_TOO_SMALL)               \
    E(ember_status, EMBER_ERR_NOT_FOUND) E(ember_status, EMBER_ERR_TYPE_MISMATCH)                     \
    E(ember_status, EMBER_ERR_BACKEND) E(ember_status, EMBER_ERR_INVALID_STATE)                       \
    E(ember_status, EMBER_ERR_CORRUPT_DATA) E(ember_status, EMBER_ERR_GRAMMAR_DEAD_END)               \
    E(ember_status, EMBER_ERR_INTERNAL)                                                               \
    E(ember_log_level, EMBER_LOG_DEBUG) E(ember_log_level, EMBER_LOG_INFO)                            \
    E(ember_log_level, EMBER_LOG_WARN) E(ember_log_level, EMBER_LOG_ERROR)                            \
    E(ember_backend_kind, EMBER_BACKEND_AUTO) E(ember_backend_kind, EMBER_BACKEND_CPU)                \
    E(ember_backend_kind, EMBER_BACKEND_CUDA) E(ember_backend_kind, EMBER_BACKEND_VULKAN)             \
    E(ember_kv_type, EMBER_KV_F16) E(ember_kv_type, EMBER_KV_Q8_0) E(ember_kv_type, EMBER_KV_Q4_0)    \
    E(ember_precision, EMBER_PRECISION_DEFAULT) E(ember_precision, EMBER_PRECISION_HIGH)              \
    E(ember_cpu_priority, EMBER_CPU_PRIORITY_NORMAL) E(ember_cpu_priority, EMBER_CPU_PRIORITY_LOW)    \
    E(ember_cpu_priority, EMBER_CPU_PRIORITY_HIGH)                                                   \
    E(ember_spec_mode, EMBER_SPEC_OFF) E(ember_spec_mode, EMBER_SPEC_DRAFT)                           \
    E(ember_spec_mode, EMBER_SPEC_LOOKUP) E(ember_spec_mode, EMBER_SPEC_MTP)                          \
    E(ember_request_state, EMBER_REQUEST_QUEUED) E(ember_request_state, EMBER_REQUEST_RUNNING)        \
    E(ember_request_state, EMBER_REQUEST_DONE) E(ember_request_state, EMBER_REQUEST_CANCELLED)        \
    E(ember_request_state, EMBER_REQUEST_FAILED)                                                     \
    E(ember_reasoning, EMBER_REASONING_DEFAULT) E(ember_reasoning, EMBER_REASONING_OFF)              \
    E(ember_reasoning, EMBER_REASONING_ON)                                                           \
    E(ember_chat_format, EMBER_CHAT_FORMAT_AUTO) E(ember_chat_format, EMBER_CHAT_FORMAT_CONTENT)     \
    E(ember_chat_format, EMBER_CHAT_FORMAT_HERMES) E(ember_chat_format, EMBER_CHAT_FORMAT_LLAMA3)    \
    E(ember_chat_format, EMBER_CHAT_FORMAT_MISTRAL) E(ember_chat_format, EMBER_CHAT_FORMAT_GPT_OSS)  \
    E(ember_chat_format, EMBER_CHAT_FORMAT_GRANITE) E(ember_chat_format, EMBER_CHAT_FORMAT_PHI4)     \
    E(ember_tool_choice, EMBER_TOOL_CHOICE_AUTO) E(ember_tool_choice, EMBER_TOOL_CHOICE_NONE)        \
    E(ember_tool_choice, EMBER_TOOL_CHOICE_REQUIRED) E(ember_tool_choice, EMBER_TOOL_CHOICE_NAMED)   \
    E(ember_pooling, EMBER_POOLING_MODEL) E(ember_pooling, EMBER_POOLING_MEAN)                       \
    E(ember_pooling, EMBER_POOLING_CLS) E(ember_pooling, EMBER_POOLING_LAST)

/* ---- #define constants: C(NAME) ---- */
#define EMBER_CONSTS(C)                                                                              \
    C(EMBER_ABI_VERSION) C(EMBER_VERSION_MAJOR) C(EMBER_VERSION_MINOR) C(EMBER_VERSION_PATCH)        \
    C(EMBER_TOKENIZE_ADD_SPECIAL) C(EMBER_TOKENIZE_PARSE_SPECIAL)                                    \
    C(EMBER_DETOKENIZE_RENDER_SPECIAL) C(EMBER_DETOKENIZE_KEEP_LEADING_SPACE)                        \
    C(EMBER_CPU_BUDGET_FIXED_THREADS) C(EMBER_GPU_LAYERS_ALL) C(EMBER_GPU_LAYERS_AUTO) C(EMBER_SESSION_KEPT_STATES)

/* ---- callback types: X(ret, name, (args)) ---- */
#define EMBER_CALLBACKS(X)                                                                           \
    X(void, ember_log_fn, (ember_log_level, const char *, void *))                                   \
    X(bool, ember_progress_fn, (float, void *))                                                      \
    X(bool, ember_token_fn, (ember_token, const char *, size_t, void *))                             \
    X(bool, ember_request_token_fn, (ember_request *, ember_token, const char *, size_t, void *))

/* ---- functions: X(ret, name, (args)), in the header's order ---- */
#define EMBER_FUNCTIONS(X) \
    X(const char *, ember_version, (void)) \
    X(uint32_t, ember_abi_version, (void)) \
    X(const char *, ember_status_string, (ember_status)) \
    X(const char *, ember_last_error, (void)) \
    X(void, ember_log_set, (ember_log_fn, void *, ember_log_level)) \
    X(void, ember_model_params_init, (ember_model_params *)) \
    X(ember_status, ember_model_load, (const char *, const ember_model_params *, ember_model **)) \
    X(ember_status, ember_model_load_metadata, (const char *, const ember_model_params *, ember_model **)) \
    X(void, ember_model_free, (ember_model *)) \
    X(void, ember_model_info_init, (ember_model_info *)) \
    X(ember_status, ember_model_get_info, (const ember_model *, ember_model_info *)) \
    X(ember_status, ember_model_meta_count, (const ember_model *, size_t *)) \
    X(ember_status, ember_model_meta_key, (const ember_model *, size_t, const char **)) \
    X(ember_status, ember_model_meta_string, (const ember_model *, const char *, char *, size_t, size_t *)) \
    X(ember_status, ember_model_meta_int, (const ember_model *, const char *, int64_t *)) \
    X(ember_status, ember_model_meta_float, (const ember_model *, const char *, double *)) \
    X(void, ember_tensor_info_init, (ember_tensor_info *)) \
    X(ember_status, ember_model_tensor_count, (const ember_model *, size_t *)) \
    X(ember_status, ember_model_tensor_info, (const ember_model *, size_t, ember_tensor_info *)) \
    X(ember_status, ember_tokenize, (const ember_model *, const char *, size_t, uint32_t, ember_token *, size_t, size_t *)) \
    X(ember_status, ember_token_to_piece, (const ember_model *, ember_token, uint32_t, char *, size_t, size_t *)) \
    X(ember_status, ember_detokenize, (const ember_model *, const ember_token *, size_t, uint32_t, char *, size_t, size_t *)) \
    X(ember_token, ember_token_bos, (const ember_model *)) \
    X(ember_token, ember_token_eos, (const ember_model *)) \
    X(bool, ember_token_is_eog, (const ember_model *, ember_token)) \
    X(void, ember_session_params_init, (ember_session_params *)) \
    X(ember_status, ember_session_create, (const ember_model *, const ember_session_params *, ember_session **)) \
    X(void, ember_session_free, (ember_session *)) \
    X(ember_status, ember_session_fork, (ember_session *, ember_session **)) \
    X(ember_status, ember_session_feed, (ember_session *, const ember_token *, size_t)) \
    X(void, ember_session_cancel, (ember_session *)) \
    X(void, ember_session_cancel_arm, (ember_session *)) \
    X(ember_status, ember_session_logits, (const ember_session *, const float **, size_t *)) \
    X(ember_status, ember_session_position, (const ember_session *, uint32_t *)) \
    X(ember_status, ember_session_context_length, (const ember_session *, uint32_t *)) \
    X(ember_status, ember_session_backend, (const ember_session *, ember_backend_kind *, uint32_t *)) \
    X(ember_status, ember_session_set_precision, (ember_session *, ember_precision)) \
    X(uint32_t, ember_default_thread_count, (void)) \
    X(ember_status, ember_session_truncate, (ember_session *, uint32_t)) \
    X(ember_status, ember_session_save, (const ember_session *, void *, size_t, size_t *)) \
    X(ember_status, ember_session_restore, (ember_session *, const void *, size_t)) \
    X(ember_status, ember_session_save_file, (const ember_session *, const char *)) \
    X(ember_status, ember_session_restore_file, (ember_session *, const char *)) \
    X(void, ember_sampler_params_init, (ember_sampler_params *)) \
    X(ember_status, ember_sampler_create, (const ember_sampler_params *, ember_sampler **)) \
    X(void, ember_sampler_free, (ember_sampler *)) \
    X(ember_status, ember_sampler_sample, (ember_sampler *, const float *, size_t, ember_token *)) \
    X(ember_status, ember_sampler_accept, (ember_sampler *, ember_token)) \
    X(ember_status, ember_sampler_reset, (ember_sampler *)) \
    X(ember_status, ember_sampler_logprobs, (const ember_sampler *, ember_token_logprob *, ember_token_logprob *, size_t, size_t *)) \
    X(ember_status, ember_grammar_create_gbnf, (const ember_model *, const char *, size_t, ember_grammar **)) \
    X(ember_status, ember_grammar_create_json_schema, (const ember_model *, const char *, size_t, ember_grammar **)) \
    X(void, ember_grammar_free, (ember_grammar *)) \
    X(ember_status, ember_grammar_memory, (const ember_grammar *, size_t *)) \
    X(ember_status, ember_sampler_set_grammar, (ember_sampler *, const ember_grammar *)) \
    X(ember_status, ember_generate_next, (ember_session *, ember_sampler *, ember_token *, const char **, size_t *)) \
    X(ember_status, ember_session_set_stop, (ember_session *, const char *const *, size_t)) \
    X(ember_status, ember_session_flush_stop, (ember_session *, const char **, size_t *)) \
    X(void, ember_generate_params_init, (ember_generate_params *)) \
    X(ember_status, ember_generate, (ember_session *, ember_sampler *, const ember_generate_params *, size_t *)) \
    X(void, ember_spec_params_init, (ember_spec_params *)) \
    X(ember_status, ember_session_set_speculation, (ember_session *, const ember_spec_params *)) \
    X(void, ember_spec_stats_init, (ember_spec_stats *)) \
    X(ember_status, ember_session_spec_stats, (const ember_session *, ember_spec_stats *)) \
    X(void, ember_engine_params_init, (ember_engine_params *)) \
    X(ember_status, ember_engine_create, (const ember_model *, const ember_engine_params *, ember_engine **)) \
    X(void, ember_engine_free, (ember_engine *)) \
    X(ember_status, ember_engine_step, (ember_engine *, bool *)) \
    X(void, ember_engine_stats_init, (ember_engine_stats *)) \
    X(ember_status, ember_engine_get_stats, (ember_engine *, ember_engine_stats *)) \
    X(void, ember_memory_estimate_init, (ember_memory_estimate *)) \
    X(ember_status, ember_estimate_memory, (const ember_model *, const ember_engine_params *, ember_memory_estimate *)) \
    X(ember_status, ember_estimate_memory_file, (const char *, const ember_engine_params *, ember_memory_estimate *)) \
    X(ember_status, ember_engine_pin_prefix, (ember_engine *, const ember_token *, size_t)) \
    X(void, ember_request_params_init, (ember_request_params *)) \
    X(ember_status, ember_request_submit, (ember_engine *, const ember_request_params *, ember_request **)) \
    X(ember_status, ember_request_poll, (ember_request *, ember_token *, size_t, size_t *, ember_request_state *)) \
    X(ember_status, ember_request_text, (ember_request *, char *, size_t, size_t *)) \
    X(ember_status, ember_request_wait, (ember_request *, uint32_t)) \
    X(ember_status, ember_request_cancel, (ember_request *)) \
    X(ember_status, ember_request_error, (ember_request *, ember_status *, const char **)) \
    X(ember_status, ember_request_logprobs, (ember_request *, size_t, ember_token_logprob *, ember_token_logprob *, size_t, size_t *)) \
    X(void, ember_request_free, (ember_request *)) \
    X(void, ember_request_stats_init, (ember_request_stats *)) \
    X(ember_status, ember_request_get_stats, (ember_request *, ember_request_stats *)) \
    X(void, ember_device_info_init, (ember_device_info *)) \
    X(ember_status, ember_backend_devices, (ember_backend_kind, ember_device_info *, size_t, size_t *)) \
    X(ember_status, ember_devices, (const ember_device **, size_t, size_t *)) \
    X(ember_status, ember_device_get_info, (const ember_device *, ember_device_info *, ember_backend_kind *)) \
    X(ember_status, ember_session_device, (const ember_session *, const ember_device **)) \
    X(ember_status, ember_engine_device, (const ember_engine *, const ember_device **)) \
    X(void, ember_vulkan_device_params_init, (ember_vulkan_device_params *)) \
    X(ember_status, ember_vulkan_set_device, (const ember_vulkan_device_params *)) \
    X(void, ember_cuda_device_params_init, (ember_cuda_device_params *)) \
    X(ember_status, ember_cuda_set_device, (const ember_cuda_device_params *)) \
    X(ember_status, ember_chat_apply_template, (const ember_model *, const char *, const ember_chat_message *, size_t, bool, char *, size_t, size_t *)) \
    X(void, ember_cpu_budget_init, (ember_cpu_budget *)) \
    X(ember_status, ember_cpu_budget_set, (const ember_cpu_budget *)) \
    X(ember_status, ember_cpu_budget_get, (ember_cpu_budget *)) \
    X(void, ember_chat_params_init, (ember_chat_params *)) \
    X(ember_status, ember_chat_apply_template_v2, (const ember_model *, const ember_chat_params *, char *, size_t, size_t *)) \
    X(ember_status, ember_chat_format_detect, (const ember_model *, const char *, ember_chat_format *)) \
    X(const char *, ember_chat_format_name, (ember_chat_format)) \
    X(void, ember_chat_parser_params_init, (ember_chat_parser_params *)) \
    X(ember_status, ember_chat_parser_create, (const ember_model *, const ember_chat_parser_params *, ember_chat_parser **)) \
    X(void, ember_chat_parser_free, (ember_chat_parser *)) \
    X(ember_status, ember_chat_parser_feed, (ember_chat_parser *, const char *, size_t)) \
    X(ember_status, ember_chat_parser_finish, (ember_chat_parser *)) \
    X(void, ember_chat_delta_init, (ember_chat_delta *)) \
    X(ember_status, ember_chat_parser_take, (ember_chat_parser *, ember_chat_delta *)) \
    X(ember_status, ember_chat_parser_result, (const ember_chat_parser *, ember_chat_delta *)) \
    X(ember_status, ember_chat_parser_call, (const ember_chat_parser *, size_t, ember_chat_tool_call *)) \
    X(ember_status, ember_chat_parser_feed_request, (ember_chat_parser *, ember_request *, ember_request_state *)) \
    X(ember_status, ember_sampler_params_from_model, (const ember_model *, ember_sampler_params *, size_t *)) \
    X(ember_status, ember_sampler_set_logit_bias, (ember_sampler *, const ember_logit_bias *, size_t)) \
    X(void, ember_embed_params_init, (ember_embed_params *)) \
    X(ember_status, ember_embedder_create, (const ember_model *, const ember_embed_params *, ember_embedder **)) \
    X(void, ember_embedder_free, (ember_embedder *)) \
    X(size_t, ember_embedder_dim, (const ember_embedder *)) \
    X(bool, ember_embedder_is_reranker, (const ember_embedder *)) \
    X(ember_status, ember_embed, (ember_embedder *, const char *const *, const size_t *, size_t, float *, size_t)) \
    X(ember_status, ember_embed_tokens, (ember_embedder *, const ember_token *const *, const size_t *, size_t, float *, size_t)) \
    X(ember_status, ember_rerank, (ember_embedder *, const char *, const char *const *, size_t, float *)) \
    X(void, ember_tool_grammar_params_init, (ember_tool_grammar_params *)) \
    X(ember_status, ember_chat_tool_grammar, (const ember_model *, const ember_tool_grammar_params *, ember_grammar **)) \
    X(ember_status, ember_chat_tool_prefix, (const ember_model *, const ember_tool_grammar_params *, char *, size_t, size_t *)) \
    X(void, ember_placement_init, (ember_placement *)) \
    X(ember_status, ember_session_placement, (const ember_session *, ember_placement *)) \
    X(ember_status, ember_engine_placement, (ember_engine *, ember_placement *)) \
    X(ember_status, ember_estimate_placement, (const ember_model *, const ember_engine_params *, ember_placement *)) \
    X(void, ember_grammar_triggers_init, (ember_grammar_triggers *)) \
    X(ember_status, ember_grammar_create_lazy, (const ember_model *, const char *, size_t, const ember_grammar_triggers *, ember_grammar **)) \
    X(ember_status, ember_sampler_grammar_constraining, (const ember_sampler *, bool *)) \
    X(void, ember_embed_request_params_init, (ember_embed_request_params *)) \
    X(ember_status, ember_engine_submit_embed, (ember_engine *, const ember_embed_request_params *, ember_request **)) \
    X(size_t, ember_request_embedding_dim, (const ember_request *)) \
    X(ember_status, ember_request_embeddings, (ember_request *, float *, size_t, size_t *))

/* Every entry is checked by the compiler: a wrong type here is a build error, not a wrong table. */
#define CHECK_FN(ret, name, args) _Static_assert(SAME_TYPE(&name, ret(*) args), #name " has another type in ember.h");
EMBER_FUNCTIONS(CHECK_FN)
#define CHECK_CB(ret, name, args) _Static_assert(SAME_TYPE((name)0, ret(*) args), #name " has another type in ember.h");
EMBER_CALLBACKS(CHECK_CB)
#define CHECK_FIELD(s, f, t) _Static_assert(SAME_TYPE(((s *)0)->f, t), #s "." #f " has another type in ember.h");
#define CHECK_STRUCT(s, fields) fields
EMBER_STRUCTS(CHECK_STRUCT, CHECK_FIELD)
#define CHECK_ENUM(t, n) _Static_assert(SAME_TYPE(n, int) || SAME_TYPE((t)n, t), #n);
EMBER_ENUMS(CHECK_ENUM)

static int failures = 0;

/* "(a, b, c)" -> "a, b, c": the argument list without its parentheses. */
static void print_args(const char *args) {
    size_t n = strlen(args);
    printf("%.*s\n", (int)(n - 2), args + 1);
}

/* Fields must tile their struct: each at the first offset its alignment allows after the one before,
 * the struct ending at the last field's end rounded up to the struct's alignment. A field missing here
 * would leave a gap (or a short struct) and fail this. */
typedef struct field_walk { const char *name; size_t end; } field_walk;

static void field_next(field_walk *w, const char *field, size_t offset, size_t size, size_t align) {
    size_t expect = (w->end + align - 1) / align * align;
    if (offset != expect) {
        fprintf(stderr, "ember_layout: %s.%s at offset %zu, expected %zu: a field of ember.h is missing "
                        "from ember_layout.c, or the order differs\n", w->name, field, offset, expect);
        failures++;
    }
    w->end = offset + size;
}

static void struct_end(field_walk *w, size_t size, size_t align) {
    size_t expect = (w->end + align - 1) / align * align;
    if (expect != size) {
        fprintf(stderr, "ember_layout: %s ends at %zu but is %zu bytes: a field is missing from "
                        "ember_layout.c\n", w->name, expect, size);
        failures++;
    }
}

int main(void) {
    printf("# ember.h %s, ABI %d: generated by bindings/layout/ember_layout.c; do not edit\n",
           EMBER_VERSION_STRING, EMBER_ABI_VERSION);
#define PRINT_FIELD(s, f, t)                                                                         \
    printf("field %s %s %zu %zu %s\n", #s, #f, offsetof(s, f), sizeof(((s *)0)->f), #t);             \
    field_next(&walk, #f, offsetof(s, f), sizeof(((s *)0)->f), _Alignof(t));
#define PRINT_STRUCT(s, fields)                                                                      \
    {                                                                                                \
        field_walk walk = {#s, 0};                                                                   \
        printf("struct %s %zu %zu\n", #s, sizeof(s), _Alignof(s));                                   \
        fields struct_end(&walk, sizeof(s), _Alignof(s));                                            \
    }
    EMBER_STRUCTS(PRINT_STRUCT, PRINT_FIELD)
#define PRINT_ENUM(t, n) printf("enum %s %s %d\n", #t, #n, (int)n);
    EMBER_ENUMS(PRINT_ENUM)
#define PRINT_CONST(n) printf("const %s %lld\n", #n, (long long)(n));
    EMBER_CONSTS(PRINT_CONST)
#define PRINT_CB(ret, name, args) printf("callback %s %s|", #name, #ret); print_args(#args);
    EMBER_CALLBACKS(PRINT_CB)
#define PRINT_FN(ret, name, args) printf("fn %s %s|", #name, #ret); print_args(#args);
    EMBER_FUNCTIONS(PRINT_FN)
    return failures ? 1 : 0;
}
