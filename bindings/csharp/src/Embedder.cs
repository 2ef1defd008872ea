using System;
using System.Text;
using Ember.Native;

namespace Ember
{
    /// <summary>Embeddings and reranking (ember_embedder): texts to vectors with an embedding model, or
    /// documents scored for a query with a reranking model (docs/embeddings.md). One thread at a time.</summary>
    public sealed class Embedder : IDisposable
    {
        private IntPtr handle_;

        /// <summary>dimensions 0: the model's width; pooling Model: the model's own. Throws EmberException
        /// (Unsupported for a model that generates rather than embeds).</summary>
        public Embedder(Model model, bool normalize = true, uint dimensions = 0, Pooling pooling = Pooling.Model,
                        uint threads = 0, uint maxTokens = 0, bool truncate = false)
        {
            if (model == null) throw new ArgumentNullException("model");
            var p = new ember_embed_params();
            NativeMethods.ember_embed_params_init(ref p);
            p.normalize = normalize;
            p.dimensions = dimensions;
            p.pooling = pooling;
            p.n_threads = threads;
            p.max_tokens = maxTokens;
            p.truncate = truncate;
            EmberException.Check(NativeMethods.ember_embedder_create(model.Handle, ref p, out handle_));
        }

        /// <summary>Floats per vector (1 for a reranker).</summary>
        public int Dimensions { get { return (int)NativeMethods.ember_embedder_dim(Live()); } }
        public bool IsReranker { get { return NativeMethods.ember_embedder_is_reranker(Live()); } }

        /// <summary>One vector per text.</summary>
        public float[][] Embed(params string[] texts)
        {
            if (texts == null) throw new ArgumentNullException("texts");
            int dim = Dimensions;
            var flat = new float[texts.Length * dim];
            using (var native = new NativeStrings(texts, "texts"))
                EmberException.Check(NativeMethods.ember_embed(Live(), native.Array, IntPtr.Zero, native.Count, flat,
                                                               (UIntPtr)flat.Length));
            var result = new float[texts.Length][];
            for (int i = 0; i < texts.Length; ++i)
            {
                result[i] = new float[dim];
                Array.Copy(flat, i * dim, result[i], 0, dim);
            }
            return result;
        }

        /// <summary>Each document's relevance score for the query (a reranking model).</summary>
        public float[] Rerank(string query, params string[] documents)
        {
            if (query == null) throw new ArgumentNullException("query");
            if (documents == null) throw new ArgumentNullException("documents");
            var scores = new float[documents.Length];
            using (var native = new NativeStrings(documents, "documents"))
                EmberException.Check(NativeMethods.ember_rerank(Live(), Utf8.ToNative(query, "query"), native.Array, native.Count, scores));
            return scores;
        }

        private IntPtr Live()
        {
            if (handle_ == IntPtr.Zero) throw new ObjectDisposedException("Embedder");
            return handle_;
        }

        public void Dispose()
        {
            NativeMethods.ember_embedder_free(handle_);
            handle_ = IntPtr.Zero;
        }
    }
}
