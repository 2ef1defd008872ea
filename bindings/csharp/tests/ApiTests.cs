using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using Ember.Native;

namespace Ember.Tests
{
    /// <summary>The public API on the repository's stories15M model, compared with the C API's own
    /// greedy output (ember-greedy-ref).</summary>
    internal static class ApiTests
    {
        private const string Prompt = "Once upon a time, there was a little";
        private const int N = 24;

        public static void Register(List<KeyValuePair<string, Action>> tests)
        {
            Action<string, Action> add = (n, a) => tests.Add(new KeyValuePair<string, Action>(n, a));
            add("version_and_abi", VersionAndAbi);
            add("defaults_match_params_init", DefaultsMatchParamsInit);
            add("load_missing_file_is_io_error", LoadMissingFile);
            add("load_bad_arguments", LoadBadArguments);
            add("load_malformed_file_is_invalid_model", LoadMalformedFile);
            add("load_progress_and_cancel", LoadProgressAndCancel);
            add("model_info_and_tokenizer", ModelInfoAndTokenizer);
            add("session_says_its_backend", SessionBackend);
            add("greedy_equals_c_reference", GreedyEqualsReference);
            add("callback_generate_equals_c_reference", CallbackGenerateEqualsReference);
            add("gc_inside_callbacks", GcInsideCallbacks);
            add("dispose_twice_and_use_after_dispose", DisposeTwiceAndUseAfterDispose);
            add("errors_carry_status_and_message", ErrorsCarryStatusAndMessage);
            add("save_restore_fork_truncate", SaveRestoreForkTruncate);
            add("cancel_generation_with_token", CancelGeneration);
            add("cancel_feed_with_token", CancelFeed);
            add("callback_exception_is_rethrown", CallbackExceptionIsRethrown);
            add("engine_request_equals_c_reference", EngineRequest);
            add("engine_embedding_request", EngineEmbed);
            add("grammar_constrains_and_logprobs", GrammarAndLogprobs);
        }

        // ---- shared data

        private static string ModelPath()
        {
            string dir = Environment.GetEnvironmentVariable("EMBER_REPO_MODELS");
            if (string.IsNullOrEmpty(dir)) throw new SkipException("EMBER_REPO_MODELS is not set");
            string path = Path.Combine(dir, "stories15M-q8_0.gguf");
            if (!File.Exists(path)) throw new SkipException(path + " is missing");
            return path;
        }

        private static Model model_;
        internal static Model SharedModelForTests() { return SharedModel(); }
        private static Model SharedModel()
        {
            if (model_ == null) model_ = Model.Load(ModelPath());
            return model_;
        }

        private static List<int> reference_;
        /// <summary>ember-greedy-ref MODEL PROMPT N: the C API's greedy ids.</summary>
        private static List<int> Reference()
        {
            if (reference_ != null) return reference_;
            string exe = Environment.GetEnvironmentVariable("EMBER_GREEDY_REF");
            if (string.IsNullOrEmpty(exe) || !File.Exists(exe)) throw new SkipException("EMBER_GREEDY_REF is not set to ember-greedy-ref");
            reference_ = RunReference(exe, ModelPath(), Prompt, N);
            Check.True(reference_.Count > 0, "ember-greedy-ref printed no tokens");
            return reference_;
        }

        internal static List<int> RunReference(string exe, string model, string prompt, int n)
        {
            var psi = new ProcessStartInfo(exe)
            {
                Arguments = Quote(model) + " " + Quote(prompt) + " " + n,
                UseShellExecute = false,
                RedirectStandardOutput = true,
            };
            using (var p = Process.Start(psi))
            {
                string output = p.StandardOutput.ReadToEnd();
                p.WaitForExit();
                Check.Equal(0, p.ExitCode, "ember-greedy-ref's exit status");
                return output.Split(new[] { '\n' }, StringSplitOptions.RemoveEmptyEntries).Select(int.Parse).ToList();
            }
        }

        private static string Quote(string s) { return "\"" + s.Replace("\\", "\\\\").Replace("\"", "\\\"") + "\""; }

