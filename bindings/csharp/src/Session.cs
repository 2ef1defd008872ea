using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using System.Threading;
using Ember.Native;

namespace Ember
{
    /// <summary>How a callback-driven Session.Generate ended.</summary>
    public struct GenerateResult
    {
        public GenerateResult(int count, Status status) { Count = count; Status = status; }
        /// <summary>Tokens generated.</summary>
        public int Count { get; private set; }
        /// <summary>Ok (maxTokens reached), EndOfGeneration, or Stopped (the callback returned false).</summary>
        public Status Status { get; private set; }
    }

    /// <summary>
    /// One sequence's state (KV cache, logits) on a model. Use a session from one thread at a time;
    /// Cancel is the exception: it may be called from any thread (a CancellationToken passed to Feed or
    /// Generate calls it for you).
    /// </summary>
    public sealed partial class Session : IDisposable
    {
        internal readonly SessionHandle Handle;
        private readonly Model model_;

        /// <summary>Creates a session; throws EmberException (InvalidArgument for a vocab-only model,
        /// Unsupported backend, OutOfMemory).</summary>
        public Session(Model model, SessionOptions options = null)
        {
            if (model == null) throw new ArgumentNullException("model");
            if (model.Handle.IsClosed) throw new ObjectDisposedException("Model");
            var p = (options ?? new SessionOptions()).ToNative();
            SessionHandle h;
            Status st = NativeMethods.ember_session_create(model.Handle, ref p, out h);
            Handle = Adopt(st, h, model);
            model_ = model;
        }

        private Session(SessionHandle handle, Model model)
        {
            Handle = handle;
            model_ = model;
        }

        // Turns a create/fork result into an owned handle, or throws with the library's message.
        private static SessionHandle Adopt(Status st, SessionHandle h, Model model)
        {
            if (st < 0)
            {
                var e = new EmberException(st, Utf8.FromNative(NativeMethods.ember_last_error()));
                h.Dispose();
                throw e;
            }
            h.HoldModel(model.Handle);
            return h;
        }

        public Model Model { get { return model_; } }

        /// <summary>Frees the session (forks live on). Safe to call more than once.</summary>
        public void Dispose() { Handle.Dispose(); }

        private void ThrowIfDisposed()
        {
            if (Handle.IsClosed) throw new ObjectDisposedException("Session");
        }

        /// <summary>A new session continuing from this one's state, sharing its KV blocks
        /// (copy-on-write).</summary>
        public Session Fork()
        {
            ThrowIfDisposed();
            SessionHandle h;
            Status st = NativeMethods.ember_session_fork(Handle, out h);
            return new Session(Adopt(st, h, model_), model_);
        }

        /// <summary>Stops a Feed or callback Generate running on this session on another thread. Any
        /// thread; does nothing when no such call is in progress.</summary>
        public void Cancel()
        {
            // The handle may be closed by the time a CancellationToken fires: then nothing runs.
            bool added = false;
            try
            {
                Handle.DangerousAddRef(ref added);
                NativeMethods.ember_session_cancel(Handle);
            }
            catch (ObjectDisposedException) { }
            finally
            {
                if (added) Handle.DangerousRelease();
            }
        }

        private CancellationTokenRegistration RegisterCancel(CancellationToken cancellation)
        {
            if (!cancellation.CanBeCanceled) return default(CancellationTokenRegistration);
            return cancellation.Register(s => ((Session)s).Cancel(), this);
        }

        /// <summary>Evaluates tokens after the current position. A cancelled token stops it between
        /// chunks and layers with OperationCanceledException, leaving the session as before the call;
        /// also a cancellation that comes before the native feed starts (the session is armed first,
        /// ember_session_cancel_arm, so that it is kept).</summary>
        public void Feed(int[] tokens, CancellationToken cancellation = default(CancellationToken))
        {
            ThrowIfDisposed();
            if (tokens == null) throw new ArgumentNullException("tokens");
            NativeMethods.ember_session_cancel_arm(Handle);
            cancellation.ThrowIfCancellationRequested();
            Status st;
            string message;
            using (RegisterCancel(cancellation))
            {
                st = NativeMethods.ember_session_feed(Handle, tokens, (UIntPtr)tokens.Length);
                message = st < 0 ? Utf8.FromNative(NativeMethods.ember_last_error()) : null;
            }
            if (st == Status.Cancelled) throw new OperationCanceledException("feed was cancelled", cancellation);
            if (st < 0) throw new EmberException(st, message);
        }

        /// <summary>Tokenizes text (BOS where the model wants one if addSpecial) and feeds it.</summary>
        public void Feed(string text, bool addSpecial = false, CancellationToken cancellation = default(CancellationToken))
        {
            ThrowIfDisposed();
            Feed(model_.Tokenize(text, addSpecial, false), cancellation);
        }

