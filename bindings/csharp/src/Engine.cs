using System;
using System.Runtime.InteropServices;
using System.Threading;
using Ember.Native;

namespace Ember
{
    /// <summary>Engine parameters (ember_engine_params); the initial values are ember.h's defaults.</summary>
    public sealed class EngineOptions
    {
        /// <summary>Longest sequence in tokens (0: the trained context, capped at 4096).</summary>
        public uint ContextLength = 0;
        /// <summary>Sequences generating at once; more requests wait in a queue.</summary>
        public uint MaxSequences = 8;
        /// <summary>KV-cache budget in bytes (0: enough for MaxSequences of ContextLength).</summary>
        public ulong KvBytes = 0;
        public uint Threads = 0;
        public uint BatchSize = 256;
        public BackendKind Backend = BackendKind.Auto;
        /// <summary>No worker thread: the caller advances the engine with Engine.Step().</summary>
        public bool ManualStep = false;
        public KvType KvType = KvType.F16;
        /// <summary>Placement across devices with a GPU backend (docs/offload.md): the GPU's layer count,
        /// GpuLayersAll (-1, default) or GpuLayersAuto (-2: the fit to GpuBudgetBytes); the rest run on the CPU.</summary>
        public int GpuLayers = NativeConstants.EMBER_GPU_LAYERS_ALL;
        /// <summary>GPU layers whose MoE experts run on the CPU (-1: every one).</summary>
        public int ExpertsOnCpu = 0;
        /// <summary>Bytes the GPU's part may take (0: its free memory less a margin).</summary>
        public ulong GpuBudgetBytes = 0;
        /// <summary>Speculative decoding for the requests that ask for it (RequestOptions.Speculate):
        /// SpecMode.Mtp (the model's own multi-token-prediction layers) or SpecMode.Lookup (n-gram
        /// lookup); a request's tokens are the same as without it.</summary>
        public SpecMode Speculation = SpecMode.Off;
        /// <summary>Tokens a request drafts per step, 1..8.</summary>
        public uint SpecK = 4;
        /// <summary>SpecMode.Lookup: longest suffix matched, 1..16.</summary>
        public uint SpecNgramMax = 3;
        public const int GpuLayersAll = NativeConstants.EMBER_GPU_LAYERS_ALL;
        public const int GpuLayersAuto = NativeConstants.EMBER_GPU_LAYERS_AUTO;

        internal ember_engine_params ToNative()
        {
            var p = new ember_engine_params();
            NativeMethods.ember_engine_params_init(ref p);
            p.n_ctx = ContextLength;
            p.n_seq_max = MaxSequences;
            p.kv_bytes = KvBytes;
            p.n_threads = Threads;
            p.n_batch = BatchSize;
            p.backend = Backend;
            p.manual_step = ManualStep;
            p.kv_type = KvType;
            p.gpu_layers = GpuLayers;
            p.experts_on_cpu = ExpertsOnCpu;
            p.gpu_budget_bytes = GpuBudgetBytes;
            p.speculation = Speculation;
            p.spec_k = SpecK;
            p.spec_ngram_max = SpecNgramMax;
            return p;
        }
    }

    /// <summary>
    /// Many sequences on one model, batched continuously. Every method of Engine and Request may be
    /// called from any thread. Request callbacks run on the engine's worker thread (or inside Step).
    /// </summary>
    public sealed partial class Engine : IDisposable
    {
        internal readonly EngineHandle Handle;

        public Engine(Model model, EngineOptions options = null)
        {
            if (model == null) throw new ArgumentNullException("model");
            if (model.Handle.IsClosed) throw new ObjectDisposedException("Model");
            var p = (options ?? new EngineOptions()).ToNative();
            EngineHandle h;
            Status st = NativeMethods.ember_engine_create(model.Handle, ref p, out h);
            if (st < 0)
            {
                var e = new EmberException(st, Utf8.FromNative(NativeMethods.ember_last_error()));
                h.Dispose();
                throw e;
            }
            h.HoldModel(model.Handle);
            Handle = h;
        }

        /// <summary>Stops the worker and frees the engine; running requests are cancelled (their
        /// objects stay usable). Safe to call more than once.</summary>
        public void Dispose() { Handle.Dispose(); }

