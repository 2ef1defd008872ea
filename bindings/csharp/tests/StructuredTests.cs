using System;
using System.Collections.Generic;
using System.Globalization;
using System.Linq;
using System.Text;

namespace Ember.Tests
{
    /// <summary>Structured output through the binding on stories15M: a JSON Schema on Generate and on an
    /// engine request gives JSON that parses and validates; stop strings end Generate, Next and requests
    /// without emitting the stop text; logprobs are log-probabilities, sorted, and name the sampled
    /// token.</summary>
    internal static class StructuredTests
    {
        private const string Prompt = "Once upon a time";
        private const string NpcSchema = "{\"type\":\"object\",\"properties\":{" +
                                         "\"say\":{\"type\":\"string\",\"maxLength\":30}," +
                                         "\"action\":{\"enum\":[\"wave\",\"attack\",\"flee\"]}}," +
                                         "\"required\":[\"say\",\"action\"]}";

        public static void Register(List<KeyValuePair<string, Action>> tests)
        {
            Action<string, Action> add = (n, a) => tests.Add(new KeyValuePair<string, Action>(n, a));
            add("json_parser_refuses_what_is_not_json", JsonParserRefuses);
            add("json_schema_on_generate_and_request", JsonSchemaOnGenerateAndRequest);
            add("stop_strings_end_the_text_without_it", StopStrings);
            add("logprobs_sorted_and_of_the_sampled_token", Logprobs);
        }

        private static Model Model() { return ApiTests.SharedModelForTests(); }

        private static Session Prompted(Model m)
        {
            var s = new Session(m, new SessionOptions { ContextLength = 256 });
            s.Feed(m.Tokenize(Prompt, true));
            return s;
        }

        // ---- a strict JSON parser (RFC 8259, the whole text one value): what constrained text must be

        private sealed class Json
        {
            private readonly string s_;
            private int i_;
            private Json(string s) { s_ = s; }

            /// <summary>Dictionary&lt;string, object&gt;, List&lt;object&gt;, string, double, bool or null;
            /// FormatException for anything that is not JSON.</summary>
            public static object Parse(string text)
            {
                var p = new Json(text);
                object v = p.Value();
                p.Ws();
                if (p.i_ != text.Length) throw new FormatException("text after the value at " + p.i_);
                return v;
            }

            private void Ws() { while (i_ < s_.Length && " \t\r\n".IndexOf(s_[i_]) >= 0) i_++; }
            private char Peek() { Ws(); if (i_ >= s_.Length) throw new FormatException("unexpected end"); return s_[i_]; }
            private void Eat(char c) { if (Peek() != c) throw new FormatException("expected '" + c + "' at " + i_); i_++; }

            private object Value()
            {
                char c = Peek();
                if (c == '{')
                {
                    i_++;
                    var o = new Dictionary<string, object>();
                    if (Peek() == '}') { i_++; return o; }
                    while (true)
                    {
                        Peek();
                        string k = String();
                        Eat(':');
                        if (o.ContainsKey(k)) throw new FormatException("key " + k + " twice");
                        o[k] = Value();
                        if (Peek() == ',') { i_++; continue; }
                        Eat('}');
                        return o;
                    }
                }
                if (c == '[')
                {
                    i_++;
                    var a = new List<object>();
                    if (Peek() == ']') { i_++; return a; }
                    while (true)
                    {
                        a.Add(Value());
                        if (Peek() == ',') { i_++; continue; }
                        Eat(']');
                        return a;
                    }
                }
                if (c == '"') return String();
                foreach (var lit in new[] { "true", "false", "null" })
                    if (string.CompareOrdinal(s_, i_, lit, 0, lit.Length) == 0)
                    {
                        i_ += lit.Length;
                        return lit == "null" ? null : (object)(lit == "true");
                    }
                int start = i_;
                if (i_ < s_.Length && s_[i_] == '-') i_++;
                int intStart = i_;
                while (i_ < s_.Length && char.IsDigit(s_[i_])) i_++;
                if (i_ == intStart || (s_[intStart] == '0' && i_ - intStart > 1)) throw new FormatException("bad number at " + start);
                if (i_ < s_.Length && s_[i_] == '.')
                {
                    int f = ++i_;
                    while (i_ < s_.Length && char.IsDigit(s_[i_])) i_++;
                    if (i_ == f) throw new FormatException("bad fraction at " + start);
                }
                if (i_ < s_.Length && (s_[i_] == 'e' || s_[i_] == 'E'))
                {
                    i_++;
                    if (i_ < s_.Length && (s_[i_] == '+' || s_[i_] == '-')) i_++;
                    int e = i_;
                    while (i_ < s_.Length && char.IsDigit(s_[i_])) i_++;
                    if (i_ == e) throw new FormatException("bad exponent at " + start);
                }
                return double.Parse(s_.Substring(start, i_ - start), CultureInfo.InvariantCulture);
            }

