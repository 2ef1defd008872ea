using System;
using System.Runtime.InteropServices;

// Every function of ember.h, declared once, named exactly as in C (the layout test matches them with
// bindings/layout/ember.layout by that name and checks each parameter's C# type against the C type).
// Conventions: strings go in as NUL-terminated UTF-8 byte[] (encoded by Utf8.cs, so the result is the
// same on Mono, .NET and .NET Framework, whose default string marshalling differs); strings come out
// as IntPtr, never string, because the marshaller would free memory that the library owns. Handles
// that the binding owns are SafeHandles; the *_free functions take IntPtr because the SafeHandles
// call them from ReleaseHandle. size_t is UIntPtr.
namespace Ember.Native
{
    internal static class NativeMethods
    {
        internal const string Library = "ember";
        private const CallingConvention Cdecl = CallingConvention.Cdecl;

        // ---- versions, status, logging
        [DllImport(Library, CallingConvention = Cdecl)] internal static extern IntPtr ember_version();
        [DllImport(Library, CallingConvention = Cdecl)] internal static extern uint ember_abi_version();
        [DllImport(Library, CallingConvention = Cdecl)] internal static extern IntPtr ember_status_string(Status status);
        [DllImport(Library, CallingConvention = Cdecl)] internal static extern IntPtr ember_last_error();
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern void ember_log_set(IntPtr fn, IntPtr user_data, LogLevel min_level);

        // ---- models
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern void ember_model_params_init(ref ember_model_params p);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_model_load(byte[] path, ref ember_model_params p, out ModelHandle model);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_model_load_metadata(byte[] path, ref ember_model_params p, out ModelHandle model);
        [DllImport(Library, CallingConvention = Cdecl)] internal static extern void ember_model_free(IntPtr model);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern void ember_model_info_init(ref ember_model_info info);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_model_get_info(ModelHandle model, ref ember_model_info info);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_model_meta_count(ModelHandle model, out UIntPtr count);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_model_meta_key(ModelHandle model, UIntPtr i, out IntPtr key);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_model_meta_string(ModelHandle model, byte[] key, byte[] buf, UIntPtr capacity,
                                                              out UIntPtr out_len);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_model_meta_int(ModelHandle model, byte[] key, out long value);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_model_meta_float(ModelHandle model, byte[] key, out double value);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern void ember_tensor_info_init(ref ember_tensor_info info);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_model_tensor_count(ModelHandle model, out UIntPtr count);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_model_tensor_info(ModelHandle model, UIntPtr i, ref ember_tensor_info info);

        // ---- tokenizer
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_tokenize(ModelHandle model, byte[] text, UIntPtr text_len, uint flags,
                                                     int[] tokens, UIntPtr capacity, out UIntPtr out_count);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_token_to_piece(ModelHandle model, int token, uint flags, byte[] buf,
                                                           UIntPtr capacity, out UIntPtr out_len);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_detokenize(ModelHandle model, int[] tokens, UIntPtr n_tokens, uint flags,
                                                       byte[] buf, UIntPtr capacity, out UIntPtr out_len);
        [DllImport(Library, CallingConvention = Cdecl)] internal static extern int ember_token_bos(ModelHandle model);
        [DllImport(Library, CallingConvention = Cdecl)] internal static extern int ember_token_eos(ModelHandle model);
        [DllImport(Library, CallingConvention = Cdecl)]
        [return: MarshalAs(UnmanagedType.I1)]
        internal static extern bool ember_token_is_eog(ModelHandle model, int token);

        // ---- sessions
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern void ember_session_params_init(ref ember_session_params p);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_session_create(ModelHandle model, ref ember_session_params p,
                                                           out SessionHandle session);
        [DllImport(Library, CallingConvention = Cdecl)] internal static extern void ember_session_free(IntPtr session);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_session_fork(SessionHandle session, out SessionHandle fork);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_session_feed(SessionHandle session, int[] tokens, UIntPtr n_tokens);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern void ember_session_cancel(SessionHandle session);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern void ember_session_cancel_arm(SessionHandle session);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_session_logits(SessionHandle session, out IntPtr logits, out UIntPtr n_vocab);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_session_position(SessionHandle session, out uint position);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_session_context_length(SessionHandle session, out uint n_ctx);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_session_backend(SessionHandle session, out BackendKind backend,
                                                            out uint n_threads);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_session_set_precision(SessionHandle session, Precision precision);
        [DllImport(Library, CallingConvention = Cdecl)] internal static extern uint ember_default_thread_count();
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_session_truncate(SessionHandle session, uint n_tokens);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_session_save(SessionHandle session, byte[] buf, UIntPtr capacity,
                                                         out UIntPtr out_len);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_session_restore(SessionHandle session, byte[] data, UIntPtr size);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_session_save_file(SessionHandle session, byte[] path);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_session_restore_file(SessionHandle session, byte[] path);

