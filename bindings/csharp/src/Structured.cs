using System;
using Ember.Native;

namespace Ember
{
    /// <summary>What one Session.Generate call takes besides the sampler.</summary>
    public sealed class GenerateOptions
    {
        /// <summary>Tokens to generate at most; 0: until end of generation or a full context.</summary>
        public int MaxTokens = 128;
        /// <summary>Up to 16 stop strings of up to 1024 bytes: generation ends (Status.EndOfGeneration)
        /// once the text contains one, across token boundaries. Neither the stop string nor anything
        /// after it reaches onToken: text that could begin one is held back until the next token decides,
        /// so a token's text may be "" and a later one's longer than its own.</summary>
        public string[] Stop;
        /// <summary>Constrains this call only (replacing the sampler's own grammar for the call).</summary>
        public Grammar Grammar;
    }

    /// <summary>What Engine.Submit takes besides the prompt and the callback.</summary>
    public sealed class RequestOptions
    {
        /// <summary>Tokens to generate at most; 0: until end of generation or a full context.</summary>
        public int MaxTokens = 128;
        /// <summary>null: greedy.</summary>
        public SamplerParams Sampling;
        /// <summary>Stop strings (copied at submit): the request ends (RequestState.Done) once its text
        /// contains one; neither its text nor the callback get the stop string or what follows it.</summary>
        public string[] Stop;
        /// <summary>Constrains the request's sampling; the request keeps its own reference, so the grammar
        /// may be disposed after submit. A dead end fails the request with Status.GrammarDeadEnd.</summary>
        public Grammar Grammar;
        /// <summary>Draft with the engine's speculation (EngineOptions.Speculation), if any; false: plain
        /// decoding. The tokens are the same either way.</summary>
        public bool Speculate = true;
    }

    /// <summary>A request's counters (ember_request_stats).</summary>
    public sealed class RequestStats
    {
        /// <summary>Tokens generated so far.</summary>
        public ulong Tokens;
        /// <summary>Engine steps whose pass evaluated its generated tokens.</summary>
        public ulong DecodeSteps;
        public ulong Drafted;
        public ulong Accepted;
        /// <summary>Accepted / Drafted (0 when nothing was drafted).</summary>
        public double AcceptanceRate;
    }

    public sealed partial class Session
    {
        /// <summary>Stop strings for Next and GenerateTokens (up to 16 of up to 1024 bytes; none removes
        /// them). Once the generated text contains one, that step returns an event with
        /// IsEndOfGeneration set and the text before it (its token was fed); a step whose text could
        /// begin a stop string holds it back (its Text may be "") until a later step decides. The match
        /// starts anew after an end, after this call, and when the session was fed, truncated or
        /// restored between two steps. Generate(sampler, options, ...) takes its own
        /// (GenerateOptions.Stop). EmberException (InvalidArgument) for too many or too long strings.</summary>
        public void SetStop(params string[] stop)
        {
            ThrowIfDisposed();
            using (var s = new NativeStrings(stop, "stop"))
                EmberException.Check(NativeMethods.ember_session_set_stop(Handle, s.Array, s.Count));
        }

        /// <summary>The text Next holds back as a possible start of a stop string, for a caller that ends
        /// generation itself (its own token limit); the match starts anew.</summary>
        public string FlushStop()
        {
            ThrowIfDisposed();
            IntPtr text;
            UIntPtr len;
            EmberException.Check(NativeMethods.ember_session_flush_stop(Handle, out text, out len));
            return Utf8.FromNative(text, checked((int)len.ToUInt64()));
        }
    }

    public sealed partial class Request
    {
        /// <summary>The log-probabilities of the request's i-th generated token (0-based, in the order Poll
        /// returns tokens) when its SamplerParams.Logprobs > 0: the sampled token's in `sampled`, the top
        /// tokens' returned, best first. EmberException: NotFound while token i is not generated,
        /// InvalidState when Logprobs was 0.</summary>
        public TokenLogprob[] Logprobs(int i, out TokenLogprob sampled)
        {
            ThrowIfDisposed();
            if (i < 0) throw new ArgumentOutOfRangeException("i");
            var top = new ember_token_logprob[20];
            ember_token_logprob s;
            UIntPtr n;
            EmberException.Check(NativeMethods.ember_request_logprobs(Handle, (UIntPtr)i, out s, top, (UIntPtr)top.Length, out n));
            return TokenLogprob.FromNative(s, top, n, out sampled);
        }
    }

    public partial struct TokenLogprob
    {
        /// <summary>What ember_sampler_logprobs / ember_request_logprobs wrote: the first n of top.</summary>
        internal static TokenLogprob[] FromNative(ember_token_logprob s, ember_token_logprob[] top, UIntPtr n,
                                                  out TokenLogprob sampled)
        {
            sampled = new TokenLogprob(s.token, s.logprob);
            var result = new TokenLogprob[Math.Min((int)n.ToUInt64(), top.Length)];
            for (int k = 0; k < result.Length; k++) result[k] = new TokenLogprob(top[k].token, top[k].logprob);
            return result;
        }
    }
}