            private string String()
            {
                if (i_ >= s_.Length || s_[i_] != '"') throw new FormatException("expected a string at " + i_);
                i_++;
                var b = new StringBuilder();
                while (true)
                {
                    if (i_ >= s_.Length) throw new FormatException("unterminated string");
                    char c = s_[i_++];
                    if (c == '"') return b.ToString();
                    if (c < 0x20) throw new FormatException("control character in a string at " + i_);
                    if (c != '\\') { b.Append(c); continue; }
                    if (i_ >= s_.Length) throw new FormatException("bad escape");
                    char e = s_[i_++];
                    switch (e)
                    {
                        case '"': case '\\': case '/': b.Append(e); break;
                        case 'b': b.Append('\b'); break;
                        case 'f': b.Append('\f'); break;
                        case 'n': b.Append('\n'); break;
                        case 'r': b.Append('\r'); break;
                        case 't': b.Append('\t'); break;
                        case 'u':
                            if (i_ + 4 > s_.Length) throw new FormatException("bad \\u");
                            b.Append((char)int.Parse(s_.Substring(i_, 4), NumberStyles.HexNumber, CultureInfo.InvariantCulture));
                            i_ += 4;
                            break;
                        default: throw new FormatException("bad escape at " + i_);
                    }
                }
            }
        }

        private static void JsonParserRefuses()
        {
            foreach (var bad in new[] { "", "{", "{\"a\":1,}", "[1 2]", "01", "\"a\"x", "tru", "{\"a\" 1}" })
                Check.Throws<FormatException>(() => Json.Parse(bad), "parsing " + bad);
            var v = (Dictionary<string, object>)Json.Parse(" {\"a\":[1,-2.5e3,\"x\\n\"],\"b\":null} ");
            Check.Equal(2, v.Count, "members");
        }

        /// <summary>Parses text as the NPC schema's object and checks it against the schema.</summary>
        private static void ValidNpc(string text)
        {
            object v;
            try { v = Json.Parse(text); }
            catch (FormatException e) { throw new AssertException("constrained output is not JSON: " + text + ": " + e.Message); }
            var o = v as Dictionary<string, object>;
            Check.True(o != null && o.Count == 2, "an object of the schema's two properties: " + text);
            var say = o.ContainsKey("say") ? o["say"] as string : null;
            Check.True(say != null && say.Length <= 30, "say, a string of at most 30: " + text);
            var action = o.ContainsKey("action") ? o["action"] as string : null;
            Check.True(action == "wave" || action == "attack" || action == "flee", "action in the enum: " + text);
        }

        private static void JsonSchemaOnGenerateAndRequest()
        {
            Model m = Model();
            using (var g = Grammar.FromJsonSchema(m, NpcSchema))
            {
                foreach (float temperature in new[] { 0f, 1f })
                    using (var sampler = new Sampler(new SamplerParams { Temperature = temperature, Seed = 7 }))
                    using (var s = Prompted(m))
                    {
                        var text = new StringBuilder();
                        GenerateResult r = s.Generate(sampler, new GenerateOptions { MaxTokens = 120, Grammar = g },
                                                      e => { text.Append(e.Text); return true; });
                        Check.Equal(Status.EndOfGeneration, r.Status, "ended at temperature " + temperature + ": " + text);
                        ValidNpc(text.ToString());
                    }
            }
            // On an engine request, which keeps its own reference to the grammar.
            using (var engine = new Engine(m, new EngineOptions { ContextLength = 256, MaxSequences = 2, Threads = 2 }))
            {
                Request req;
                using (var g = Grammar.FromJsonSchema(m, NpcSchema))
                    req = engine.Submit(m.Tokenize(Prompt, true), new RequestOptions { MaxTokens = 120, Grammar = g });
                using (req)
                {
                    Check.True(req.Wait(TimeSpan.FromSeconds(60)), "request ended");
                    ValidNpc(req.Text);
                }
                var disposed = Grammar.FromJsonSchema(m, NpcSchema);
                disposed.Dispose();
                Check.Throws<ObjectDisposedException>(
                    () => engine.Submit(m.Tokenize(Prompt, true), new RequestOptions { Grammar = disposed }), "a disposed grammar");
            }
        }

