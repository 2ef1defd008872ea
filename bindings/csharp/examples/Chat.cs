// Chat: a minimal streaming chat on the Ember C# binding.
//
//   mono Chat.exe -m MODEL [-n N] [--temp T] [--ctx N]
//       reads a line from stdin, streams the model's reply, repeats; Ctrl-C stops a reply.
//   mono Chat.exe -m MODEL --prompt TEXT [-n N] --print-ids
//       greedy test mode: prints the generated token ids one per line (what CI compares with
//       ember-greedy-ref MODEL TEXT N).
//
// The conversation lives in one Session, so each turn only feeds the new line: the earlier turns stay in
// the KV cache. (stories15M is a story model, not a chat model: it continues the text it is given.)
using System;
using System.Globalization;
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
        using (var sampler = new Sampler(new SamplerParams { Temperature = temp, TopP = 0.95f, Seed = (ulong)Environment.TickCount }))
        {
            bool start = true;
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
                try
                {
                    session.Feed(model.Tokenize((start ? "" : "\n") + line, start), cancel.Token);
                    start = false;
                    foreach (string piece in session.Generate(sampler, maxTokens, cancel.Token))
                        Console.Write(piece);
                    Console.WriteLine();
                }
                catch (OperationCanceledException)
                {
                    Console.WriteLine(" [stopped]");
                    cancel = new CancellationTokenSource();
                }
                catch (EmberException e) when (e.Status == Status.ContextFull)
                {
                    Console.WriteLine();
                    Console.WriteLine("[the context is full: starting over]");
                    session.Truncate(0);
                    start = true;
                }
            }
        }
    }
}