        private void ThrowIfDisposed()
        {
            if (Handle.IsClosed) throw new ObjectDisposedException("Engine");
        }

        /// <summary>Queues a request for prompt. sampling null: greedy. onToken (optional) runs on the
        /// engine's thread for each token; return false to cancel. Cancelling the token cancels the
        /// request.</summary>
        public Request Submit(int[] prompt, int maxTokens = 128, SamplerParams sampling = null,
                              Func<TokenEvent, bool> onToken = null,
                              CancellationToken cancellation = default(CancellationToken))
        {
            return Submit(prompt, new RequestOptions { MaxTokens = maxTokens, Sampling = sampling }, onToken, cancellation);
        }

        /// <summary>Submit with stop strings and a grammar (RequestOptions). EmberException
        /// (InvalidArgument) for too many or too long stop strings.</summary>
        public Request Submit(int[] prompt, RequestOptions options, Func<TokenEvent, bool> onToken = null,
                              CancellationToken cancellation = default(CancellationToken))
        {
            ThrowIfDisposed();
            if (prompt == null) throw new ArgumentNullException("prompt");
            if (options == null) throw new ArgumentNullException("options");
            if (options.MaxTokens < 0) throw new ArgumentOutOfRangeException("options", "MaxTokens is negative");
            SamplerParams sampling = options.Sampling;
            var p = new ember_request_params();
            NativeMethods.ember_request_params_init(ref p);
            p.max_tokens = (uint)options.MaxTokens;
            p.speculate = options.Speculate;
            // The stop strings are copied at submit; the request takes its own reference to the grammar.
            // Both are made before anything that needs freeing, as they may throw.
            using (var stop = new NativeStrings(options.Stop, "options"))
            using (var grammar = new GrammarRef(options.Grammar))
            {
                GCHandle promptPin = GCHandle.Alloc(prompt, GCHandleType.Pinned);
                IntPtr samplingMem = IntPtr.Zero;
                GCHandle callback = default(GCHandle);
                try
                {
                    p.stop = stop.Array;
                    p.n_stop = stop.Count;
                    p.grammar = grammar.Pointer;
                    p.prompt = promptPin.AddrOfPinnedObject();
                    p.n_prompt = (UIntPtr)prompt.Length;
                    if (sampling != null)
                    {
                        var sp = sampling.ToNative();
                        samplingMem = Marshal.AllocHGlobal(Marshal.SizeOf(typeof(ember_sampler_params)));
                        Marshal.StructureToPtr(sp, samplingMem, false);
                        p.sampling = samplingMem;
                    }
                    if (onToken != null || cancellation.CanBeCanceled)
                    {
                        callback = GCHandle.Alloc(new Callbacks.RequestCallState
                        {
                            User = onToken ?? (e => true),
                            Cancellation = cancellation,
                        });
                        p.on_token = Callbacks.RequestTokenPtr;
                        p.user_data = GCHandle.ToIntPtr(callback);
                    }
                    RequestHandle h;
                    Status st = NativeMethods.ember_request_submit(Handle, ref p, out h);
                    if (st < 0)
                    {
                        var e = new EmberException(st, Utf8.FromNative(NativeMethods.ember_last_error()));
                        h.Dispose();
                        throw e;
                    }
                    h.Callback = callback; // the handle frees it after ember_request_free
                    callback = default(GCHandle);
                    return new Request(h, cancellation);
                }
                finally
                {
                    promptPin.Free(); // the prompt and sampling params are copied at submit
                    if (samplingMem != IntPtr.Zero) Marshal.FreeHGlobal(samplingMem);
                    if (callback.IsAllocated) callback.Free();
                }
            }
        }

        /// <summary>Manual-step engines only: one forward pass over everything ready. Returns whether
        /// any request is still queued or running.</summary>
        public bool Step()
        {
            ThrowIfDisposed();
            bool busy;
            EmberException.Check(NativeMethods.ember_engine_step(Handle, out busy));
            return busy;
        }
    }

    /// <summary>A request submitted to an Engine. Usable after the engine is disposed.</summary>
    public sealed partial class Request : IDisposable
    {
        internal readonly RequestHandle Handle;
        private readonly CancellationTokenRegistration registration_;