        private static Session PromptedSession(Model model, SessionOptions options = null)
        {
            var s = new Session(model, options ?? new SessionOptions { ContextLength = 512 });
            s.Feed(model.Tokenize(Prompt, true));
            return s;
        }

        // ---- tests

        private static void VersionAndAbi()
        {
            var t = LayoutTable.Parse(LayoutTests.TableText());
            string want = t.Consts["EMBER_VERSION_MAJOR"] + "." + t.Consts["EMBER_VERSION_MINOR"] + "." + t.Consts["EMBER_VERSION_PATCH"];
            Check.Equal(want, EmberLibrary.Version, "ember_version()");
            Check.Equal(EmberLibrary.AbiVersion, EmberLibrary.LoadedAbiVersion, "ember_abi_version()");
            Check.Equal("EMBER_ERR_IO", EmberException.StatusName(Status.IO), "ember_status_string");
        }

        private static void SessionBackend()
        {
            var model = SharedModel();
            using (var s = new Session(model, new SessionOptions { ContextLength = 256, Backend = BackendKind.Cpu, Threads = 1 }))
            {
                Check.Equal(BackendKind.Cpu, s.Backend, "session backend");
                Check.Equal(1, s.Threads, "session threads");
                Check.True(Session.DefaultThreadCount >= 1, "default thread count >= 1");
            }
        }

        private static void DefaultsMatchParamsInit()
        {
            // The C# classes spell the defaults out (so they show in IntelliSense); they must be the
            // library's.
            var sp = new ember_sampler_params();
            NativeMethods.ember_sampler_params_init(ref sp);
            var s = new SamplerParams();
            Check.Equal(sp.temperature, s.Temperature, "temperature");
            Check.Equal(sp.top_k, s.TopK, "top_k");
            Check.Equal(sp.top_p, s.TopP, "top_p");
            Check.Equal(sp.min_p, s.MinP, "min_p");
            Check.Equal(sp.repeat_penalty, s.RepeatPenalty, "repeat_penalty");
            Check.Equal(sp.frequency_penalty, s.FrequencyPenalty, "frequency_penalty");
            Check.Equal(sp.presence_penalty, s.PresencePenalty, "presence_penalty");
            Check.Equal(sp.penalty_last_n, s.PenaltyLastN, "penalty_last_n");
            Check.Equal(sp.seed, s.Seed, "seed");
            Check.Equal((uint)System.Runtime.InteropServices.Marshal.SizeOf(typeof(ember_sampler_params)), sp.struct_size, "sampler struct_size");

            var ss = new ember_session_params();
            NativeMethods.ember_session_params_init(ref ss);
            var o = new SessionOptions();
            Check.Equal(ss.n_ctx, o.ContextLength, "n_ctx");
            Check.Equal(ss.n_threads, o.Threads, "n_threads");
            Check.Equal(ss.n_batch, o.BatchSize, "n_batch");
            Check.Equal(ss.seed, o.Seed, "session seed");
            Check.Equal(ss.backend, o.Backend, "backend");
            Check.Equal(ss.n_seq_max, o.MaxSequences, "n_seq_max");
            Check.Equal(ss.kv_type, o.KvType, "kv_type");

            var ep = new ember_engine_params();
            NativeMethods.ember_engine_params_init(ref ep);
            var e = new EngineOptions();
            Check.Equal(ep.n_ctx, e.ContextLength, "engine n_ctx");
            Check.Equal(ep.n_seq_max, e.MaxSequences, "engine n_seq_max");
            Check.Equal(ep.kv_bytes, e.KvBytes, "engine kv_bytes");
            Check.Equal(ep.n_threads, e.Threads, "engine n_threads");
            Check.Equal(ep.n_batch, e.BatchSize, "engine n_batch");
            Check.Equal(ep.backend, e.Backend, "engine backend");
            Check.Equal(ep.manual_step, e.ManualStep, "engine manual_step");
            Check.Equal(ep.kv_type, e.KvType, "engine kv_type");
        }

