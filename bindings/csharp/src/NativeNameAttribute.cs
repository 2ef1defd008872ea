using System;

namespace Ember
{
    /// <summary>
    /// The C name of an enum type, enum value or callback delegate that this binding declares again in
    /// C#. The layout test (tests/LayoutChecker.cs) finds each declaration's row in bindings/layout/
    /// ember.layout by this name. Structs and their fields, and the [DllImport] functions, need no
    /// attribute: they carry their C names verbatim (see NativeStructs.cs and NativeMethods.cs).
    /// </summary>
    [AttributeUsage(AttributeTargets.Enum | AttributeTargets.Field | AttributeTargets.Delegate,
                    AllowMultiple = false)]
    public sealed class NativeNameAttribute : Attribute
    {
        public NativeNameAttribute(string name) { Name = name; }
        public string Name { get; private set; }
    }

    /// <summary>
    /// Marks a static method that native code calls back. Unity's IL2CPP (ahead-of-time compilation)
    /// recognises an attribute of this name and generates the reverse P/Invoke stub for it; Mono and
    /// .NET ignore it. Every callback of this binding is a static method for that reason: the object it
    /// belongs to travels in the C side's user_data as a GCHandle.
    /// </summary>
    [AttributeUsage(AttributeTargets.Method)]
    internal sealed class MonoPInvokeCallbackAttribute : Attribute
    {
        public MonoPInvokeCallbackAttribute(Type delegateType) { DelegateType = delegateType; }
        public Type DelegateType { get; private set; }
    }
}
