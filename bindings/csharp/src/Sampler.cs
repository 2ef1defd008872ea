using System;
using Ember.Native;

namespace Ember
{
    /// <summary>Sampling parameters (ember_sampler_params). The initial values are ember.h's defaults;
    /// the unit tests check them against ember_sampler_params_init.</summary>
    public sealed class SamplerParams
    {
        /// <summary>&lt;= 0 means greedy (the highest logit; ties go to the lowest id).</summary>
        public float Temperature = 1.0f;
        public int TopK = 0;
        public float TopP = 1.0f;
        public float MinP = 0.0f;
        public float RepeatPenalty = 1.0f;
        public float FrequencyPenalty = 0.0f;
        public float PresencePenalty = 0.0f;
        /// <summary>Tokens of history the penalties see.</summary>
        public int PenaltyLastN = 64;
        public ulong Seed = 0;
        /// <summary>0 (off) to 20: record the top-n log-probabilities at every sample (Sampler.Logprobs).</summary>
        public int Logprobs = 0;

        /// <summary>Parameters for greedy decoding.</summary>
        public static SamplerParams Greedy() { return new SamplerParams { Temperature = 0.0f }; }

        internal ember_sampler_params ToNative()
        {
            var p = new ember_sampler_params();
            NativeMethods.ember_sampler_params_init(ref p);
            p.temperature = Temperature;
            p.top_k = TopK;
            p.top_p = TopP;
            p.min_p = MinP;
            p.repeat_penalty = RepeatPenalty;
            p.frequency_penalty = FrequencyPenalty;
            p.presence_penalty = PresencePenalty;
            p.penalty_last_n = PenaltyLastN;
            p.seed = Seed;
            p.n_logprobs = Logprobs;
            return p;
        }
    }

    /// <summary>A token and its log-probability under the model (natural log).</summary>
    public partial struct TokenLogprob
    {
        public readonly int Token;
        public readonly float Logprob;
        public TokenLogprob(int token, float logprob) { Token = token; Logprob = logprob; }
    }

    /// <summary>Turns logits into tokens and keeps the penalty history. Use from one thread at a time;
    /// give each session (or fork) its own.</summary>
    public sealed class Sampler : IDisposable
    {
        internal readonly SamplerHandle Handle;

        /// <summary>Throws EmberException (InvalidArgument) for out-of-range parameters.</summary>
        public Sampler(SamplerParams parameters = null)
        {
            var p = (parameters ?? new SamplerParams()).ToNative();
            SamplerHandle h;
            Status st = NativeMethods.ember_sampler_create(ref p, out h);
            if (st < 0)
            {
                var e = new EmberException(st, Utf8.FromNative(NativeMethods.ember_last_error()));
                h.Dispose();
                throw e;
            }
            Handle = h;
        }

        public static Sampler Greedy() { return new Sampler(SamplerParams.Greedy()); }

        public void Dispose() { Handle.Dispose(); }

        internal void ThrowIfDisposed()
        {
            if (Handle.IsClosed) throw new ObjectDisposedException("Sampler");
        }

        /// <summary>Samples a token from logits (not recorded: call Accept for the token used).</summary>
        public int Sample(float[] logits)
        {
            ThrowIfDisposed();
            if (logits == null) throw new ArgumentNullException("logits");
            int token;
            EmberException.Check(NativeMethods.ember_sampler_sample(Handle, logits, (UIntPtr)logits.Length, out token));
            return token;
        }

        /// <summary>Records a token in the penalty history.</summary>
        public void Accept(int token)
        {
            ThrowIfDisposed();
            EmberException.Check(NativeMethods.ember_sampler_accept(Handle, token));
        }

        /// <summary>Constrains sampling by the grammar, from its beginning (null removes it). The sampler keeps
        /// its own reference. Sampling throws EmberException (GrammarDeadEnd) where no token can continue.</summary>
        public void SetGrammar(Grammar grammar)
        {
            ThrowIfDisposed();
            if (grammar == null)
            {
                // A null SafeHandle cannot be marshalled: pass an invalid one, which the library reads as NULL.
                using (var none = new GrammarHandle())
                    EmberException.Check(NativeMethods.ember_sampler_set_grammar(Handle, none));
                return;
            }
            EmberException.Check(NativeMethods.ember_sampler_set_grammar(Handle, grammar.Handle));
        }

        /// <summary>The log-probability of the last sampled token and the top-n tokens' (best first), when
        /// SamplerParams.Logprobs > 0.</summary>
        public TokenLogprob[] Logprobs(out TokenLogprob sampled)
        {
            ThrowIfDisposed();
            var top = new ember_token_logprob[20];
            ember_token_logprob s;
            UIntPtr n;
            EmberException.Check(NativeMethods.ember_sampler_logprobs(Handle, out s, top, (UIntPtr)top.Length, out n));
            return TokenLogprob.FromNative(s, top, n, out sampled);
        }

        /// <summary>Clears the history and re-seeds the random generator.</summary>
        public void Reset()
        {
            ThrowIfDisposed();
            EmberException.Check(NativeMethods.ember_sampler_reset(Handle));
        }
    }
}