        private static void LoadMissingFile()
        {
            string path = Path.Combine(Path.GetTempPath(), "ember-csharp-no-such-model-" + Guid.NewGuid() + ".gguf");
            var e = Check.Throws<EmberException>(() => Model.Load(path), "loading a missing file");
            Check.Equal(Status.IO, e.Status, "status");
            Check.True(e.Message.Contains(path), "the message names the path: " + e.Message);
            Check.True(e.NativeMessage.Length > 0, "ember_last_error() was read");
        }

        private static void LoadBadArguments()
        {
            Check.Throws<ArgumentNullException>(() => Model.Load(null), "Load(null)");
            Check.Throws<ArgumentException>(() => Model.Load(""), "Load(\"\")");
            Check.Throws<ArgumentException>(() => Model.Load("a\0b"), "a path with a NUL");
            Check.Throws<ArgumentNullException>(() => new Session(null), "new Session(null)");
            Check.Throws<ArgumentNullException>(() => new Engine(null), "new Engine(null)");
        }

        private static void LoadMalformedFile()
        {
            string path = Path.GetTempFileName();
            try
            {
                File.WriteAllBytes(path, new byte[] { (byte)'G', (byte)'G', (byte)'U', (byte)'F', 3, 0, 0, 0, 1, 2 });
                var e = Check.Throws<EmberException>(() => Model.Load(path), "loading a truncated GGUF");
                Check.Equal(Status.InvalidModel, e.Status, "status: " + e.Message);
            }
            finally
            {
                File.Delete(path);
            }
        }

        private static void LoadProgressAndCancel()
        {
            string path = ModelPath();
            var seen = new List<float>();
            using (var m = Model.Load(path, new ModelLoadOptions { Progress = p => { seen.Add(p); return true; } }))
                Check.True(m.Info.VocabularySize > 0, "the model loaded");
            Check.True(seen.Count > 0, "progress was reported");
            Check.Equal(1.0f, seen[seen.Count - 1], "the last progress");

            Check.Throws<OperationCanceledException>(
                () => Model.Load(path, new ModelLoadOptions { Progress = p => false }), "a progress callback returning false");
            var cts = new CancellationTokenSource();
            Check.Throws<OperationCanceledException>(
                () => Model.Load(path, new ModelLoadOptions { Progress = p => { cts.Cancel(); return true; }, CancellationToken = cts.Token }),
                "a token cancelled during the load");
        }

        private static void ModelInfoAndTokenizer()
        {
            Model m = SharedModel();
            ModelInfo info = m.Info;
            Check.Equal("llama", info.Architecture, "architecture");
            Check.Equal(32000, info.VocabularySize, "n_vocab");
            Check.True(info.LayerCount > 0 && info.ParameterCount > 0, "layers and params");
            Check.Equal("llama", m.GetMetadata("general.architecture"), "general.architecture");
            Check.Equal<string>(null, m.GetMetadata("no.such.key"), "a missing key");

            int[] tokens = m.Tokenize("Hello world", true);
            Check.Equal(m.BosToken, tokens[0], "BOS first");
            Check.Equal("Hello world", m.Detokenize(tokens), "round trip");
            Check.Equal("Hello world", m.Detokenize(m.Tokenize("Hello world", false)), "round trip without BOS");
            Check.Equal(" world", System.Text.Encoding.UTF8.GetString(m.TokenToPiece(tokens[tokens.Length - 1])).Replace('\u2581', ' '), "last piece");
            Check.True(m.IsEndOfGeneration(m.EosToken), "EOS ends generation");
            Check.True(!m.IsEndOfGeneration(tokens[1]), "a word does not");
            string unicode = "Grüße, 世界";
            Check.Equal(unicode, m.Detokenize(m.Tokenize(unicode, false)), "UTF-8 round trip");
            var e = Check.Throws<EmberException>(() => m.TokenToPiece(1 << 20), "a token outside the vocabulary");
            Check.Equal(Status.InvalidArgument, e.Status, "status");
        }

        private static List<int> WithoutEog(IEnumerable<TokenEvent> events)
        {
            return events.Where(e => !e.IsEndOfGeneration).Select(e => e.Token).ToList();
        }

