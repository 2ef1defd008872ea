using System;
using System.Collections.Generic;

namespace Ember.Tests
{
    /// <summary>Session.SetPrecision on stories15M (Q8_0 weights): Precision.High moves the logits a
    /// little and not the greedy token; a value that is no Precision member is refused.</summary>
    internal static class PrecisionTests
    {
        private const string Prompt = "Once upon a time";

        public static void Register(List<KeyValuePair<string, Action>> tests)
        {
            Action<string, Action> add = (n, a) => tests.Add(new KeyValuePair<string, Action>(n, a));
            add("high_precision_moves_logits_not_the_greedy_token", HighMovesLogitsNotGreedyToken);
            add("unknown_precision_is_invalid_argument", UnknownPrecisionIsInvalidArgument);
        }

        private static SessionOptions CpuOptions(uint contextLength)
        {
            return new SessionOptions { ContextLength = contextLength, Backend = BackendKind.Cpu, Threads = 1 };
        }

        /// <summary>The prompt's logits on a new CPU session, after SetPrecision(precision) if given.</summary>
        private static float[] PromptLogits(Model model, Precision? precision)
        {
            using (var s = new Session(model, CpuOptions(64)))
            {
                if (precision.HasValue) s.SetPrecision(precision.Value);
                s.Feed(model.Tokenize(Prompt, true));
                return s.GetLogits();
            }
        }

        /// <summary>The highest logit's index (ties: the lowest, as the greedy sampler picks).</summary>
        private static int ArgMax(float[] logits)
        {
            int best = 0;
            for (int i = 1; i < logits.Length; i++)
                if (logits[i] > logits[best]) best = i;
            return best;
        }

        private static void HighMovesLogitsNotGreedyToken()
        {
            var model = ApiTests.SharedModelForTests();
            float[] def = PromptLogits(model, null);
            float[] high = PromptLogits(model, Precision.High);
            // Setting the default explicitly is the same as not setting it, bit for bit.
            float[] explicitDefault = PromptLogits(model, Precision.Default);
            Check.Equal(def.Length, explicitDefault.Length, "logits after SetPrecision(Default)");
            for (int i = 0; i < def.Length; i++)
                if (!def[i].Equals(explicitDefault[i]))
                    Check.Equal(def[i], explicitDefault[i], "logit " + i + " after SetPrecision(Default)");

            Check.Equal(def.Length, high.Length, "logits at high precision");
            double maxDiff = 0, lo = double.MaxValue, hi = double.MinValue;
            for (int i = 0; i < def.Length; i++)
            {
                maxDiff = Math.Max(maxDiff, Math.Abs(high[i] - def[i]));
                lo = Math.Min(lo, def[i]);
                hi = Math.Max(hi, def[i]);
            }
            Check.True(maxDiff > 0, "Precision.High gave the default's logits on a Q8_0 model");
            // A rounding change, not another computation: far below the spread of the logits.
            Check.True(maxDiff < 0.05 * (hi - lo), "logits moved by " + maxDiff + " (range " + lo + ".." + hi + ")");
            Check.Equal(ArgMax(def), ArgMax(high), "greedy token at high precision");
        }

        private static void UnknownPrecisionIsInvalidArgument()
        {
            var model = ApiTests.SharedModelForTests();
            using (var s = new Session(model, CpuOptions(16)))
            {
                foreach (int bad in new[] { 2, -1, 1000 })
                {
                    var e = Check.Throws<EmberException>(() => s.SetPrecision((Precision)bad), "SetPrecision(" + bad + ")");
                    Check.Equal(Status.InvalidArgument, e.Status, "status of SetPrecision(" + bad + ")");
                }
            }
        }
    }
}
