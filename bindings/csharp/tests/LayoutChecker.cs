using System;
using System.Collections.Generic;
using System.Linq;
using System.Reflection;
using System.Runtime.InteropServices;

namespace Ember.Tests
{
    /// <summary>
    /// Compares what the binding declares with the layout table, by reflection over Ember.dll:
    ///  - every struct (a value type named like a C struct, "ember_*", in Ember.Native): Marshal.SizeOf
    ///    equals the table's size; every field (C name verbatim) exists in the table at
    ///    Marshal.OffsetOf, with a C# type that the mapping below allows for its C type; every field of
    ///    the table exists in C#;
    ///  - every enum marked [NativeName("ember_x")]: each member carries [NativeName("EMBER_X_Y")] naming
    ///    a value of that C enum, with the same number; the table's values of that enum all exist;
    ///  - every callback delegate marked [NativeName]: Cdecl, and parameters/return as for functions;
    ///  - every [DllImport] method (named as its C function): in the table, Cdecl, library "ember",
    ///    the same number of parameters, and each parameter's and the return's C# type allowed for the
    ///    C type (bool only with MarshalAs(I1): the default marshals a 4-byte BOOL).
    /// Anything declared in C# but absent from the table is a failure. Each problem is one line.
    /// </summary>
    internal static class LayoutChecker
    {
        // Handle types of ember.h and the SafeHandles that stand for them in parameters.
        private static readonly Dictionary<string, string> HandleTypes = new Dictionary<string, string>
        {
            { "ember_model", "ModelHandle" },
            { "ember_session", "SessionHandle" },
            { "ember_sampler", "SamplerHandle" },
            { "ember_engine", "EngineHandle" },
            { "ember_request", "RequestHandle" },
            { "ember_grammar", "GrammarHandle" },
        };

        // C scalar types and the C# types that have their size and meaning.
        private static readonly Dictionary<string, Type> Scalars = new Dictionary<string, Type>
        {
            { "uint32_t", typeof(uint) },
            { "int32_t", typeof(int) },
            { "uint64_t", typeof(ulong) },
            { "int64_t", typeof(long) },
            { "size_t", typeof(UIntPtr) },
            { "float", typeof(float) },
            { "double", typeof(double) },
            { "ember_token", typeof(int) },
            { "bool", typeof(bool) },
            { "char", typeof(byte) },
            { "uint8_t", typeof(byte) },
        };

        public static List<string> Check(Assembly binding, LayoutTable table)
        {
            var problems = new List<string>();
            var types = binding.GetTypes();
            var enumsByC = new Dictionary<string, Type>();
            var delegatesByC = new Dictionary<string, Type>();
            foreach (Type t in types)
            {
                string cname = NativeName(t);
                if (cname == null) continue;
                if (t.IsEnum) enumsByC[cname] = t;
                else if (typeof(Delegate).IsAssignableFrom(t)) delegatesByC[cname] = t;
            }
            var ctx = new Context { Table = table, Enums = enumsByC, Delegates = delegatesByC, Binding = binding };

            int nStructs = 0, nEnumValues = 0, nFunctions = 0, nCallbacks = 0;
            foreach (Type t in types.Where(x => x.IsValueType && !x.IsEnum && x.Name.StartsWith("ember_", StringComparison.Ordinal)))
            {
                nStructs++;
                CheckStruct(t, ctx, problems);
            }
            foreach (var kv in enumsByC) nEnumValues += CheckEnum(kv.Key, kv.Value, table, problems);
            foreach (var kv in delegatesByC)
            {
                nCallbacks++;
                CheckCallback(kv.Key, kv.Value, ctx, problems);
            }
            var declared = new HashSet<string>();
            foreach (Type t in types)
                foreach (MethodInfo m in t.GetMethods(BindingFlags.Static | BindingFlags.Public | BindingFlags.NonPublic | BindingFlags.DeclaredOnly))
                {
                    if ((m.Attributes & MethodAttributes.PinvokeImpl) == 0) continue;
                    nFunctions++;
                    declared.Add(m.Name);
                    CheckFunction(m, ctx, problems);
                }
            foreach (Type t in types.Where(x => x.Name == "NativeConstants"))
                foreach (FieldInfo f in t.GetFields(BindingFlags.Static | BindingFlags.Public | BindingFlags.NonPublic))
                {
                    if (!f.IsLiteral) continue;
                    long cv;
                    long v = Convert.ToInt64(f.GetRawConstantValue());
                    if (!table.Consts.TryGetValue(f.Name, out cv)) problems.Add("const " + f.Name + ": declared in C# but not in the table");
                    else if (cv != v) problems.Add(string.Format("const {0}: {1} in C#, {2} in C", f.Name, v, cv));
                }
            Info = string.Format("checked {0} structs, {1} enum values, {2} callbacks, {3} of the table's {4} functions",
                                 nStructs, nEnumValues, nCallbacks, nFunctions, table.Functions.Count);
            Undeclared = table.Functions.Keys.Where(f => !declared.Contains(f)).OrderBy(f => f).ToList();
            var declaredStructs = new HashSet<string>(types.Where(x => x.IsValueType).Select(x => x.Name));
            Undeclared.AddRange(table.Structs.Keys.Where(n => !declaredStructs.Contains(n)).OrderBy(n => n));
            return problems;
        }

