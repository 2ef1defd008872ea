using System;
using System.Runtime.InteropServices;
using System.Threading;
using Ember.Native;

namespace Ember
{
    /// <summary>How Model.Load loads a file.</summary>
    public sealed class ModelLoadOptions
    {
        /// <summary>Metadata and tokenizer only, no weights: such a model tokenizes but cannot run.</summary>
        public bool VocabOnly;
        /// <summary>Metadata and tensor table only (ember_model_load_metadata): neither tokenizer nor
        /// weights, so any well-formed file loads and can be described (Info, metadata), whatever its
        /// architecture or tokenizer; it cannot tokenize (Status.Unsupported) or run. VocabOnly is then
        /// ignored.</summary>
        public bool MetadataOnly;
        /// <summary>Called on the loading thread with progress in [0, 1]; return false to cancel the
        /// load (Model.Load then throws OperationCanceledException).</summary>
        public Func<float, bool> Progress;
        /// <summary>Cancels the load (checked at each progress step).</summary>
        public CancellationToken CancellationToken;
    }

    /// <summary>A summary of a loaded model.</summary>
    public sealed class ModelInfo
    {
        public string Architecture { get; internal set; }
        public string Name { get; internal set; }
        public ulong ParameterCount { get; internal set; }
        public ulong SizeBytes { get; internal set; }
        public int TrainedContextLength { get; internal set; }
        public int VocabularySize { get; internal set; }
        public int EmbeddingLength { get; internal set; }
        public int LayerCount { get; internal set; }
        public int HeadCount { get; internal set; }
        public int KvHeadCount { get; internal set; }
        public ulong KvBytesPerToken { get; internal set; }
        /// <summary>Recurrent-state bytes one sequence carries whatever its length (hybrid models; 0 otherwise).</summary>
        public ulong StateBytesPerSequence { get; internal set; }
        /// <summary>Layers that keep KV rows.</summary>
        public int KvLayerCount { get; internal set; }
        /// <summary>Layers that carry a recurrent state instead of KV rows.</summary>
        public int RecurrentLayerCount { get; internal set; }
    }

    /// <summary>
    /// A loaded GGUF model. Immutable once loaded: any number of sessions on any threads may share it.
    /// Dispose it after its sessions and engines (the binding keeps the native model alive until the
    /// last of them is freed anyway).
    /// </summary>
    public sealed class Model : IDisposable
    {
        internal readonly ModelHandle Handle;
        private ModelInfo info_;

        private Model(ModelHandle handle) { Handle = handle; }

        /// <summary>Loads a GGUF file. Throws EmberException (Status.IO for a missing file,
        /// InvalidModel, Unsupported, ...) with the library's message, or OperationCanceledException
        /// when the progress callback or the token cancelled it.</summary>
        public static Model Load(string path, ModelLoadOptions options = null)
        {
            if (path == null) throw new ArgumentNullException("path");
            if (path.Length == 0) throw new ArgumentException("the model path is empty", "path");
            byte[] cpath = Utf8.ToNative(path, "path");
            options = options ?? new ModelLoadOptions();
            options.CancellationToken.ThrowIfCancellationRequested();

            var p = new ember_model_params();
            NativeMethods.ember_model_params_init(ref p);
            p.vocab_only = options.VocabOnly;
            var state = new Callbacks.ProgressState { User = options.Progress, Cancellation = options.CancellationToken };
            GCHandle gc = GCHandle.Alloc(state);
            try
            {
                p.progress = Callbacks.ProgressPtr;
                p.progress_user_data = GCHandle.ToIntPtr(gc);
                ModelHandle handle;
                Status st = options.MetadataOnly ? NativeMethods.ember_model_load_metadata(cpath, ref p, out handle)
                                                 : NativeMethods.ember_model_load(cpath, ref p, out handle);
                string message = st < 0 ? Utf8.FromNative(NativeMethods.ember_last_error()) : null;
                if (st == Status.Ok) return new Model(handle);
                handle.Dispose();
                state.RethrowIfFailed();
                if (st == Status.Cancelled)
                    throw new OperationCanceledException("loading " + path + " was cancelled", options.CancellationToken);
                throw new EmberException(st, message);
            }
            finally
            {
                gc.Free();
            }
        }

        /// <summary>Frees the model. Safe to call more than once.</summary>
        public void Dispose() { Handle.Dispose(); }

        private void ThrowIfDisposed()
        {
            if (Handle.IsClosed) throw new ObjectDisposedException("Model");
        }

