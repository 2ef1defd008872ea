using System;
using System.Text;
using Ember.Native;

namespace Ember
{
    /// <summary>A grammar that constrains sampling to the text it allows (ember_grammar): made from GBNF
    /// (llama.cpp's grammar syntax) or a JSON Schema, for one model's vocabulary. Attach it to a sampler
    /// (Sampler.SetGrammar); generated text then always matches it. Safe to share between samplers and
    /// threads. It keeps what it needs of the vocabulary, so it does not depend on the model.</summary>
    public sealed class Grammar : IDisposable
    {
        internal readonly GrammarHandle Handle;

        private Grammar(GrammarHandle h) { Handle = h; }

        /// <summary>Throws EmberException (InvalidArgument, with line and column) for malformed GBNF.</summary>
        public static Grammar FromGbnf(Model model, string gbnf) { return Create(model, gbnf, false); }

        /// <summary>Throws EmberException: InvalidArgument for malformed JSON or schema, Unsupported for a
        /// keyword outside the subset (the message names it with its JSON pointer).</summary>
        public static Grammar FromJsonSchema(Model model, string schema) { return Create(model, schema, true); }

        private static Grammar Create(Model model, string text, bool schema)
        {
            if (model == null) throw new ArgumentNullException("model");
            if (text == null) throw new ArgumentNullException(schema ? "schema" : "gbnf");
            byte[] bytes = Encoding.UTF8.GetBytes(text);
            GrammarHandle h;
            Status st = schema
                ? NativeMethods.ember_grammar_create_json_schema(model.Handle, bytes, (UIntPtr)bytes.Length, out h)
                : NativeMethods.ember_grammar_create_gbnf(model.Handle, bytes, (UIntPtr)bytes.Length, out h);
            if (st < 0)
            {
                var e = new EmberException(st, Utf8.FromNative(NativeMethods.ember_last_error()));
                h.Dispose();
                throw e;
            }
            return new Grammar(h);
        }

        public void Dispose() { Handle.Dispose(); }
    }
}