        /// <summary>A summary of the last Check, and the table's functions and structs that the binding
        /// does not declare (not a layout error; the test asks for them separately).</summary>
        public static string Info;
        public static List<string> Undeclared;

        private sealed class Context
        {
            public LayoutTable Table;
            public Dictionary<string, Type> Enums;
            public Dictionary<string, Type> Delegates;
            public Assembly Binding;
        }

        private static string NativeName(MemberInfo m)
        {
            foreach (object a in m.GetCustomAttributes(false))
                if (a.GetType().Name == "NativeNameAttribute")
                    return (string)a.GetType().GetProperty("Name").GetValue(a, null);
            return null;
        }

        private static MarshalAsAttribute MarshalAs(object[] attrs)
        {
            foreach (object a in attrs)
            {
                var m = a as MarshalAsAttribute;
                if (m != null) return m;
            }
            return null;
        }

        // ---- structs

        private static void CheckStruct(Type t, Context ctx, List<string> problems)
        {
            LayoutTable.Struct s;
            if (!ctx.Table.Structs.TryGetValue(t.Name, out s))
            {
                problems.Add("struct " + t.Name + ": declared in C# but not in the table");
                return;
            }
            if (!t.IsLayoutSequential) problems.Add("struct " + t.Name + ": not LayoutKind.Sequential");
            int size = Marshal.SizeOf(t);
            if (size != s.Size) problems.Add(string.Format("struct {0}: size {1} in C#, {2} in C", t.Name, size, s.Size));
            var fields = t.GetFields(BindingFlags.Instance | BindingFlags.Public | BindingFlags.NonPublic);
            foreach (FieldInfo f in fields)
            {
                var cf = s.Fields.FirstOrDefault(x => x.Name == f.Name);
                if (cf == null)
                {
                    problems.Add("field " + t.Name + "." + f.Name + ": declared in C# but not in the table");
                    continue;
                }
                int off = Marshal.OffsetOf(t, f.Name).ToInt32();
                if (off != cf.Offset)
                    problems.Add(string.Format("field {0}.{1}: offset {2} in C#, {3} in C", t.Name, f.Name, off, cf.Offset));
                string why = FieldTypeProblem(cf.CType, f, ctx);
                if (why != null) problems.Add(string.Format("field {0}.{1}: C type '{2}': {3}", t.Name, f.Name, cf.CType, why));
            }
            foreach (var cf in s.Fields)
                if (!fields.Any(f => f.Name == cf.Name))
                    problems.Add("field " + t.Name + "." + cf.Name + ": in the table but not declared in C#");
        }

        private static string FieldTypeProblem(string ctype, FieldInfo f, Context ctx)
        {
            Type ft = f.FieldType;
            MarshalAsAttribute ma = MarshalAs(f.GetCustomAttributes(typeof(MarshalAsAttribute), false));
            int bracket = ctype.IndexOf('[');
            if (bracket >= 0)
            {
                // T[N]: an array of T marshalled by value with SizeConst N.
                string elem = ctype.Substring(0, bracket);
                int n = int.Parse(ctype.Substring(bracket + 1, ctype.Length - bracket - 2));
                Type et;
                if (!Scalars.TryGetValue(elem, out et)) return "no C# mapping for arrays of " + elem;
                if (ft != et.MakeArrayType()) return "needs " + et.Name + "[], is " + ft.Name;
                if (ma == null || ma.Value != UnmanagedType.ByValArray || ma.SizeConst != n)
                    return "needs [MarshalAs(UnmanagedType.ByValArray, SizeConst = " + n + ")]";
                return null;
            }
            if (ctype.EndsWith("*", StringComparison.Ordinal) || ctx.Table.Callbacks.ContainsKey(ctype))
            {
                // Pointers and function pointers are stored as IntPtr: the binding controls what they
                // point to and for how long.
                return ft == typeof(IntPtr) ? null : "needs IntPtr, is " + ft.Name;
            }
            return ScalarProblem(ctype, ft, ma, ctx);
        }