        private static void GreedyEqualsReference()
        {
            List<int> want = Reference();
            Model m = SharedModel();
            using (var s = PromptedSession(m))
            using (var sampler = Sampler.Greedy())
            {
                var events = s.GenerateTokens(sampler, N).ToList();
                Check.SequenceEqual(want, WithoutEog(events), "GenerateTokens vs ember-greedy-ref");
                string text = string.Concat(events.Select(e => e.Text));
                Check.True(text.Length > 0, "text was generated");
            }
            using (var s = PromptedSession(m))
            using (var sampler = Sampler.Greedy())
            {
                string pieces = string.Concat(s.Generate(sampler, N));
                var ids = m.Tokenize(Prompt, true).Concat(want).ToArray();
                Check.Equal(m.Detokenize(ids), Prompt + pieces, "the streamed pieces spell the reference's text");
            }
        }

        private static void CallbackGenerateEqualsReference()
        {
            List<int> want = Reference();
            Model m = SharedModel();
            using (var s = PromptedSession(m))
            using (var sampler = Sampler.Greedy())
            {
                var got = new List<int>();
                GenerateResult r = s.Generate(sampler, N, e => { got.Add(e.Token); return true; });
                Check.SequenceEqual(want, got.Take(want.Count).ToList(), "ember_generate callback vs ember-greedy-ref");
                Check.Equal(got.Count, r.Count, "count");

                var stopped = new List<int>();
                r = s.Generate(sampler, N, e => { stopped.Add(e.Token); return stopped.Count < 3; });
                Check.Equal(Status.Stopped, r.Status, "returning false stops");
                Check.Equal(3, stopped.Count, "tokens seen before stopping");
            }
        }

        private static void GrammarAndLogprobs()
        {
            Model m = SharedModel();
            var err = Check.Throws<EmberException>(() => Grammar.FromGbnf(m, "root ::= [a-"), "malformed GBNF");
            Check.Equal(Status.InvalidArgument, err.Status, "GBNF status");
            Check.True(err.Message.Contains("line 1, column"), "line and column in: " + err.Message);
            err = Check.Throws<EmberException>(() => Grammar.FromJsonSchema(m, "{\"type\":\"string\",\"format\":\"date\"}"), "format");
            Check.Equal(Status.Unsupported, err.Status, "schema status");
            using (var g = Grammar.FromJsonSchema(m, "{\"enum\":[\"wave\",\"flee\"]}"))
            using (var s = PromptedSession(m))
            using (var sampler = new Sampler(new SamplerParams { Temperature = 0, Logprobs = 3 }))
            {
                sampler.SetGrammar(g);
                string text = string.Concat(s.Generate(sampler, 20));
                Check.True(text == "\"wave\"" || text == "\"flee\"", "constrained text: " + text);
                TokenLogprob sampled;
                TokenLogprob[] top = sampler.Logprobs(out sampled);
                Check.Equal(3, top.Length, "top-n");
                Check.True(top[0].Logprob >= top[1].Logprob && top[1].Logprob >= top[2].Logprob, "best first");
                Check.True(sampled.Logprob <= 0, "a log-probability");
                sampler.SetGrammar(null);
            }
        }

        private static void Collect()
        {
            GC.Collect();
            GC.WaitForPendingFinalizers();
            GC.Collect();
        }

        private static void GcInsideCallbacks()
        {
            // Callbacks that collect everything collectable while native code is below them on the
            // stack: a delegate or GCHandle that the binding failed to keep alive would be freed here
            // and the next call back into it would crash, or the results would differ.
            string path = ModelPath();
            int progressCalls = 0;
            using (var m = Model.Load(path, new ModelLoadOptions { Progress = p => { progressCalls++; Collect(); return true; } }))
            {
                Check.True(progressCalls > 0, "progress called");
                List<int> want = Reference();
                using (var s = PromptedSession(m))
                using (var sampler = Sampler.Greedy())
                {
                    var got = new List<int>();
                    s.Generate(sampler, N, e =>
                    {
                        got.Add(e.Token);
                        for (int i = 0; i < 100; i++) new object().GetHashCode(); // garbage to collect
                        Collect();
                        return true;
                    });
                    Check.SequenceEqual(want, got.Take(want.Count).ToList(), "tokens with GC.Collect in every callback");
                }
                using (var engine = new Engine(m, new EngineOptions { ContextLength = 256, MaxSequences = 2 }))
                {
                    int calls = 0;
                    using (var r = engine.Submit(m.Tokenize(Prompt, true), 8, null, e => { calls++; Collect(); return true; }))
                    {
                        Collect();
                        Check.True(r.Wait(TimeSpan.FromSeconds(30)), "the request ended");
                        Check.Equal(8, calls, "request callbacks (engine thread) with GC.Collect");
                    }
                }
            }
            Collect();
        }

