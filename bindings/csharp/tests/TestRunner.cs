using System;
using System.Collections.Generic;
using System.Diagnostics;

namespace Ember.Tests
{
    /// <summary>Raised by a test whose data is missing: the run then exits 77 (ctest's skip) unless
    /// some other test failed.</summary>
    internal sealed class SkipException : Exception
    {
        public SkipException(string why) : base(why) { }
    }

    internal sealed class AssertException : Exception
    {
        public AssertException(string what) : base(what) { }
    }

    /// <summary>The smallest test runner that does the job (NUnit is not packaged here): named tests,
    /// one line each, exit status 0 (all passed), 1 (a failure) or 77 (nothing failed, something
    /// skipped for missing data).</summary>
    internal static class Check
    {
        public static void True(bool cond, string what)
        {
            if (!cond) throw new AssertException(what);
        }

        public static void Equal<T>(T expected, T actual, string what)
        {
            if (!EqualityComparer<T>.Default.Equals(expected, actual))
                throw new AssertException(what + ": expected <" + expected + ">, got <" + actual + ">");
        }

        public static void SequenceEqual(IList<int> expected, IList<int> actual, string what)
        {
            string e = string.Join(" ", expected), a = string.Join(" ", actual);
            if (e != a) throw new AssertException(what + ":\n  expected " + e + "\n  got      " + a);
        }

        public static TEx Throws<TEx>(Action action, string what) where TEx : Exception
        {
            try
            {
                action();
            }
            catch (TEx e)
            {
                return e;
            }
            catch (Exception e)
            {
                throw new AssertException(what + ": expected " + typeof(TEx).Name + ", got " + e.GetType().Name + ": " + e.Message);
            }
            throw new AssertException(what + ": expected " + typeof(TEx).Name + ", nothing was thrown");
        }
    }

    internal static class TestRunner
    {
        public static int Main(string[] args)
        {
            string filter = args.Length > 0 ? args[0] : "";
            var tests = new List<KeyValuePair<string, Action>>();
            LayoutTests.Register(tests);
            ApiTests.Register(tests);
            StructuredTests.Register(tests);
            ChatTemplateTests.Register(tests);
            PrecisionTests.Register(tests);
            int failed = 0, skipped = 0, passed = 0;
            var total = Stopwatch.StartNew();
            foreach (var t in tests)
            {
                if (filter.Length > 0 && !t.Key.Contains(filter)) continue;
                var sw = Stopwatch.StartNew();
                try
                {
                    t.Value();
                    passed++;
                    Console.WriteLine("PASS {0} ({1} ms)", t.Key, sw.ElapsedMilliseconds);
                }
                catch (SkipException e)
                {
                    skipped++;
                    Console.WriteLine("SKIP {0}: {1}", t.Key, e.Message);
                }
                catch (Exception e)
                {
                    failed++;
                    Console.WriteLine("FAIL {0}: {1}", t.Key, e is AssertException ? e.Message : e.ToString());
                }
            }
            Console.WriteLine("{0} passed, {1} failed, {2} skipped in {3} ms", passed, failed, skipped, total.ElapsedMilliseconds);
            if (failed > 0) return 1;
            if (passed == 0) return 77;
            return skipped > 0 ? 77 : 0;
        }
    }
}