        // A C type without pointers: scalars, bool, enums.
        private static string ScalarProblem(string ctype, Type t, MarshalAsAttribute ma, Context ctx)
        {
            if (ctx.Table.EnumTypes.Contains(ctype))
            {
                Type e;
                if (!ctx.Enums.TryGetValue(ctype, out e)) return "no C# enum with [NativeName(\"" + ctype + "\")]";
                if (t != e) return "needs " + e.Name + ", is " + t.Name;
                if (Enum.GetUnderlyingType(e) != typeof(int)) return "enum " + e.Name + " must be int-sized like the C enum";
                return null;
            }
            Type want;
            if (!Scalars.TryGetValue(ctype, out want)) return "no C# mapping for this C type";
            if (t != want) return "needs " + want.Name + ", is " + t.Name;
            if (want == typeof(bool) && (ma == null || ma.Value != UnmanagedType.I1))
                return "bool needs [MarshalAs(UnmanagedType.I1)] (C bool is one byte)";
            return null;
        }

        // ---- enums

        private static int CheckEnum(string ctype, Type e, LayoutTable table, List<string> problems)
        {
            int n = 0;
            if (!table.EnumTypes.Contains(ctype))
            {
                problems.Add("enum " + ctype + " (" + e.Name + "): declared in C# but not in the table");
                return 0;
            }
            var seen = new HashSet<string>();
            foreach (FieldInfo f in e.GetFields(BindingFlags.Public | BindingFlags.Static))
            {
                n++;
                string cname = NativeName(f);
                if (cname == null)
                {
                    problems.Add("enum value " + e.Name + "." + f.Name + ": has no [NativeName]");
                    continue;
                }
                seen.Add(cname);
                LayoutTable.EnumValue v;
                long value = Convert.ToInt64(f.GetRawConstantValue());
                if (!table.EnumValues.TryGetValue(cname, out v) || v.Type != ctype)
                    problems.Add("enum value " + cname + " (" + e.Name + "." + f.Name + "): declared in C# but not in the table's " + ctype);
                else if (v.Value != value)
                    problems.Add(string.Format("enum value {0}: {1} in C#, {2} in C", cname, value, v.Value));
            }
            foreach (var kv in table.EnumValues)
                if (kv.Value.Type == ctype && !seen.Contains(kv.Key))
                    problems.Add("enum value " + kv.Key + ": in the table but not declared in C# (" + e.Name + ")");
            return n;
        }

        // ---- functions and callbacks

        private static void CheckCallback(string cname, Type d, Context ctx, List<string> problems)
        {
            LayoutTable.Signature sig;
            if (!ctx.Table.Callbacks.TryGetValue(cname, out sig))
            {
                problems.Add("callback " + cname + ": declared in C# but not in the table");
                return;
            }
            var ufp = (UnmanagedFunctionPointerAttribute)Attribute.GetCustomAttribute(d, typeof(UnmanagedFunctionPointerAttribute));
            if (ufp == null || ufp.CallingConvention != CallingConvention.Cdecl)
                problems.Add("callback " + cname + ": needs [UnmanagedFunctionPointer(CallingConvention.Cdecl)]");
            CheckSignature("callback " + cname, d.GetMethod("Invoke"), sig, ctx, problems);
        }

        private static void CheckFunction(MethodInfo m, Context ctx, List<string> problems)
        {
            var dll = (DllImportAttribute)Attribute.GetCustomAttribute(m, typeof(DllImportAttribute));
            string name = m.Name;
            if (dll != null)
            {
                if (!string.IsNullOrEmpty(dll.EntryPoint)) name = dll.EntryPoint;
                if (dll.CallingConvention != CallingConvention.Cdecl) problems.Add("fn " + name + ": not CallingConvention.Cdecl");
                if (dll.Value != "ember") problems.Add("fn " + name + ": imported from '" + dll.Value + "', not 'ember'");
            }
            LayoutTable.Signature sig;
            if (!ctx.Table.Functions.TryGetValue(name, out sig))
            {
                problems.Add("fn " + name + ": declared in C# but not in the table");
                return;
            }
            CheckSignature("fn " + name, m, sig, ctx, problems);
        }