        private static void StopStrings()
        {
            Model m = Model();
            // Greedy text step by step, and a stop string from its middle: every case expects the text before it.
            var pieces = new List<string>();
            using (var sampler = Sampler.Greedy())
            using (var s = Prompted(m))
                foreach (TokenEvent e in s.GenerateTokens(sampler, 40)) pieces.Add(e.Text);
            string full = string.Concat(pieces);
            Check.True(full.Length >= 40, "greedy text long enough: " + full);
            string stop = full.Substring(full.Length / 2, 4);
            string before = full.Substring(0, full.IndexOf(stop, StringComparison.Ordinal));

            using (var sampler = Sampler.Greedy())
            using (var s = Prompted(m))
            {
                var text = new StringBuilder();
                GenerateResult r = s.Generate(sampler, new GenerateOptions { MaxTokens = 40, Stop = new[] { "never appears", stop } },
                                              e => { text.Append(e.Text); return true; });
                Check.Equal(Status.EndOfGeneration, r.Status, "Generate ended by the stop string");
                Check.Equal(before, text.ToString(), "Generate's text with stop '" + stop + "'");
            }

            // Next: the step that completes the stop string ends generation.
            using (var sampler = Sampler.Greedy())
            using (var s = Prompted(m))
            {
                s.SetStop(stop);
                var text = new StringBuilder();
                bool ended = false;
                foreach (TokenEvent e in s.GenerateTokens(sampler, 40))
                {
                    text.Append(e.Text);
                    ended = e.IsEndOfGeneration;
                }
                Check.True(ended, "Next ended by the stop string");
                Check.Equal(before, text.ToString(), "Next's text with stop '" + stop + "'");
            }

            // Ending before the match is decided: FlushStop gives what is held. The stop string begins
            // with the last two characters of the 10th (or a later, long enough) step and never completes.
            int k = Enumerable.Range(9, pieces.Count - 9).First(i => pieces[i].Length >= 2);
            string held = pieces[k].Substring(pieces[k].Length - 2);
            using (var sampler = Sampler.Greedy())
            using (var s = Prompted(m))
            {
                s.SetStop(held + "\u0001");
                var text = new StringBuilder();
                foreach (TokenEvent e in s.GenerateTokens(sampler, k + 1)) text.Append(e.Text);
                string rest = s.FlushStop();
                Check.Equal(held, rest, "FlushStop");
                Check.Equal(string.Concat(pieces.Take(k + 1)), text + rest, "Next's text and FlushStop's");
                Check.Throws<ArgumentException>(() => s.SetStop("a\0b"), "a NUL inside a stop string");
                var e17 = Check.Throws<EmberException>(() => s.SetStop(Enumerable.Repeat("x", 17).ToArray()), "17 stop strings");
                Check.Equal(Status.InvalidArgument, e17.Status, "17 stop strings");
            }

            // An engine request: its text ends before the stop string.
            using (var engine = new Engine(m, new EngineOptions { ContextLength = 256, MaxSequences = 2, Threads = 2 }))
            {
                Func<RequestOptions, string> run = o =>
                {
                    using (var req = engine.Submit(m.Tokenize(Prompt, true), o))
                    {
                        Check.True(req.Wait(TimeSpan.FromSeconds(60)), "request ended");
                        return req.Text;
                    }
                };
                string whole = run(new RequestOptions { MaxTokens = 40 });
                int at = whole.IndexOf(stop, StringComparison.Ordinal);
                if (at < 0) throw new SkipException("the engine's text lacks '" + stop + "': " + whole);
                Check.Equal(whole.Substring(0, at), run(new RequestOptions { MaxTokens = 40, Stop = new[] { stop } }), "request with stop");
            }
        }

        /// <summary>Log-probabilities &lt;= 0, best first, n of them, and the sampled token's is its own.</summary>
        private static void CheckLogprobs(TokenLogprob sampled, TokenLogprob[] top, int n, int token)
        {
            Check.Equal(token, sampled.Token, "the sampled token");
            Check.True(sampled.Logprob <= 0, "a log-probability");
            Check.Equal(n, top.Length, "top logprobs");
            for (int i = 0; i < top.Length; i++)
            {
                Check.True(top[i].Logprob <= 0 && (i == 0 || top[i].Logprob <= top[i - 1].Logprob), "<= 0 and best first");
                if (top[i].Token == token) Check.Equal(sampled.Logprob, top[i].Logprob, "the sampled token's in the top");
            }
        }

        private static void Logprobs()
        {
            Model m = Model();
            var p = new SamplerParams { Seed = 3, Logprobs = 5 };
            using (var sampler = new Sampler(p))
            using (var s = Prompted(m))
            {
                TokenLogprob sampled;
                var none = Check.Throws<EmberException>(() => sampler.Logprobs(out sampled), "before any sample");
                Check.Equal(Status.InvalidState, none.Status, "before any sample");
                for (int i = 0; i < 8; i++)
                {
                    TokenEvent e = s.Next(sampler);
                    TokenLogprob[] top = sampler.Logprobs(out sampled);
                    CheckLogprobs(sampled, top, 5, e.Token);
                }
            }
            // Per token of an engine request.
            using (var engine = new Engine(m, new EngineOptions { ContextLength = 256, MaxSequences = 2, Threads = 2 }))
            using (var req = engine.Submit(m.Tokenize(Prompt, true), new RequestOptions { MaxTokens = 6, Sampling = p }))
            {
                Check.True(req.Wait(TimeSpan.FromSeconds(60)), "request ended");
                RequestState state;
                int[] tokens = req.Poll(out state);
                Check.Equal(6, tokens.Length, "tokens");
                TokenLogprob sampled;
                for (int i = 0; i < tokens.Length; i++)
                {
                    TokenLogprob[] top = req.Logprobs(i, out sampled);
                    CheckLogprobs(sampled, top, 5, tokens[i]);
                }
                var past = Check.Throws<EmberException>(() => req.Logprobs(tokens.Length, out sampled), "past the end");
                Check.Equal(Status.NotFound, past.Status, "past the end");
            }
        }
    }
}