        public ModelInfo Info
        {
            get
            {
                ThrowIfDisposed();
                if (info_ != null) return info_;
                var i = new ember_model_info();
                NativeMethods.ember_model_info_init(ref i);
                EmberException.Check(NativeMethods.ember_model_get_info(Handle, ref i));
                info_ = new ModelInfo
                {
                    Architecture = Utf8.FromNative(i.architecture),
                    Name = Utf8.FromNative(i.name),
                    ParameterCount = i.n_params,
                    SizeBytes = i.size_bytes,
                    TrainedContextLength = (int)i.n_ctx_train,
                    VocabularySize = (int)i.n_vocab,
                    EmbeddingLength = (int)i.n_embd,
                    LayerCount = (int)i.n_layer,
                    HeadCount = (int)i.n_head,
                    KvHeadCount = (int)i.n_head_kv,
                    KvBytesPerToken = i.kv_bytes_per_token,
                    StateBytesPerSequence = i.state_bytes_per_sequence,
                    KvLayerCount = (int)i.n_kv_layers,
                    RecurrentLayerCount = (int)i.n_recurrent_layers,
                };
                return info_;
            }
        }

        /// <summary>A metadata value rendered as text, or null when the key is absent.</summary>
        public string GetMetadata(string key)
        {
            ThrowIfDisposed();
            byte[] ckey = Utf8.ToNative(key, "key");
            UIntPtr len;
            Status st = NativeMethods.ember_model_meta_string(Handle, ckey, null, UIntPtr.Zero, out len);
            if (st == Status.NotFound) return null;
            if (st != Status.BufferTooSmall) EmberException.Check(st);
            byte[] buf = new byte[(int)len.ToUInt64() + 1];
            EmberException.Check(NativeMethods.ember_model_meta_string(Handle, ckey, buf, (UIntPtr)buf.Length, out len));
            return System.Text.Encoding.UTF8.GetString(buf, 0, (int)len.ToUInt64());
        }

        /// <summary>The tokens of text. addSpecial: BOS/EOS where the model asks for them; parseSpecial:
        /// text such as "&lt;s&gt;" becomes control tokens (never do that with untrusted input).</summary>
        public int[] Tokenize(string text, bool addSpecial = true, bool parseSpecial = false)
        {
            ThrowIfDisposed();
            if (text == null) throw new ArgumentNullException("text");
            byte[] bytes = System.Text.Encoding.UTF8.GetBytes(text);
            uint flags = (addSpecial ? NativeConstants.EMBER_TOKENIZE_ADD_SPECIAL : 0u) |
                         (parseSpecial ? NativeConstants.EMBER_TOKENIZE_PARSE_SPECIAL : 0u);
            UIntPtr n;
            Status st = NativeMethods.ember_tokenize(Handle, bytes, (UIntPtr)bytes.Length, flags, null, UIntPtr.Zero, out n);
            if (st != Status.BufferTooSmall) EmberException.Check(st);
            int[] tokens = new int[(int)n.ToUInt64()];
            if (tokens.Length == 0) return tokens;
            EmberException.Check(NativeMethods.ember_tokenize(Handle, bytes, (UIntPtr)bytes.Length, flags, tokens,
                                                              (UIntPtr)tokens.Length, out n));
            return tokens;
        }

        /// <summary>The text of a token sequence (invalid UTF-8 becomes U+FFFD).</summary>
        public string Detokenize(int[] tokens, bool renderSpecial = false, bool keepLeadingSpace = false)
        {
            ThrowIfDisposed();
            if (tokens == null) throw new ArgumentNullException("tokens");
            uint flags = (renderSpecial ? NativeConstants.EMBER_DETOKENIZE_RENDER_SPECIAL : 0u) |
                         (keepLeadingSpace ? NativeConstants.EMBER_DETOKENIZE_KEEP_LEADING_SPACE : 0u);
            UIntPtr len;
            Status st = NativeMethods.ember_detokenize(Handle, tokens, (UIntPtr)tokens.Length, flags, null, UIntPtr.Zero, out len);
            if (st != Status.BufferTooSmall) EmberException.Check(st);
            byte[] buf = new byte[(int)len.ToUInt64() + 1];
            EmberException.Check(NativeMethods.ember_detokenize(Handle, tokens, (UIntPtr)tokens.Length, flags, buf,
                                                                (UIntPtr)buf.Length, out len));
            return System.Text.Encoding.UTF8.GetString(buf, 0, (int)len.ToUInt64());
        }

