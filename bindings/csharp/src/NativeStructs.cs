using System;
using System.Runtime.InteropServices;

// The structs of ember.h, declared again field for field. Rule the layout test relies on: each struct
// and each field carries its C name verbatim, and each field has the C# type that the test's mapping
// table allows for the field's C type (pointers and callbacks as IntPtr, bool as a one-byte I1, fixed
// arrays as ByValArray). Marshal.SizeOf/OffsetOf of these must equal bindings/layout/ember.layout.
// Callers of the public API never see them; Model, Session, Sampler, Engine and Request fill them.
#pragma warning disable 0649, 0169 // fields written by native code or by field name only

namespace Ember.Native
{
    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_model_params
    {
        public uint struct_size;
        public IntPtr progress;            // ember_progress_fn
        public IntPtr progress_user_data;
        [MarshalAs(UnmanagedType.I1)] public bool vocab_only;
        public IntPtr log;                 // ember_log_fn
        public IntPtr log_user_data;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_model_info
    {
        public uint struct_size;
        public IntPtr architecture;        // const char *, owned by the model
        public IntPtr name;
        public ulong n_params;
        public ulong size_bytes;
        public uint n_ctx_train;
        public uint n_vocab;
        public uint n_embd;
        public uint n_layer;
        public uint n_head;
        public uint n_head_kv;
        public ulong kv_bytes_per_token;
        public ulong state_bytes_per_sequence;
        public uint n_kv_layers;
        public uint n_recurrent_layers;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_tensor_info
    {
        public uint struct_size;
        public IntPtr name;
        public IntPtr type;
        public uint n_dims;
        [MarshalAs(UnmanagedType.ByValArray, SizeConst = 4)] public long[] dims;
        public ulong n_bytes;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_session_params
    {
        public uint struct_size;
        public uint n_ctx;
        public uint n_threads;
        public uint n_batch;
        public ulong seed;
        public BackendKind backend;
        public uint reserved;
        public uint n_seq_max;
        public KvType kv_type;
        public IntPtr device;   // const ember_device * (EMBER_1.4)
        public int gpu_layers;          // EMBER_1.9: placement across devices
        public int experts_on_cpu;
        public ulong gpu_budget_bytes;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_sampler_params
    {
        public uint struct_size;
        public float temperature;
        public int top_k;
        public float top_p;
        public float min_p;
        public float repeat_penalty;
        public float frequency_penalty;
        public float presence_penalty;
        public int penalty_last_n;
        public ulong seed;
        public int n_logprobs;             // EMBER_1.4
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_token_logprob
    {
        public int token;
        public float logprob;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_generate_params
    {
        public uint struct_size;
        public uint max_tokens;
        public IntPtr on_token;            // ember_token_fn
        public IntPtr user_data;
        [MarshalAs(UnmanagedType.I1)] public bool speculate;
        [MarshalAs(UnmanagedType.ByValArray, SizeConst = 7)] public byte[] reserved_1_4;   // EMBER_1.4: keep 0
        public IntPtr grammar;             // const ember_grammar *
        public IntPtr stop;                // const char *const *
        public UIntPtr n_stop;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_spec_params
    {
        public uint struct_size;
        public SpecMode mode;
        public IntPtr draft_model;
        public uint k;
        [MarshalAs(UnmanagedType.I1)] public bool adaptive;
        public uint k_max;
        public uint ngram_max;
        public uint n_threads;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_spec_stats
    {
        public uint struct_size;
        public uint k;
        public ulong drafted;
        public ulong accepted;
        public ulong target_passes;
        public ulong generated;
        public double acceptance_rate;
        public double tokens_per_pass;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_engine_params
    {
        public uint struct_size;
        public uint n_ctx;
        public uint n_seq_max;
        public ulong kv_bytes;
        public uint n_threads;
        public uint n_batch;
        public BackendKind backend;
        [MarshalAs(UnmanagedType.I1)] public bool manual_step;
        public KvType kv_type;
        public uint reserved;
        public IntPtr device;   // const ember_device * (EMBER_1.4)
        public int gpu_layers;          // EMBER_1.9: placement across devices
        public int experts_on_cpu;
        public ulong gpu_budget_bytes;
        public SpecMode speculation;    // EMBER_1.10: speculative decoding for the requests
        public uint spec_k;
        public uint spec_ngram_max;
        public uint reserved_1_10;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_placement
    {
        public uint struct_size;
        public uint n_layer;
        public uint gpu_layers;
        public uint experts_on_cpu;
        public ulong gpu_bytes;
        public ulong cpu_bytes;
        public ulong gpu_budget_bytes;
        [MarshalAs(UnmanagedType.I1)] public bool automatic;
        [MarshalAs(UnmanagedType.ByValArray, SizeConst = 512)] public byte[] description;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_engine_stats
    {
        public uint struct_size;
        public uint n_blocks;
        public uint n_blocks_used;
        public uint n_blocks_cached;
        public uint block_size;
        public uint n_running;
        public uint n_queued;
        public ulong kv_bytes;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_memory_estimate
    {
        public uint struct_size;
        public ulong weights_bytes;
        public ulong kv_bytes;
        public ulong compute_bytes;
        public ulong total_bytes;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_request_params
    {
        public uint struct_size;
        public IntPtr prompt;              // const ember_token *, copied at submit
        public UIntPtr n_prompt;
        public uint max_tokens;
        public IntPtr sampling;            // const ember_sampler_params *, copied at submit
        public IntPtr on_token;            // ember_request_token_fn
        public IntPtr user_data;
        public IntPtr grammar;             // EMBER_1.4: const ember_grammar *
        public IntPtr stop;                // const char *const *
        public UIntPtr n_stop;
        [MarshalAs(UnmanagedType.I1)] public bool speculate;   // EMBER_1.10
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_request_stats
    {
        public uint struct_size;
        public uint reserved;
        public ulong n_tokens;
        public ulong decode_steps;
        public ulong drafted;
        public ulong accepted;
        public double acceptance_rate;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_device_info
    {
        public uint struct_size;
        public uint index;
        [MarshalAs(UnmanagedType.ByValArray, SizeConst = 128)] public byte[] name;
        public uint type;
        public int score;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_vulkan_device_params
    {
        public uint struct_size;
        public int device_index;
        public IntPtr instance;
        public IntPtr physical_device;
        public IntPtr device;
        public IntPtr queue;
        public uint queue_family;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_cuda_device_params
    {
        public uint struct_size;
        public int device_index;
        public IntPtr stream;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_cpu_budget
    {
        public uint struct_size;
        public uint max_threads;
        public int priority;             // an ember_cpu_priority (CpuPriority)
        public uint flags;
    }

    // An element of the array ember_chat_apply_template reads. The strings are NUL-terminated UTF-8 that
    // the caller keeps alive and unmoved (pinned) for the whole call (Model.ApplyChatTemplate does).
    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_chat_message
    {
        public IntPtr role;                // const char *
        public IntPtr content;             // const char *
    }

    // An element of the array ember_sampler_set_logit_bias reads (EMBER_1.8).
    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_logit_bias
    {
        public int token;
        public float bias;
    }

    // ---- tool calls and reasoning (EMBER_1.8): strings are NUL-terminated UTF-8 the caller pins.
    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_chat_tool
    {
        public IntPtr name;                // const char *
        public IntPtr description;         // const char *
        public IntPtr parameters;          // const char *
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_chat_tool_call
    {
        public IntPtr id;                  // const char *
        public IntPtr name;                // const char *
        public IntPtr arguments;           // const char *
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_chat_turn
    {
        public IntPtr role;                // const char *
        public IntPtr content;             // const char *
        public IntPtr reasoning_content;   // const char *
        public IntPtr tool_calls;          // const ember_chat_tool_call *
        public UIntPtr n_tool_calls;
        public IntPtr tool_call_id;        // const char *
        public IntPtr name;                // const char *
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_chat_params
    {
        public uint struct_size;
        public IntPtr tmpl;                // const char *
        public IntPtr messages;            // const ember_chat_turn *
        public UIntPtr n_messages;
        public IntPtr tools;               // const ember_chat_tool *
        public UIntPtr n_tools;
        [MarshalAs(UnmanagedType.I1)] public bool add_generation_prompt;
        public Reasoning reasoning;
        public IntPtr tools_json;          // const char *
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_chat_parser_params
    {
        public uint struct_size;
        public ChatFormat format;
        public IntPtr tmpl;                // const char *
        [MarshalAs(UnmanagedType.I1)] public bool reasoning_open;
        public IntPtr tools;               // const ember_chat_tool *
        public UIntPtr n_tools;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_chat_delta
    {
        public uint struct_size;
        public IntPtr content;             // const char *, content_len bytes
        public UIntPtr content_len;
        public IntPtr reasoning;           // const char *, reasoning_len bytes
        public UIntPtr reasoning_len;
        public UIntPtr first_call;
        public UIntPtr n_calls;
        [MarshalAs(UnmanagedType.I1)] public bool malformed;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_tool_grammar_params
    {
        public uint struct_size;
        public ChatFormat format;
        public IntPtr tmpl;                // const char *
        public IntPtr tools;               // const ember_chat_tool *
        public UIntPtr n_tools;
        public ToolChoice choice;
        public IntPtr name;                // const char *
        [MarshalAs(UnmanagedType.I1)] public bool parallel;
        public IntPtr tools_json;          // const char *
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_embed_params
    {
        public uint struct_size;
        public BackendKind backend;
        public uint n_threads;
        public uint n_batch;
        public uint max_tokens;
        [MarshalAs(UnmanagedType.I1)] public bool truncate;
        [MarshalAs(UnmanagedType.I1)] public bool normalize;
        public uint dimensions;
        public Pooling pooling;
    }

    // What switches a lazy grammar on (ember_grammar_create_lazy, EMBER_1.10).
    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_grammar_triggers
    {
        public uint struct_size;
        public IntPtr words;               // const char *const *
        public UIntPtr n_words;
        public IntPtr tokens;              // const ember_token *
        public UIntPtr n_tokens;
        [MarshalAs(UnmanagedType.I1)] public bool once;
    }

    // An embedding request on an engine (ember_engine_submit_embed, EMBER_1.11).
    [StructLayout(LayoutKind.Sequential)]
    internal struct ember_embed_request_params
    {
        public uint struct_size;
        public IntPtr texts;               // const char *const *
        public IntPtr lengths;             // const size_t *
        public IntPtr tokens;              // const ember_token *const *
        public IntPtr n_tokens;            // const size_t *
        public UIntPtr n_texts;
        public Pooling pooling;
        public uint dimensions;
        [MarshalAs(UnmanagedType.I1)] public bool normalize;
        [MarshalAs(UnmanagedType.I1)] public bool truncate;
        public uint max_tokens;
        public IntPtr query;               // const char * (EMBER_1.11): a reranking model's query
    }
}
