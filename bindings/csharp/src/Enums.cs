namespace Ember
{
    /// <summary>Log levels (ember_log_level).</summary>
    [NativeName("ember_log_level")]
    public enum LogLevel
    {
        [NativeName("EMBER_LOG_DEBUG")] Debug = 0,
        [NativeName("EMBER_LOG_INFO")] Info = 1,
        [NativeName("EMBER_LOG_WARN")] Warn = 2,
        [NativeName("EMBER_LOG_ERROR")] Error = 3,
    }

    /// <summary>Which compute backend a session or engine runs on (ember_backend_kind).</summary>
    [NativeName("ember_backend_kind")]
    public enum BackendKind
    {
        /// <summary>The best backend available on this machine.</summary>
        [NativeName("EMBER_BACKEND_AUTO")] Auto = 0,
        [NativeName("EMBER_BACKEND_CPU")] Cpu = 1,
        [NativeName("EMBER_BACKEND_CUDA")] Cuda = 2,
        [NativeName("EMBER_BACKEND_VULKAN")] Vulkan = 3,
    }

    /// <summary>Element type of the KV cache (ember_kv_type).</summary>
    [NativeName("ember_kv_type")]
    public enum KvType
    {
        [NativeName("EMBER_KV_F16")] F16 = 0,
        /// <summary>1.88 times the tokens in the same memory, for a small quality cost.</summary>
        [NativeName("EMBER_KV_Q8_0")] Q8_0 = 1,
        /// <summary>3.56 times the tokens of F16 in the same memory, for a larger quality cost (EMBER_1.10).</summary>
        [NativeName("EMBER_KV_Q4_0")] Q4_0 = 2,
    }

    /// <summary>How a session's products with quantized weights (Q8_0, Q4_0, K-quants, ...) round the
    /// activations (ember_precision, see Session.SetPrecision; ember.h documents both in full). Float
    /// weights are unaffected.</summary>
    [NativeName("ember_precision")]
    public enum Precision
    {
        /// <summary>8-bit activations with a scale per block of 32, as llama.cpp does: the fastest.</summary>
        [NativeName("EMBER_PRECISION_DEFAULT")] Default = 0,
        /// <summary>The remainder of that rounding multiplied too: logits 30-100 times closer to exact
        /// arithmetic, prefill up to twice as long. For evaluation and exact references. CPU backend only.</summary>
        [NativeName("EMBER_PRECISION_HIGH")] High = 1,
    }

    /// <summary>How ember's idle CPU threads treat cores (ember_cpu_priority, see ember_cpu_budget_set).</summary>
    [NativeName("ember_cpu_priority")]
    public enum CpuPriority
    {
        [NativeName("EMBER_CPU_PRIORITY_NORMAL")] Normal = 0,
        /// <summary>Background work: never hold a core ember is not computing on.</summary>
        [NativeName("EMBER_CPU_PRIORITY_LOW")] Low = 1,
        /// <summary>Latency first: idle workers spin longer before they sleep.</summary>
        [NativeName("EMBER_CPU_PRIORITY_HIGH")] High = 2,
    }

    /// <summary>Speculative decoding mode (ember_spec_mode).</summary>
    [NativeName("ember_spec_mode")]
    public enum SpecMode
    {
        [NativeName("EMBER_SPEC_OFF")] Off = 0,
        [NativeName("EMBER_SPEC_DRAFT")] Draft = 1,
        [NativeName("EMBER_SPEC_LOOKUP")] Lookup = 2,
        [NativeName("EMBER_SPEC_MTP")] Mtp = 3,
    }

    /// <summary>Where an engine request stands (ember_request_state).</summary>
    [NativeName("ember_request_state")]
    public enum RequestState
    {
        [NativeName("EMBER_REQUEST_QUEUED")] Queued = 0,
        [NativeName("EMBER_REQUEST_RUNNING")] Running = 1,
        [NativeName("EMBER_REQUEST_DONE")] Done = 2,
        [NativeName("EMBER_REQUEST_CANCELLED")] Cancelled = 3,
        [NativeName("EMBER_REQUEST_FAILED")] Failed = 4,
    }

    /// <summary>The reasoning switch of a conversation with tools (ember_reasoning): enable_thinking for the
    /// template, or its own default.</summary>
    [NativeName("ember_reasoning")]
    public enum Reasoning
    {
        [NativeName("EMBER_REASONING_DEFAULT")] Default = 0,
        [NativeName("EMBER_REASONING_OFF")] Off = 1,
        [NativeName("EMBER_REASONING_ON")] On = 2,
    }

    /// <summary>How a model family writes tool calls and reasoning (ember_chat_format).</summary>
    [NativeName("ember_chat_format")]
    public enum ChatFormat
    {
        [NativeName("EMBER_CHAT_FORMAT_AUTO")] Auto = 0,
        [NativeName("EMBER_CHAT_FORMAT_CONTENT")] Content = 1,
        [NativeName("EMBER_CHAT_FORMAT_HERMES")] Hermes = 2,
        [NativeName("EMBER_CHAT_FORMAT_LLAMA3")] Llama3 = 3,
        [NativeName("EMBER_CHAT_FORMAT_MISTRAL")] Mistral = 4,
        [NativeName("EMBER_CHAT_FORMAT_GPT_OSS")] GptOss = 5,
        [NativeName("EMBER_CHAT_FORMAT_GRANITE")] Granite = 6,
        [NativeName("EMBER_CHAT_FORMAT_PHI4")] Phi4 = 7,
    }

    /// <summary>OpenAI's tool_choice (ember_tool_choice).</summary>
    [NativeName("ember_tool_choice")]
    public enum ToolChoice
    {
        [NativeName("EMBER_TOOL_CHOICE_AUTO")] Auto = 0,
        [NativeName("EMBER_TOOL_CHOICE_NONE")] None = 1,
        [NativeName("EMBER_TOOL_CHOICE_REQUIRED")] Required = 2,
        [NativeName("EMBER_TOOL_CHOICE_NAMED")] Named = 3,
    }

    /// <summary>How a text's token rows become one vector (ember_pooling).</summary>
    [NativeName("ember_pooling")]
    public enum Pooling
    {
        [NativeName("EMBER_POOLING_MODEL")] Model = 0,
        [NativeName("EMBER_POOLING_MEAN")] Mean = 1,
        [NativeName("EMBER_POOLING_CLS")] Cls = 2,
        [NativeName("EMBER_POOLING_LAST")] Last = 3,
    }
}
