using System;
using System.Runtime.InteropServices;
using System.Threading;
using Ember.Native;

namespace Ember
{
    /// <summary>Embedding requests on an engine (ember_engine_submit_embed): texts batched with the running
    /// generations in the engine's forward passes (docs/embeddings.md).</summary>
    public sealed partial class Engine
    {
        /// <summary>Queues an embedding request for texts. pooling Model: an embedding model's own; on a
        /// generating model Mean or Last. Read the vectors with Request.Embeddings() once it is done.
        /// EmberException: InvalidArgument (no texts, an empty one, one too long without truncate, a pooling
        /// that does not fit), Unsupported.</summary>
        public Request SubmitEmbed(string[] texts, Pooling pooling = Pooling.Model, bool normalize = true,
                                   uint dimensions = 0, bool truncate = false, uint maxTokens = 0)
        {
            return Submit(texts, "texts", pooling, normalize, dimensions, truncate, maxTokens, IntPtr.Zero);
        }

        /// <summary>Queues a scoring request on an engine over a reranking model (ember_engine_submit_embed
        /// with a query): each document is scored as the pair (query, document) that Embedder.Rerank forms;
        /// Request.Embeddings() gives one float[] { score } per document once it is done. EmberException:
        /// InvalidArgument (a model that does not rank, no documents, an empty one, a pair too long without
        /// truncate).</summary>
        public Request SubmitRerank(string query, string[] docs, bool truncate = false, uint maxTokens = 0)
        {
            byte[] cquery = Utf8.ToNative(query, "query");
            GCHandle pin = GCHandle.Alloc(cquery, GCHandleType.Pinned);
            try
            {
                return Submit(docs, "docs", Pooling.Model, true, 0, truncate, maxTokens, pin.AddrOfPinnedObject());
            }
            finally
            {
                pin.Free();
            }
        }

        private Request Submit(string[] texts, string textsName, Pooling pooling, bool normalize, uint dimensions,
                               bool truncate, uint maxTokens, IntPtr query)
        {
            ThrowIfDisposed();
            if (texts == null) throw new ArgumentNullException(textsName);
            var p = new ember_embed_request_params();
            NativeMethods.ember_embed_request_params_init(ref p);
            p.pooling = pooling;
            p.normalize = normalize;
            p.dimensions = dimensions;
            p.truncate = truncate;
            p.max_tokens = maxTokens;
            p.query = query;
            using (var native = new NativeStrings(texts, textsName))
            {
                p.texts = native.Array;
                p.n_texts = native.Count;
                RequestHandle h;
                Status st = NativeMethods.ember_engine_submit_embed(Handle, ref p, out h);
                if (st < 0)
                {
                    var e = new EmberException(st, Utf8.FromNative(NativeMethods.ember_last_error()));
                    h.Dispose();
                    throw e;
                }
                return new Request(h, default(CancellationToken));
            }
        }
    }

    public sealed partial class Request
    {
        /// <summary>Floats per vector of an embedding request (0 for a generation request).</summary>
        public int EmbeddingDimensions
        {
            get
            {
                ThrowIfDisposed();
                return (int)NativeMethods.ember_request_embedding_dim(Handle).ToUInt64();
            }
        }

        /// <summary>An embedding request's vectors, one per text, once it is done (Wait first).
        /// EmberException (InvalidState) before, or when it was cancelled or failed.</summary>
        public float[][] Embeddings()
        {
            ThrowIfDisposed();
            UIntPtr n;
            EmberException.Check(NativeMethods.ember_request_embeddings(Handle, null, UIntPtr.Zero, out n));
            var flat = new float[(int)n.ToUInt64()];
            EmberException.Check(NativeMethods.ember_request_embeddings(Handle, flat, (UIntPtr)flat.Length, out n));
            int dim = EmbeddingDimensions;
            var result = new float[dim == 0 ? 0 : flat.Length / dim][];
            for (int i = 0; i < result.Length; ++i)
            {
                result[i] = new float[dim];
                Array.Copy(flat, i * dim, result[i], 0, dim);
            }
            return result;
        }
    }
}