        /// <summary>The raw bytes one token stands for (a byte token may be part of a UTF-8 character,
        /// which is why this is bytes, not a string).</summary>
        public byte[] TokenToPiece(int token, bool renderSpecial = false)
        {
            ThrowIfDisposed();
            uint flags = renderSpecial ? NativeConstants.EMBER_DETOKENIZE_RENDER_SPECIAL : 0u;
            UIntPtr len;
            Status st = NativeMethods.ember_token_to_piece(Handle, token, flags, null, UIntPtr.Zero, out len);
            if (st != Status.BufferTooSmall) EmberException.Check(st);
            byte[] buf = new byte[(int)len.ToUInt64()];
            if (buf.Length == 0) return buf;
            EmberException.Check(NativeMethods.ember_token_to_piece(Handle, token, flags, buf, (UIntPtr)buf.Length, out len));
            return buf;
        }

        /// <summary>Renders a conversation to the prompt text this model expects (ember_chat_apply_template):
        /// with template null, the model's own Jinja chat template (tokenizer.chat_template), or ChatML
        /// for a model without one; otherwise the Jinja template given. addGenerationPrompt ends the text
        /// with what opens the assistant's reply. Tokenize the result with parseSpecial: true and, since
        /// the template writes its own BOS text, usually addSpecial: false (ember.h says when not).
        /// Throws EmberException for a template error (Status.InvalidArgument with the template's line,
        /// or the message of the template's raise_exception), a construct ember's Jinja subset lacks
        /// (Status.Unsupported), ArgumentException for a null message, role or content, or a NUL
        /// character inside one.</summary>
        public string ApplyChatTemplate(System.Collections.Generic.IEnumerable<ChatMessage> messages,
                                        bool addGenerationPrompt, string template = null)
        {
            ThrowIfDisposed();
            if (messages == null) throw new ArgumentNullException("messages");
            byte[] ctmpl = template == null ? null : Utf8.ToNative(template, "template");
            var list = new System.Collections.Generic.List<ChatMessage>(messages);
            // The structs hold raw pointers to the UTF-8 bytes, so each byte[] is pinned (the GC must not
            // move it) until the second native call has returned; the struct array itself is blittable
            // and pinned by the marshaller during each call.
            var pins = new System.Collections.Generic.List<GCHandle>(list.Count * 2);
            try
            {
                ember_chat_message[] cmsgs = list.Count == 0 ? null : new ember_chat_message[list.Count];
                for (int i = 0; i < list.Count; i++)
                {
                    if (list[i] == null) throw new ArgumentNullException("messages", "message " + i + " is null");
                    cmsgs[i].role = Pin(pins, Utf8.ToNative(list[i].Role, "messages[" + i + "].Role"));
                    cmsgs[i].content = Pin(pins, Utf8.ToNative(list[i].Content, "messages[" + i + "].Content"));
                }
                var n = (UIntPtr)list.Count;
                UIntPtr len;
                Status st = NativeMethods.ember_chat_apply_template(Handle, ctmpl, cmsgs, n, addGenerationPrompt,
                                                                    null, UIntPtr.Zero, out len);
                if (st != Status.BufferTooSmall) EmberException.Check(st);
                byte[] buf = new byte[checked((int)len.ToUInt64() + 1)];
                EmberException.Check(NativeMethods.ember_chat_apply_template(Handle, ctmpl, cmsgs, n, addGenerationPrompt,
                                                                             buf, (UIntPtr)buf.Length, out len));
                return System.Text.Encoding.UTF8.GetString(buf, 0, (int)len.ToUInt64());
            }
            finally
            {
                foreach (GCHandle h in pins) h.Free();
            }
        }

        private static IntPtr Pin(System.Collections.Generic.List<GCHandle> pins, byte[] bytes)
        {
            GCHandle h = GCHandle.Alloc(bytes, GCHandleType.Pinned);
            pins.Add(h);
            return h.AddrOfPinnedObject();
        }

        /// <summary>The BOS token, or -1.</summary>
        public int BosToken { get { ThrowIfDisposed(); return NativeMethods.ember_token_bos(Handle); } }
        /// <summary>The EOS token, or -1.</summary>
        public int EosToken { get { ThrowIfDisposed(); return NativeMethods.ember_token_eos(Handle); } }

        /// <summary>True when the token ends generation (EOS, EOT, ...).</summary>
        public bool IsEndOfGeneration(int token)
        {
            ThrowIfDisposed();
            return NativeMethods.ember_token_is_eog(Handle, token);
        }
    }
}
