// Chat: a minimal streaming chat on the Ember C# binding.
//
//   mono Chat.exe -m MODEL [-n N] [--temp T] [--ctx N]
//       reads a line from stdin, streams the model's reply, repeats; Ctrl-C stops a reply.
//   mono Chat.exe -m MODEL --prompt TEXT [-n N] --print-ids
//       greedy test mode: prints the generated token ids one per line (what CI compares with
//       ember-greedy-ref MODEL TEXT N).
//
// Interactive mode renders the whole conversation with the model's chat template (Model.ApplyChatTemplate;
// ChatML for a model without one) each turn, and feeds only the tokens after what the session already
// holds, so earlier turns stay in the KV cache. (stories15M is a story model, not a chat model: under
// ChatML it mostly rambles, but the flow is the one a chat model needs.) The test mode feeds the raw prompt.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.Text;
using System.Threading;
using Ember;

internal static class Chat
{
    private static int Usage(string why)
    {
        Console.Error.WriteLine("chat: " + why);
        Console.Error.WriteLine("usage: Chat.exe -m MODEL [-n N] [--temp T] [--ctx N] [--prompt TEXT [--print-ids]]");
        return 2;
    }

    private static int Main(string[] args)
    {
        string modelPath = null, prompt = null;
        int maxTokens = 128;
        uint ctx = 2048;
        float temp = 0.8f;
        bool printIds = false;
        try
        {
            for (int i = 0; i < args.Length; i++)
            {
                string a = args[i];
                Func<string> value = () =>
                {
                    if (i + 1 >= args.Length) throw new FormatException(a + " needs a value");
                    return args[++i];
                };
                switch (a)
                {
                    case "-m": modelPath = value(); break;
                    case "-n": maxTokens = int.Parse(value(), CultureInfo.InvariantCulture); break;
                    case "--temp": temp = float.Parse(value(), CultureInfo.InvariantCulture); break;
                    case "--ctx": ctx = uint.Parse(value(), CultureInfo.InvariantCulture); break;
                    case "--prompt": prompt = value(); break;
                    case "--print-ids": printIds = true; break;
                    default: return Usage("unknown option " + a);
                }
            }
        }
        catch (FormatException e)
        {
            return Usage(e.Message);
        }
        if (modelPath == null) return Usage("-m MODEL is required");
        if (printIds && prompt == null) return Usage("--print-ids needs --prompt");

        try
        {
            using (var model = Model.Load(modelPath))
            using (var session = new Session(model, new SessionOptions { ContextLength = ctx }))
            {
                if (printIds)
                {
                    // Greedy, as ember-greedy-ref: BOS + prompt, then the ids of up to N tokens, the
                    // end-of-generation token not included.
                    using (var sampler = Sampler.Greedy())
                    {
                        session.Feed(model.Tokenize(prompt, true));
                        foreach (TokenEvent e in session.GenerateTokens(sampler, maxTokens))
                            if (!e.IsEndOfGeneration) Console.WriteLine(e.Token.ToString(CultureInfo.InvariantCulture));
                    }
                    return 0;
                }
                return Converse(model, session, prompt, maxTokens, temp);
            }
        }
        catch (EmberException e)
        {
            Console.Error.WriteLine("chat: " + e.Message);
            return 1;
        }
    }

    private static int Converse(Model model, Session session, string first, int maxTokens, float temp)
    {
        var cancel = new CancellationTokenSource();
        // Ctrl-C stops the reply being streamed instead of the program (a second one while idle exits).
        Console.CancelKeyPress += (s, e) =>
        {
            if (!cancel.IsCancellationRequested)
            {
                e.Cancel = true;
                cancel.Cancel();
            }
        };
        // Templates that write no BOS text (ChatML) get the BOS the tokenizer would add, if any.
        int[] added = model.Tokenize("", addSpecial: true);
        bool wantsBos = added.Length > 0 && added[0] == model.BosToken;
        var messages = new List<ChatMessage>();
        var inSession = new List<int>(); // the tokens the session holds, to reuse the common prefix
        using (var sampler = new Sampler(new SamplerParams { Temperature = temp, TopP = 0.95f, Seed = (ulong)Environment.TickCount }))
        {
            while (true)
            {
                string line = first;
                first = null;
                if (line == null)
                {
                    Console.Write("> ");
                    line = Console.ReadLine();
                    if (line == null) return 0;
                }
                if (line.Trim().Length == 0) continue;
                messages.Add(new ChatMessage("user", line));
                var reply = new StringBuilder();
                try
                {
                    // The whole conversation in the model's format (its chat template, or ChatML), its
                    // special tokens parsed; only what differs from the session's tokens is evaluated.
                    string text = model.ApplyChatTemplate(messages, addGenerationPrompt: true);
                    var tokens = new List<int>(model.Tokenize(text, addSpecial: false, parseSpecial: true));
                    if (wantsBos && (tokens.Count == 0 || tokens[0] != model.BosToken)) tokens.Insert(0, model.BosToken);
                    int common = 0;
                    while (common < tokens.Count && common < inSession.Count && tokens[common] == inSession[common]) common++;
                    if (common == tokens.Count) common--; // feed at least one token, for fresh logits
                    session.Truncate(common);
                    inSession.RemoveRange(common, inSession.Count - common);
                    session.Feed(tokens.GetRange(common, tokens.Count - common).ToArray(), cancel.Token);
                    inSession.AddRange(tokens.GetRange(common, tokens.Count - common));
                    // The library ends the reply at a marker and never hands out the marker or what could
                    // begin one. The token that completes a marker was fed (an end-of-generation token is not).
                    session.SetStop(Markers);
                    foreach (TokenEvent e in session.GenerateTokens(sampler, maxTokens, cancel.Token))
                    {
                        if (!model.IsEndOfGeneration(e.Token)) inSession.Add(e.Token);
                        reply.Append(e.Text);
                        Console.Write(e.Text);
                    }
                    // A reply cut by maxTokens: what was held as a possible marker start is text after all.
                    string rest = session.FlushStop();
                    reply.Append(rest);
                    Console.WriteLine(rest);
                }
                catch (OperationCanceledException)
                {
                    Console.WriteLine(" [stopped]");
                    cancel = new CancellationTokenSource();
                    inSession.Clear(); // where the cancelled feed or generation stopped is not tracked: start over
                    session.Truncate(0);
                }
                catch (EmberException e) when (e.Status == Status.ContextFull)
                {
                    Console.WriteLine();
                    Console.WriteLine("[the context is full: starting over]");
                    session.Truncate(0);
                    inSession.Clear();
                    messages.Clear();
                    continue;
                }
                messages.Add(new ChatMessage("assistant", reply.ToString()));
            }
        }
    }

    /// <summary>End-of-turn markers as text: a model whose vocabulary lacks the template's special tokens
    /// (stories15M under ChatML) spells them out, and the reply ends there.</summary>
    private static readonly string[] Markers = { "<|im_end|>", "<|im_start|>", "<|eot_id|>", "<end_of_turn>" };
}