        private static void CheckSignature(string what, MethodInfo m, LayoutTable.Signature sig, Context ctx, List<string> problems)
        {
            ParameterInfo[] ps = m.GetParameters();
            if (ps.Length != sig.Args.Count)
            {
                problems.Add(string.Format("{0}: {1} parameters in C#, {2} in C", what, ps.Length, sig.Args.Count));
                return;
            }
            string why = ParamProblem(sig.Return, m.ReturnParameter, true, ctx);
            if (why != null) problems.Add(string.Format("{0}: return type, C '{1}': {2}", what, sig.Return, why));
            for (int i = 0; i < ps.Length; i++)
            {
                why = ParamProblem(sig.Args[i], ps[i], false, ctx);
                if (why != null)
                    problems.Add(string.Format("{0}: parameter {1} ({2}), C '{3}': {4}", what, i + 1, ps[i].Name, sig.Args[i], why));
            }
        }

        private static string Describe(ParameterInfo p)
        {
            Type t = p.ParameterType;
            if (!t.IsByRef) return t.Name;
            return (p.IsOut ? "out " : "ref ") + t.GetElementType().Name;
        }

        /// <summary>Why a parameter (or return) of C# type does not fit C type ctype; null when it does.
        /// The mapping: scalars and enums by value as in Scalars (bool with MarshalAs I1); "void" only as
        /// a return; any pointer may be IntPtr; a returned pointer must be IntPtr (the library owns it);
        /// T* for a handle type: its SafeHandle; T** for a handle type: out SafeHandle; S* for a struct:
        /// ref S or S[] (ref only if const); scalar*: scalar[] or out/ref scalar (ref only, or an
        /// array, if const); char*/void*: byte[]; const char**/const float**: out IntPtr; a callback type:
        /// IntPtr or the delegate with its [NativeName].</summary>
        private static string ParamProblem(string ctype, ParameterInfo p, bool isReturn, Context ctx)
        {
            Type t = p.ParameterType;
            MarshalAsAttribute ma = MarshalAs(p.GetCustomAttributes(typeof(MarshalAsAttribute), false));
            if (ctype == "void")
                return isReturn && t == typeof(void) ? null : "needs void, is " + Describe(p);

            bool isConst = ctype.StartsWith("const ", StringComparison.Ordinal);
            string bare = isConst ? ctype.Substring(6) : ctype;
            int depth = 0;
            while (bare.EndsWith("*", StringComparison.Ordinal))
            {
                depth++;
                bare = bare.Substring(0, bare.Length - 1).TrimEnd();
            }

            if (depth == 0)
            {
                if (ctx.Table.Callbacks.ContainsKey(bare))
                {
                    Type d;
                    if (t == typeof(IntPtr)) return null;
                    if (ctx.Delegates.TryGetValue(bare, out d) && t == d) return null;
                    return "needs IntPtr or the delegate for " + bare + ", is " + Describe(p);
                }
                if (t.IsByRef) return "a value parameter, is " + Describe(p);
                return ScalarProblem(bare, t, ma, ctx);
            }

            if (t == typeof(IntPtr)) return null; // any pointer, passed raw
            if (isReturn) return "a returned pointer must be IntPtr (the library owns what it points to), is " + Describe(p);

            string handle;
            bool isHandle = HandleTypes.TryGetValue(bare, out handle);
            if (depth == 2)
            {
                if (!t.IsByRef || !p.IsOut) return "needs out, is " + Describe(p);
                Type et = t.GetElementType();
                if (et == typeof(IntPtr)) return null;
                if (isHandle && !isConst && et.Name == handle) return null;
                return "needs out IntPtr" + (isHandle ? " or out " + handle : "") + ", is " + Describe(p);
            }
            if (depth != 1) return "no C# mapping for this C type";

            if (isHandle) return t.Name == handle ? null : "needs " + handle + " or IntPtr, is " + Describe(p);
            if (bare == "void" || bare == "char") return t == typeof(byte[]) ? null : "needs byte[] or IntPtr, is " + Describe(p);

            Type elem = t.IsByRef ? t.GetElementType() : t.IsArray ? t.GetElementType() : null;
            if (elem == null) return "needs a ref, out or array, is " + Describe(p);
            if (t.IsByRef && isConst && p.IsOut) return "the C side is const: ref, not out";
            if (ctx.Table.Structs.ContainsKey(bare))
            {
                if (elem.Name != bare || !elem.IsValueType) return "needs ref " + bare + " or " + bare + "[], is " + Describe(p);
                if (t.IsArray && (!p.IsIn || !p.IsOut) && !isConst) return "an output array of structs needs [In, Out]";
                return null;
            }
            MarshalAsAttribute elemMa = ma; // out bool carries its MarshalAs on the parameter
            return ScalarProblem(bare, elem, elemMa, ctx);
        }
    }
}