        // ---- samplers and generation
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern void ember_sampler_params_init(ref ember_sampler_params p);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_sampler_create(ref ember_sampler_params p, out SamplerHandle sampler);
        [DllImport(Library, CallingConvention = Cdecl)] internal static extern void ember_sampler_free(IntPtr sampler);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_sampler_sample(SamplerHandle sampler, float[] logits, UIntPtr n_vocab,
                                                           out int token);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_sampler_accept(SamplerHandle sampler, int token);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_sampler_reset(SamplerHandle sampler);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_sampler_logprobs(SamplerHandle sampler, out ember_token_logprob sampled,
                                                             [In, Out] ember_token_logprob[] top, UIntPtr capacity,
                                                             out UIntPtr out_count);

        // ---- grammars (EMBER_1.4)
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_grammar_create_gbnf(ModelHandle model, byte[] gbnf, UIntPtr len,
                                                                out GrammarHandle grammar);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_grammar_create_json_schema(ModelHandle model, byte[] schema, UIntPtr len,
                                                                       out GrammarHandle grammar);
        [DllImport(Library, CallingConvention = Cdecl)] internal static extern void ember_grammar_free(IntPtr grammar);
        [DllImport(Library, CallingConvention = Cdecl)] internal static extern Status ember_grammar_memory(GrammarHandle grammar, out UIntPtr out_bytes);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_sampler_set_grammar(SamplerHandle sampler, GrammarHandle grammar);
        // ---- lazy grammars (EMBER_1.10)
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern void ember_grammar_triggers_init(ref ember_grammar_triggers triggers);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_grammar_create_lazy(ModelHandle model, byte[] gbnf, UIntPtr len,
                                                                ref ember_grammar_triggers triggers, out GrammarHandle grammar);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_sampler_grammar_constraining(SamplerHandle sampler,
                                                                         [MarshalAs(UnmanagedType.I1)] out bool constraining);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_generate_next(SessionHandle session, SamplerHandle sampler, out int token,
                                                          out IntPtr text, out UIntPtr text_len);
        // stop: an array of pointers to NUL-terminated UTF-8 strings (StopStrings marshals it), or IntPtr.Zero.
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_session_set_stop(SessionHandle session, IntPtr stop, UIntPtr n_stop);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_session_flush_stop(SessionHandle session, out IntPtr text, out UIntPtr text_len);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern void ember_generate_params_init(ref ember_generate_params p);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_generate(SessionHandle session, SamplerHandle sampler,
                                                     ref ember_generate_params p, out UIntPtr out_count);

        // ---- speculative decoding
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern void ember_spec_params_init(ref ember_spec_params p);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_session_set_speculation(SessionHandle session, ref ember_spec_params p);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern void ember_spec_stats_init(ref ember_spec_stats stats);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_session_spec_stats(SessionHandle session, ref ember_spec_stats stats);

        // ---- engine and requests
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern void ember_engine_params_init(ref ember_engine_params p);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_engine_create(ModelHandle model, ref ember_engine_params p,
                                                          out EngineHandle engine);
        [DllImport(Library, CallingConvention = Cdecl)] internal static extern void ember_engine_free(IntPtr engine);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_engine_step(EngineHandle engine,
                                                        [MarshalAs(UnmanagedType.I1)] out bool busy);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern void ember_engine_stats_init(ref ember_engine_stats stats);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_engine_get_stats(EngineHandle engine, ref ember_engine_stats stats);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern void ember_memory_estimate_init(ref ember_memory_estimate estimate);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_estimate_memory(ModelHandle model, ref ember_engine_params p,
                                                            ref ember_memory_estimate estimate);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_estimate_memory_file(byte[] path, ref ember_engine_params p,
                                                                 ref ember_memory_estimate estimate);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern void ember_placement_init(ref ember_placement placement);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_session_placement(SessionHandle session, ref ember_placement placement);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_engine_placement(EngineHandle engine, ref ember_placement placement);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_estimate_placement(ModelHandle model, ref ember_engine_params p,
                                                               ref ember_placement placement);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_engine_pin_prefix(EngineHandle engine, int[] tokens, UIntPtr n_tokens);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern void ember_request_params_init(ref ember_request_params p);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_request_submit(EngineHandle engine, ref ember_request_params p,
                                                           out RequestHandle request);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_request_poll(RequestHandle request, int[] tokens, UIntPtr capacity,
                                                         out UIntPtr out_count, out RequestState state);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_request_text(RequestHandle request, byte[] buf, UIntPtr capacity,
                                                         out UIntPtr out_len);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_request_wait(RequestHandle request, uint timeout_ms);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_request_cancel(RequestHandle request);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_request_error(RequestHandle request, out Status status, out IntPtr message);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_request_logprobs(RequestHandle request, UIntPtr i, out ember_token_logprob sampled,
                                                             [In, Out] ember_token_logprob[] top, UIntPtr capacity,
                                                             out UIntPtr out_count);
        [DllImport(Library, CallingConvention = Cdecl)] internal static extern void ember_request_free(IntPtr request);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern void ember_request_stats_init(ref ember_request_stats stats);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_request_get_stats(RequestHandle request, ref ember_request_stats stats);

