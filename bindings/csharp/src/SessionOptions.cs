using Ember.Native;

namespace Ember
{
    /// <summary>Session parameters (ember_session_params). The initial values are ember.h's defaults;
    /// the unit tests check them against ember_session_params_init.</summary>
    public sealed class SessionOptions
    {
        /// <summary>Context length in tokens (0: the trained context, capped at 4096).</summary>
        public uint ContextLength = 0;
        /// <summary>CPU worker threads (0: physical cores, at most 8).</summary>
        public uint Threads = 0;
        /// <summary>Tokens per forward pass when feeding long prompts.</summary>
        public uint BatchSize = 256;
        public ulong Seed = 0;
        public BackendKind Backend = BackendKind.Auto;
        /// <summary>Sequences (this session and its forks) the shared KV cache is sized for.</summary>
        public uint MaxSequences = 1;
        public KvType KvType = KvType.F16;
        /// <summary>Placement across devices with a GPU backend (docs/offload.md): the GPU's layer count,
        /// GpuLayersAll (-1, default) or GpuLayersAuto (-2: the fit to GpuBudgetBytes); the rest run on the CPU.</summary>
        public int GpuLayers = NativeConstants.EMBER_GPU_LAYERS_ALL;
        /// <summary>GPU layers whose MoE experts run on the CPU (-1: every one).</summary>
        public int ExpertsOnCpu = 0;
        /// <summary>Bytes the GPU's part may take (0: its free memory less a margin).</summary>
        public ulong GpuBudgetBytes = 0;
        public const int GpuLayersAll = NativeConstants.EMBER_GPU_LAYERS_ALL;
        public const int GpuLayersAuto = NativeConstants.EMBER_GPU_LAYERS_AUTO;

        internal ember_session_params ToNative()
        {
            var p = new ember_session_params();
            NativeMethods.ember_session_params_init(ref p); // struct_size, and fields this class lacks
            p.n_ctx = ContextLength;
            p.n_threads = Threads;
            p.n_batch = BatchSize;
            p.seed = Seed;
            p.backend = Backend;
            p.n_seq_max = MaxSequences;
            p.kv_type = KvType;
            p.gpu_layers = GpuLayers;
            p.experts_on_cpu = ExpertsOnCpu;
            p.gpu_budget_bytes = GpuBudgetBytes;
            return p;
        }
    }
}