        private static void DisposeTwiceAndUseAfterDispose()
        {
            string path = ModelPath();
            var m = Model.Load(path);
            var s = new Session(m, new SessionOptions { ContextLength = 64 });
            var sampler = Sampler.Greedy();
            var engine = new Engine(m, new EngineOptions { ContextLength = 64, MaxSequences = 1 });
            var r = engine.Submit(new[] { m.BosToken }, 2);
            // The model first: sessions and engines hold it, so it must stay usable under them.
            m.Dispose();
            m.Dispose();
            s.Feed(new[] { 1 });
            Check.Equal(1, s.Position, "a session outliving its Model object's Dispose still runs");
            r.Wait();
            engine.Dispose();
            engine.Dispose();
            Check.True(r.State == RequestState.Done || r.State == RequestState.Cancelled, "the request outlives its engine");
            r.Dispose();
            r.Dispose();
            s.Dispose();
            s.Dispose();
            sampler.Dispose();
            sampler.Dispose();

            Check.Throws<ObjectDisposedException>(() => m.Tokenize("x"), "Model.Tokenize after Dispose");
            Check.Throws<ObjectDisposedException>(() => { var i = m.Info; }, "Model.Info after Dispose");
            Check.Throws<ObjectDisposedException>(() => new Session(m), "new Session on a disposed model");
            Check.Throws<ObjectDisposedException>(() => s.Feed(new[] { 1 }), "Session.Feed after Dispose");
            Check.Throws<ObjectDisposedException>(() => s.Generate(Sampler.Greedy(), 1).ToList(), "Session.Generate after Dispose");
            Check.Throws<ObjectDisposedException>(() => { var p = s.Position; }, "Session.Position after Dispose");
            Check.Throws<ObjectDisposedException>(() => sampler.Accept(1), "Sampler.Accept after Dispose");
            Check.Throws<ObjectDisposedException>(() => engine.Submit(new[] { 1 }), "Engine.Submit after Dispose");
            Check.Throws<ObjectDisposedException>(() => { var t = r.Text; }, "Request.Text after Dispose");
            s.Cancel(); // documented as harmless at any time
            r.Cancel();

            // Objects never disposed are freed by their finalizers, sessions before their model.
            for (int i = 0; i < 3; i++)
            {
                var m2 = Model.Load(path);
                new Session(m2, new SessionOptions { ContextLength = 32 }).Feed(new[] { 1, 2 });
            }
            Collect();
        }

        private static void ErrorsCarryStatusAndMessage()
        {
            Model m = SharedModel();
            using (var s = new Session(m, new SessionOptions { ContextLength = 16 }))
            {
                var e = Check.Throws<EmberException>(() => s.Feed(Enumerable.Repeat(1, 17).ToArray()), "feeding past the context");
                Check.Equal(Status.ContextFull, e.Status, "status");
                Check.True(e.NativeMessage.Length > 0, "a message: " + e.Message);
                Check.Equal(0, s.Position, "nothing was evaluated");
                e = Check.Throws<EmberException>(() => s.Feed(new[] { 1 << 20 }), "a token outside the vocabulary");
                Check.Equal(Status.InvalidArgument, e.Status, "status");
                e = Check.Throws<EmberException>(() => s.Truncate(5), "truncating past the position");
                Check.Equal(Status.InvalidArgument, e.Status, "status");
                e = Check.Throws<EmberException>(() => s.Restore(new byte[] { 1, 2, 3 }), "restoring garbage");
                Check.Equal(Status.CorruptData, e.Status, "status");
                e = Check.Throws<EmberException>(() => s.GetLogits(), "logits before a feed");
                Check.Equal(Status.InvalidState, e.Status, "status");
            }
            var se = Check.Throws<EmberException>(() => new Sampler(new SamplerParams { TopP = 2.0f }), "top_p 2");
            Check.Equal(Status.InvalidArgument, se.Status, "status");
            Check.True(se.Message.Contains("top_p"), "the message names the field: " + se.Message);
        }

