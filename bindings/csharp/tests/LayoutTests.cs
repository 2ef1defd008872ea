using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Reflection;

namespace Ember.Tests
{
    /// <summary>The binding against bindings/layout/ember.layout ($EMBER_LAYOUT), and proof that the
    /// checker notices drift: copies of the table with one entry changed must each fail.</summary>
    internal static class LayoutTests
    {
        public static void Register(List<KeyValuePair<string, Action>> tests)
        {
            tests.Add(new KeyValuePair<string, Action>("layout_matches_table", MatchesTable));
            tests.Add(new KeyValuePair<string, Action>("layout_detects_drift", DetectsDrift));
        }

        private static Assembly Binding { get { return typeof(Ember.Model).Assembly; } }

        internal static string TableText()
        {
            string path = Environment.GetEnvironmentVariable("EMBER_LAYOUT");
            if (string.IsNullOrEmpty(path) || !File.Exists(path))
                throw new SkipException("EMBER_LAYOUT is not set to the layout table (bindings/layout/ember.layout)");
            return File.ReadAllText(path);
        }

        private static void MatchesTable()
        {
            var problems = LayoutChecker.Check(Binding, LayoutTable.Parse(TableText()));
            Console.WriteLine("  " + LayoutChecker.Info);
            Check.True(problems.Count == 0, "the binding differs from the table:\n  " + string.Join("\n  ", problems));
            // This binding declares the whole ABI: a function or struct new in ember.h must be added (to
            // NativeMethods.cs / NativeStructs.cs), which also keeps the check from passing vacuously.
            Check.True(LayoutChecker.Undeclared.Count == 0,
                       "in ember.h (the table) but not declared in C#: " + string.Join(", ", LayoutChecker.Undeclared));
        }

        // One change to the table and a word the checker's complaint must contain.
        private struct Drift
        {
            public string From, To, Expect;
            public Drift(string from, string to, string expect) { From = from; To = to; Expect = expect; }
        }

        private static readonly Drift[] Drifts =
        {
            new Drift("struct ember_sampler_params 56 8", "struct ember_sampler_params 64 8", "struct ember_sampler_params: size 56 in C#, 64 in C"),
            new Drift("field ember_model_params vocab_only 24 1 bool", "field ember_model_params vocab_only 28 1 bool", "ember_model_params.vocab_only: offset 24 in C#, 28 in C"),
            new Drift("field ember_generate_params speculate 24 1 bool", "field ember_generate_params speculate 24 1 uint32_t", "ember_generate_params.speculate: C type 'uint32_t'"),
            new Drift("field ember_session_params kv_type 36 4 ember_kv_type", "", "ember_session_params.kv_type: declared in C# but not in the table"),
            new Drift("field ember_engine_stats kv_bytes 32 8 uint64_t", "field ember_engine_stats kv_bytes 32 8 uint64_t\nfield ember_engine_stats kv_extra 40 8 uint64_t", "ember_engine_stats.kv_extra: in the table but not declared"),
            new Drift("enum ember_status EMBER_ERR_IO -3", "enum ember_status EMBER_ERR_IO -30", "enum value EMBER_ERR_IO: -3 in C#, -30 in C"),
            new Drift("enum ember_kv_type EMBER_KV_Q8_0 1", "", "enum value EMBER_KV_Q8_0"),
            new Drift("enum ember_status EMBER_ERR_INTERNAL -100", "enum ember_status EMBER_ERR_INTERNAL -100\nenum ember_status EMBER_ERR_NEW -14", "EMBER_ERR_NEW: in the table but not declared"),
            new Drift("const EMBER_TOKENIZE_PARSE_SPECIAL 2", "const EMBER_TOKENIZE_PARSE_SPECIAL 4", "const EMBER_TOKENIZE_PARSE_SPECIAL: 2 in C#, 4 in C"),
            new Drift("fn ember_session_truncate ember_status|ember_session *, uint32_t", "fn ember_session_truncate ember_status|ember_session *, uint64_t", "fn ember_session_truncate: parameter 2"),
            new Drift("fn ember_sampler_accept ember_status|ember_sampler *, ember_token", "fn ember_sampler_accept ember_status|ember_sampler *, ember_token, size_t", "fn ember_sampler_accept: 2 parameters in C#, 3 in C"),
            new Drift("fn ember_token_is_eog bool|const ember_model *, ember_token", "fn ember_token_is_eog int32_t|const ember_model *, ember_token", "fn ember_token_is_eog: return type"),
            new Drift("fn ember_session_cancel void|ember_session *", "", "fn ember_session_cancel: declared in C# but not in the table"),
            new Drift("struct ember_cuda_device_params 16 8", "struct ember_cuda_device_params 16 8\nstruct ember_new_params 8 4\nfield ember_new_params struct_size 0 4 uint32_t", "UNDECLARED ember_new_params"),
            new Drift("fn ember_cuda_set_device ember_status|const ember_cuda_device_params *", "fn ember_cuda_set_device ember_status|const ember_cuda_device_params *\nfn ember_new_function void|void", "UNDECLARED ember_new_function"),
            new Drift("fn ember_model_load ember_status|const char *, const ember_model_params *, ember_model **", "fn ember_model_load ember_status|const char *, const ember_model_params *, ember_session **", "fn ember_model_load: parameter 3"),
            new Drift("callback ember_progress_fn bool|float, void *", "callback ember_progress_fn bool|double, void *", "callback ember_progress_fn: parameter 1"),
        };

        private static void DetectsDrift()
        {
            string text = TableText();
            var failures = new List<string>();
            foreach (Drift d in Drifts)
            {
                string line = d.From + "\n";
                if (!text.Contains(line))
                {
                    failures.Add("the table has no line '" + d.From + "' to alter (update this test with the table)");
                    continue;
                }
                string altered = text.Replace(line, d.To.Length > 0 ? d.To + "\n" : "");
                var problems = LayoutChecker.Check(Binding, LayoutTable.Parse(altered));
                problems.AddRange(LayoutChecker.Undeclared.Select(n => "UNDECLARED " + n));
                if (!problems.Any(p => p.Contains(d.Expect)))
                    failures.Add("altering '" + d.From + "' was not reported as '" + d.Expect + "'; reported:\n    " +
                                 string.Join("\n    ", problems));
            }
            Check.True(failures.Count == 0, string.Join("\n  ", failures));
        }
    }
}