        internal Request(RequestHandle handle, CancellationToken cancellation)
        {
            Handle = handle;
            if (cancellation.CanBeCanceled) registration_ = cancellation.Register(s => ((Request)s).Cancel(), this);
        }

        /// <summary>Cancels the request if it still runs and frees it. Safe to call more than once.</summary>
        public void Dispose()
        {
            registration_.Dispose();
            Handle.Dispose();
        }

        private void ThrowIfDisposed()
        {
            if (Handle.IsClosed) throw new ObjectDisposedException("Request");
        }

        /// <summary>Never blocks: the tokens generated since the previous poll, and the state.</summary>
        public int[] Poll(out RequestState state)
        {
            ThrowIfDisposed();
            UIntPtr n;
            EmberException.Check(NativeMethods.ember_request_poll(Handle, null, UIntPtr.Zero, out n, out state));
            var tokens = new int[(int)n.ToUInt64()];
            EmberException.Check(NativeMethods.ember_request_poll(Handle, tokens, (UIntPtr)tokens.Length, out n, out state));
            if ((int)n.ToUInt64() != tokens.Length) Array.Resize(ref tokens, (int)n.ToUInt64());
            return tokens;
        }

        public RequestState State
        {
            get
            {
                ThrowIfDisposed();
                UIntPtr n;
                RequestState state;
                EmberException.Check(NativeMethods.ember_request_poll(Handle, null, UIntPtr.Zero, out n, out state));
                return state;
            }
        }

        /// <summary>The text generated so far (whole UTF-8 characters).</summary>
        public string Text
        {
            get
            {
                ThrowIfDisposed();
                UIntPtr len;
                Status st = NativeMethods.ember_request_text(Handle, null, UIntPtr.Zero, out len);
                if (st != Status.BufferTooSmall) EmberException.Check(st);
                byte[] buf = new byte[(int)len.ToUInt64() + 1];
                EmberException.Check(NativeMethods.ember_request_text(Handle, buf, (UIntPtr)buf.Length, out len));
                return System.Text.Encoding.UTF8.GetString(buf, 0, (int)len.ToUInt64());
            }
        }

        /// <summary>Its counters (ember_request_get_stats): tokens, steps, drafts and accepted drafts.</summary>
        public RequestStats Stats
        {
            get
            {
                ThrowIfDisposed();
                var s = new ember_request_stats();
                NativeMethods.ember_request_stats_init(ref s);
                EmberException.Check(NativeMethods.ember_request_get_stats(Handle, ref s));
                return new RequestStats
                {
                    Tokens = s.n_tokens, DecodeSteps = s.decode_steps, Drafted = s.drafted, Accepted = s.accepted,
                    AcceptanceRate = s.acceptance_rate,
                };
            }
        }

        /// <summary>Blocks until the request has ended or the timeout passes (null: no limit). True
        /// when it ended.</summary>
        public bool Wait(TimeSpan? timeout = null)
        {
            ThrowIfDisposed();
            uint ms = uint.MaxValue;
            if (timeout.HasValue) ms = (uint)Math.Min((double)(uint.MaxValue - 1), Math.Max(0.0, timeout.Value.TotalMilliseconds));
            return EmberException.Check(NativeMethods.ember_request_wait(Handle, ms)) == Status.Ok;
        }

        /// <summary>Cancels at the next step boundary. Any thread; nothing happens once it ended or
        /// was disposed.</summary>
        public void Cancel()
        {
            bool added = false;
            try
            {
                Handle.DangerousAddRef(ref added);
                NativeMethods.ember_request_cancel(Handle);
            }
            catch (ObjectDisposedException) { }
            finally
            {
                if (added) Handle.DangerousRelease();
            }
        }

        /// <summary>Why it failed (Status.Ok when it has not), and the library's message.</summary>
        public Status GetError(out string message)
        {
            ThrowIfDisposed();
            Status st;
            IntPtr msg;
            EmberException.Check(NativeMethods.ember_request_error(Handle, out st, out msg));
            message = Utf8.FromNative(msg);
            return st;
        }
    }
}