        /// <summary>One decode step: samples from the current logits, records the token in the sampler
        /// and feeds it unless it ends generation (then IsEndOfGeneration is set and the text is what
        /// was held back). With stop strings (SetStop), a step that completes one ends generation too
        /// (its token is fed).</summary>
        public TokenEvent Next(Sampler sampler)
        {
            ThrowIfDisposed();
            if (sampler == null) throw new ArgumentNullException("sampler");
            sampler.ThrowIfDisposed();
            int token;
            IntPtr text;
            UIntPtr len;
            NativeMethods.ember_session_cancel_arm(Handle);   // a cancel left from an earlier call must not stop this one
            Status st = EmberException.Check(NativeMethods.ember_generate_next(Handle, sampler.Handle, out token, out text, out len));
            return new TokenEvent(token, Utf8.FromNative(text, checked((int)len.ToUInt64())), st == Status.EndOfGeneration);
        }

        /// <summary>Streams up to maxTokens tokens (0: until end of generation or a full context), one
        /// decode step per MoveNext; the end-of-generation token, if reached, comes last with
        /// IsEndOfGeneration set. The token is checked before each step (OperationCanceledException).</summary>
        public IEnumerable<TokenEvent> GenerateTokens(Sampler sampler, int maxTokens,
                                                      CancellationToken cancellation = default(CancellationToken))
        {
            ThrowIfDisposed();
            if (sampler == null) throw new ArgumentNullException("sampler");
            if (maxTokens < 0) throw new ArgumentOutOfRangeException("maxTokens");
            return GenerateTokensIterator(sampler, maxTokens, cancellation);
        }

        private IEnumerable<TokenEvent> GenerateTokensIterator(Sampler sampler, int maxTokens, CancellationToken cancellation)
        {
            for (int i = 0; maxTokens == 0 || i < maxTokens; i++)
            {
                cancellation.ThrowIfCancellationRequested();
                TokenEvent e = Next(sampler);
                yield return e;
                if (e.IsEndOfGeneration) yield break;
            }
        }

        /// <summary>Streams the text of up to maxTokens generated tokens as pieces (whole UTF-8
        /// characters; pieces are never empty).</summary>
        public IEnumerable<string> Generate(Sampler sampler, int maxTokens,
                                            CancellationToken cancellation = default(CancellationToken))
        {
            ThrowIfDisposed();
            if (sampler == null) throw new ArgumentNullException("sampler");
            if (maxTokens < 0) throw new ArgumentOutOfRangeException("maxTokens");
            return GenerateTextIterator(sampler, maxTokens, cancellation);
        }

        private IEnumerable<string> GenerateTextIterator(Sampler sampler, int maxTokens, CancellationToken cancellation)
        {
            foreach (TokenEvent e in GenerateTokensIterator(sampler, maxTokens, cancellation))
                if (e.Text.Length > 0) yield return e.Text;
        }

        /// <summary>Generates up to maxTokens in one native call (ember_generate; speculative when
        /// speculation is attached), calling onToken for each token on this thread: return false to
        /// stop. A cancelled token stops it after the current token with OperationCanceledException;
        /// an exception thrown by onToken stops it and is rethrown here.</summary>
        public GenerateResult Generate(Sampler sampler, int maxTokens, Func<TokenEvent, bool> onToken,
                                       CancellationToken cancellation = default(CancellationToken))
        {
            return Generate(sampler, new GenerateOptions { MaxTokens = maxTokens }, onToken, cancellation);
        }

        /// <summary>Generate with stop strings and a grammar for the call (GenerateOptions); the result's
        /// Status is EndOfGeneration when a stop string ended it. EmberException (InvalidArgument) for
        /// too many or too long stop strings.</summary>
        public GenerateResult Generate(Sampler sampler, GenerateOptions options, Func<TokenEvent, bool> onToken,
                                       CancellationToken cancellation = default(CancellationToken))
        {
            ThrowIfDisposed();
            if (sampler == null) throw new ArgumentNullException("sampler");
            if (options == null) throw new ArgumentNullException("options");
            if (onToken == null) throw new ArgumentNullException("onToken");
            if (options.MaxTokens < 0) throw new ArgumentOutOfRangeException("options", "MaxTokens is negative");
            sampler.ThrowIfDisposed();
            NativeMethods.ember_session_cancel_arm(Handle);   // from here a cancellation is kept until the call sees it
            cancellation.ThrowIfCancellationRequested();

            var p = new ember_generate_params();
            NativeMethods.ember_generate_params_init(ref p);
            p.max_tokens = (uint)options.MaxTokens;
            var state = new Callbacks.TokenState { User = onToken, Cancellation = cancellation };
            Status st;
            string message;
            UIntPtr count;
            // Made before the GCHandle, as they may throw.
            using (var stop = new NativeStrings(options.Stop, "options"))
            using (var grammar = new GrammarRef(options.Grammar))
            {
                GCHandle gc = GCHandle.Alloc(state); // freed only after the native call returned
                try
                {
                    p.stop = stop.Array;
                    p.n_stop = stop.Count;
                    p.grammar = grammar.Pointer;
                    p.on_token = Callbacks.TokenPtr;
                    p.user_data = GCHandle.ToIntPtr(gc);
                    using (RegisterCancel(cancellation))
                    {
                        st = NativeMethods.ember_generate(Handle, sampler.Handle, ref p, out count);
                        message = st < 0 ? Utf8.FromNative(NativeMethods.ember_last_error()) : null;
                    }
                }
                finally
                {
                    gc.Free();
                }
            }
            state.RethrowIfFailed();
            if ((st == Status.Stopped || st == Status.Cancelled) && cancellation.IsCancellationRequested)
                throw new OperationCanceledException("generation was cancelled", cancellation);
            if (st < 0) throw new EmberException(st, message);
            return new GenerateResult(checked((int)count.ToUInt64()), st);
        }

