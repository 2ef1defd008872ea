using System;
using System.Collections.Generic;
using System.Globalization;
using System.IO;

namespace Ember.Tests
{
    /// <summary>bindings/layout/ember.layout, parsed (the format is described at the top of
    /// bindings/layout/ember_layout.c).</summary>
    internal sealed class LayoutTable
    {
        internal sealed class Field
        {
            public string Name;
            public int Offset;
            public int Size;
            public string CType;
        }

        internal sealed class Struct
        {
            public string Name;
            public int Size;
            public int Align;
            public readonly List<Field> Fields = new List<Field>();
        }

        internal sealed class Signature
        {
            public string Return;
            public readonly List<string> Args = new List<string>(); // empty for (void)
        }

        internal sealed class EnumValue
        {
            public string Type;
            public long Value;
        }

        public readonly Dictionary<string, Struct> Structs = new Dictionary<string, Struct>();
        public readonly Dictionary<string, EnumValue> EnumValues = new Dictionary<string, EnumValue>();
        public readonly HashSet<string> EnumTypes = new HashSet<string>();
        public readonly Dictionary<string, long> Consts = new Dictionary<string, long>();
        public readonly Dictionary<string, Signature> Callbacks = new Dictionary<string, Signature>();
        public readonly Dictionary<string, Signature> Functions = new Dictionary<string, Signature>();

        public static LayoutTable Load(string path) { return Parse(File.ReadAllText(path)); }

        public static LayoutTable Parse(string text)
        {
            var t = new LayoutTable();
            int lineNo = 0;
            foreach (string raw in text.Split('\n'))
            {
                lineNo++;
                string line = raw.TrimEnd('\r');
                if (line.Length == 0 || line[0] == '#') continue;
                string[] w = line.Split(' ');
                switch (w[0])
                {
                    case "struct":
                        t.Structs[w[1]] = new Struct { Name = w[1], Size = Int(w[2]), Align = Int(w[3]) };
                        break;
                    case "field":
                        {
                            Struct s;
                            if (!t.Structs.TryGetValue(w[1], out s))
                                throw new FormatException("line " + lineNo + ": field of unknown struct " + w[1]);
                            s.Fields.Add(new Field { Name = w[2], Offset = Int(w[3]), Size = Int(w[4]), CType = Rest(line, 5) });
                            break;
                        }
                    case "enum":
                        t.EnumTypes.Add(w[1]);
                        t.EnumValues[w[2]] = new EnumValue { Type = w[1], Value = long.Parse(w[3], CultureInfo.InvariantCulture) };
                        break;
                    case "const":
                        t.Consts[w[1]] = long.Parse(w[2], CultureInfo.InvariantCulture);
                        break;
                    case "callback":
                        t.Callbacks[w[1]] = Sig(Rest(line, 2));
                        break;
                    case "fn":
                        t.Functions[w[1]] = Sig(Rest(line, 2));
                        break;
                    default:
                        throw new FormatException("line " + lineNo + ": unknown entry '" + w[0] + "'");
                }
            }
            return t;
        }

        private static int Int(string s) { return int.Parse(s, CultureInfo.InvariantCulture); }

        // The text after the first n space-separated words (C types may contain spaces).
        private static string Rest(string line, int n)
        {
            int i = 0;
            for (int k = 0; k < n; k++)
            {
                i = line.IndexOf(' ', i);
                if (i < 0) throw new FormatException("short line: " + line);
                i++;
            }
            return line.Substring(i);
        }

        // "RET|ARG, ARG, ..." with "void" alone for no arguments.
        private static Signature Sig(string s)
        {
            int bar = s.IndexOf('|');
            if (bar < 0) throw new FormatException("signature without '|': " + s);
            var sig = new Signature { Return = s.Substring(0, bar).Trim() };
            string args = s.Substring(bar + 1).Trim();
            if (args != "void")
                foreach (string a in args.Split(',')) sig.Args.Add(a.Trim());
            return sig;
        }
    }
}