        private static void SaveRestoreForkTruncate()
        {
            Model m = SharedModel();
            using (var s = PromptedSession(m))
            using (var sampler = Sampler.Greedy())
            {
                int start = s.Position;
                byte[] state = s.Save();
                Check.True(state.Length > 0, "saved");
                using (var fork = s.Fork())
                {
                    var a = WithoutEog(s.GenerateTokens(sampler, 6));
                    var b = WithoutEog(fork.GenerateTokens(sampler, 6));
                    Check.SequenceEqual(a, b, "the fork continues as the original");
                    Check.Equal(start + a.Count, s.Position, "position after generating");
                    s.Restore(state);
                    Check.Equal(start, s.Position, "position after restore");
                    Check.SequenceEqual(a, WithoutEog(s.GenerateTokens(sampler, 6)), "after restore");
                    s.Truncate(start - 1);
                    Check.Equal(start - 1, s.Position, "position after truncate");
                    Check.True(s.ContextLength == 512, "context length");
                }
            }
        }

        private static void CancelGeneration()
        {
            Model m = SharedModel();
            using (var s = new Session(m, new SessionOptions { ContextLength = 2048 }))
            using (var sampler = new Sampler(new SamplerParams { Seed = 7 }))
            {
                s.Feed(m.Tokenize("Once", true));
                // ember_generate with no limit, cancelled from another thread after a few tokens.
                var cts = new CancellationTokenSource();
                int seen = 0;
                var sw = Stopwatch.StartNew();
                Check.Throws<OperationCanceledException>(() => s.Generate(sampler, 0, e =>
                {
                    if (++seen == 5) Task.Run(() => cts.Cancel()).Wait();
                    return true;
                }, cts.Token), "Generate(callback) with a cancelled token");
                Check.True(seen >= 5 && seen <= 6, "stopped right after the cancel (" + seen + " tokens)");

                // The streaming iterator: cancelled while being enumerated.
                var cts2 = new CancellationTokenSource();
                int pieces = 0;
                Check.Throws<OperationCanceledException>(() =>
                {
                    foreach (var e in s.GenerateTokens(sampler, 0, cts2.Token))
                        if (++pieces == 4) cts2.Cancel();
                }, "GenerateTokens with a cancelled token");
                Check.Equal(4, pieces, "tokens streamed before the cancel");
                Check.True(sw.ElapsedMilliseconds < 10000, "fast");
            }
        }

        private static void CancelFeed()
        {
            Model m = SharedModel();
            // A prompt fed one token per pass takes seconds; a cancel after 50 ms must stop it between
            // passes and leave the session as before the call.
            using (var s = new Session(m, new SessionOptions { ContextLength = 2048, BatchSize = 1 }))
            {
                s.Feed(m.Tokenize("Once", true));
                int before = s.Position;
                int[] prompt = Enumerable.Range(0, 2000).Select(i => 100 + i % 5000).ToArray();
                var cts = new CancellationTokenSource();
                cts.CancelAfter(50);
                var sw = Stopwatch.StartNew();
                Check.Throws<OperationCanceledException>(() => s.Feed(prompt, cts.Token), "Feed with a token cancelled after 50 ms");
                Check.True(sw.ElapsedMilliseconds < 1500, "stopped soon (" + sw.ElapsedMilliseconds + " ms)");
                Check.Equal(before, s.Position, "the session is as before the feed");
                Check.Throws<OperationCanceledException>(() => s.Feed(prompt, cts.Token), "Feed with a token already cancelled");
                s.Feed(new[] { 100, 101 }); // usable afterwards
                Check.Equal(before + 2, s.Position, "position after the next feed");
            }
        }