        // ---- backend devices
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern void ember_device_info_init(ref ember_device_info info);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_backend_devices(BackendKind backend, [In, Out] ember_device_info[] devices,
                                                            UIntPtr capacity, out UIntPtr out_count);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_devices(IntPtr devices, UIntPtr capacity, out UIntPtr out_count);  // devices: const ember_device *[capacity]
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_device_get_info(IntPtr device, ref ember_device_info info, out BackendKind backend);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_session_device(SessionHandle session, out IntPtr device);  // device: const ember_device *
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_engine_device(EngineHandle engine, out IntPtr device);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern void ember_vulkan_device_params_init(ref ember_vulkan_device_params p);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_vulkan_set_device(ref ember_vulkan_device_params p);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern void ember_cuda_device_params_init(ref ember_cuda_device_params p);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_cuda_set_device(ref ember_cuda_device_params p);

        // ---- CPU budget (EMBER_1.4)
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern void ember_cpu_budget_init(ref ember_cpu_budget budget);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_cpu_budget_set(ref ember_cpu_budget budget);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_cpu_budget_get(ref ember_cpu_budget budget);

        // ---- chat templates (EMBER_1.3)
        // messages: a blittable array (the marshaller pins it); its strings are pinned by the caller.
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_chat_apply_template(ModelHandle model, byte[] tmpl,
                                                                ember_chat_message[] messages, UIntPtr n_messages,
                                                                [MarshalAs(UnmanagedType.I1)] bool add_generation_prompt,
                                                                byte[] buf, UIntPtr capacity, out UIntPtr out_len);

        // ---- tool calls and reasoning (EMBER_1.8): raw pointers; the structs' strings are pinned by the caller.
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern void ember_chat_params_init(ref ember_chat_params p);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_chat_apply_template_v2(ModelHandle model, ref ember_chat_params p,
                                                                   byte[] buf, UIntPtr capacity, out UIntPtr out_len);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_chat_format_detect(ModelHandle model, byte[] tmpl, out ChatFormat format);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern IntPtr ember_chat_format_name(ChatFormat format);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern void ember_chat_parser_params_init(ref ember_chat_parser_params p);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_chat_parser_create(ModelHandle model, ref ember_chat_parser_params p,
                                                               out IntPtr parser);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern void ember_chat_parser_free(IntPtr parser);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_chat_parser_feed(IntPtr parser, byte[] text, UIntPtr len);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_chat_parser_finish(IntPtr parser);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern void ember_chat_delta_init(ref ember_chat_delta delta);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_chat_parser_take(IntPtr parser, ref ember_chat_delta delta);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_chat_parser_result(IntPtr parser, ref ember_chat_delta delta);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_chat_parser_call(IntPtr parser, UIntPtr i, out ember_chat_tool_call call);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_chat_parser_feed_request(IntPtr parser, IntPtr request, out RequestState state);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_sampler_set_logit_bias(SamplerHandle sampler, ember_logit_bias[] bias, UIntPtr n);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_sampler_params_from_model(ModelHandle model, ref ember_sampler_params p,
                                                                      out UIntPtr count);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern void ember_tool_grammar_params_init(ref ember_tool_grammar_params p);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_chat_tool_grammar(ModelHandle model, ref ember_tool_grammar_params p,
                                                              out GrammarHandle grammar);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_chat_tool_prefix(ModelHandle model, ref ember_tool_grammar_params p,
                                                             byte[] buf, UIntPtr capacity, out UIntPtr out_len);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern void ember_embed_params_init(ref ember_embed_params p);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_embedder_create(ModelHandle model, ref ember_embed_params p, out IntPtr embedder);
        [DllImport(Library, CallingConvention = Cdecl)] internal static extern void ember_embedder_free(IntPtr embedder);
        [DllImport(Library, CallingConvention = Cdecl)] internal static extern UIntPtr ember_embedder_dim(IntPtr embedder);
        [DllImport(Library, CallingConvention = Cdecl)]
        [return: MarshalAs(UnmanagedType.I1)]
        internal static extern bool ember_embedder_is_reranker(IntPtr embedder);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_embed(IntPtr embedder, IntPtr texts, IntPtr lengths, UIntPtr n_texts,
                                                  [In, Out] float[] out_vectors, UIntPtr capacity);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_embed_tokens(IntPtr embedder, IntPtr tokens, IntPtr n_tokens, UIntPtr n_texts,
                                                         [In, Out] float[] out_vectors, UIntPtr capacity);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_rerank(IntPtr embedder, byte[] query, IntPtr docs, UIntPtr n_docs,
                                                   [In, Out] float[] scores);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern void ember_embed_request_params_init(ref ember_embed_request_params p);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_engine_submit_embed(EngineHandle engine, ref ember_embed_request_params p,
                                                                out RequestHandle request);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern UIntPtr ember_request_embedding_dim(RequestHandle request);
        [DllImport(Library, CallingConvention = Cdecl)]
        internal static extern Status ember_request_embeddings(RequestHandle request, [In, Out] float[] out_vectors,
                                                               UIntPtr capacity, out UIntPtr out_count);
    }
}