        /// <summary>Number of tokens in the session (the position of the next one).</summary>
        public int Position
        {
            get
            {
                ThrowIfDisposed();
                uint pos;
                EmberException.Check(NativeMethods.ember_session_position(Handle, out pos));
                return (int)pos;
            }
        }

        public int ContextLength
        {
            get
            {
                ThrowIfDisposed();
                uint n;
                EmberException.Check(NativeMethods.ember_session_context_length(Handle, out n));
                return (int)n;
            }
        }

        /// <summary>The backend this session runs on (never Auto: what Auto chose).</summary>
        public BackendKind Backend
        {
            get
            {
                ThrowIfDisposed();
                EmberException.Check(NativeMethods.ember_session_backend(Handle, out BackendKind b, out uint _));
                return b;
            }
        }

        /// <summary>The CPU worker threads the session was given (0 on a GPU backend).</summary>
        public int Threads
        {
            get
            {
                ThrowIfDisposed();
                EmberException.Check(NativeMethods.ember_session_backend(Handle, out BackendKind _, out uint n));
                return (int)n;
            }
        }

        /// <summary>Sets how the next feeds and generated tokens round the activations (Precision.Default
        /// until then). KV cache rows already computed stay as they were, so set it before feeding the
        /// prompt; a fork starts with this session's setting. EmberException with InvalidArgument for a
        /// value that is not a Precision member, Unsupported for Precision.High on a GPU backend; the
        /// setting is then unchanged. Needs libember's EMBER_1.6.</summary>
        public void SetPrecision(Precision precision)
        {
            ThrowIfDisposed();
            EmberException.Check(NativeMethods.ember_session_set_precision(Handle, precision));
        }

        /// <summary>The CPU threads a session gets when its thread count is 0 (this machine's choice).</summary>
        public static int DefaultThreadCount => (int)NativeMethods.ember_default_thread_count();

        /// <summary>Rolls back to the first nTokens tokens.</summary>
        public void Truncate(int nTokens)
        {
            ThrowIfDisposed();
            if (nTokens < 0) throw new ArgumentOutOfRangeException("nTokens");
            EmberException.Check(NativeMethods.ember_session_truncate(Handle, (uint)nTokens));
        }

        /// <summary>A copy of the logits after the last fed token.</summary>
        public float[] GetLogits()
        {
            ThrowIfDisposed();
            IntPtr p;
            UIntPtr n;
            EmberException.Check(NativeMethods.ember_session_logits(Handle, out p, out n));
            var logits = new float[(int)n.ToUInt64()];
            Marshal.Copy(p, logits, 0, logits.Length);
            return logits;
        }

        /// <summary>The session's state (tokens, KV cache, logits) in ember's versioned format.</summary>
        public byte[] Save()
        {
            ThrowIfDisposed();
            UIntPtr len;
            Status st = NativeMethods.ember_session_save(Handle, null, UIntPtr.Zero, out len);
            if (st != Status.BufferTooSmall) EmberException.Check(st);
            byte[] buf = new byte[checked((int)len.ToUInt64())];
            EmberException.Check(NativeMethods.ember_session_save(Handle, buf, (UIntPtr)buf.Length, out len));
            if ((int)len.ToUInt64() != buf.Length) Array.Resize(ref buf, (int)len.ToUInt64());
            return buf;
        }

        /// <summary>Replaces the state by a saved one (CorruptData / ContextFull leave it unchanged).</summary>
        public void Restore(byte[] state)
        {
            ThrowIfDisposed();
            if (state == null) throw new ArgumentNullException("state");
            EmberException.Check(NativeMethods.ember_session_restore(Handle, state, (UIntPtr)state.Length));
        }

        public void SaveFile(string path)
        {
            ThrowIfDisposed();
            EmberException.Check(NativeMethods.ember_session_save_file(Handle, Utf8.ToNative(path, "path")));
        }

        public void RestoreFile(string path)
        {
            ThrowIfDisposed();
            EmberException.Check(NativeMethods.ember_session_restore_file(Handle, Utf8.ToNative(path, "path")));
        }
    }
}