        private static void CallbackExceptionIsRethrown()
        {
            Model m = SharedModel();
            using (var s = PromptedSession(m))
            using (var sampler = Sampler.Greedy())
            {
                var e = Check.Throws<InvalidOperationException>(
                    () => s.Generate(sampler, N, ev => { throw new InvalidOperationException("from the callback"); }),
                    "an exception in the token callback");
                Check.Equal("from the callback", e.Message, "the same exception");
                Check.Throws<FormatException>(
                    () => Model.Load(ModelPath(), new ModelLoadOptions { Progress = p => { throw new FormatException("progress"); } }),
                    "an exception in the progress callback");
            }
        }

        private static void EngineRequest()
        {
            List<int> want = Reference();
            Model m = SharedModel();
            using (var engine = new Engine(m, new EngineOptions { ContextLength = 256, MaxSequences = 2 }))
            {
                var streamed = new List<int>();
                using (var r = engine.Submit(m.Tokenize(Prompt, true), N, null, e => { lock (streamed) streamed.Add(e.Token); return true; }))
                {
                    Check.True(r.Wait(TimeSpan.FromSeconds(30)), "ended");
                    RequestState state;
                    int[] got = r.Poll(out state);
                    Check.Equal(RequestState.Done, state, "state");
                    Check.SequenceEqual(want, got.Take(want.Count).ToList(), "engine (greedy) vs ember-greedy-ref");
                    lock (streamed) Check.SequenceEqual(got, streamed, "callback tokens");
                    Check.True(r.Text.Length > 0, "text");
                    string msg;
                    Check.Equal(Status.Ok, r.GetError(out msg), "no error");
                }
                // Cancellation by token: a request with no limit, cancelled at once.
                var cts = new CancellationTokenSource();
                using (var r = engine.Submit(m.Tokenize(Prompt, true), 0, new SamplerParams { Seed = 1 }, null, cts.Token))
                {
                    cts.Cancel();
                    Check.True(r.Wait(TimeSpan.FromSeconds(30)), "ended after the cancel");
                    Check.Equal(RequestState.Cancelled, r.State, "state");
                }
                var ex = Check.Throws<EmberException>(() => engine.Submit(new int[0]), "an empty prompt");
                Check.Equal(Status.InvalidArgument, ex.Status, "status");
            }
        }

        // An embedding request beside a generation on the same engine: unit vectors of the model's width,
        // the same for the same text; a generation request has none.
        private static void EngineEmbed()
        {
            Model m = SharedModel();
            using (var engine = new Engine(m, new EngineOptions { ContextLength = 256, MaxSequences = 2 }))
            using (var gen = engine.Submit(m.Tokenize(Prompt, true), N))
            using (var r = engine.SubmitEmbed(new[] { Prompt, "another text", Prompt }, Pooling.Mean))
            {
                Check.True(r.Wait(TimeSpan.FromSeconds(30)), "ended");
                Check.Equal(RequestState.Done, r.State, "state");
                float[][] v = r.Embeddings();
                Check.Equal(3, v.Length, "vectors");
                Check.Equal(r.EmbeddingDimensions, v[0].Length, "dimensions");
                double norm = 0;
                foreach (float x in v[0]) norm += (double)x * x;
                Check.True(Math.Abs(norm - 1.0) < 1e-4, "normalised");
                for (int k = 0; k < v[0].Length; ++k) Check.True(v[0][k] == v[2][k], "the same text, the same vector");
                Check.True(gen.Wait(TimeSpan.FromSeconds(30)), "the generation ended");
                Check.Equal(0, gen.EmbeddingDimensions, "a generation request has no embeddings");
                var ex = Check.Throws<EmberException>(() => engine.SubmitEmbed(new[] { "x" }), "the model's own pooling");
                Check.Equal(Status.InvalidArgument, ex.Status, "status");
                ex = Check.Throws<EmberException>(() => engine.SubmitRerank("a query", new[] { "x" }), "a query on a generating model");
                Check.Equal(Status.InvalidArgument, ex.Status, "status");
            }
        }
    }
}
