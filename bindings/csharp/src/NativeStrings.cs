using System;
using System.Runtime.InteropServices;

namespace Ember.Native
{
    /// <summary>Strings as a C array of NUL-terminated UTF-8 strings (`const char *const *`) in unmanaged
    /// memory, for a native call that reads them while it runs (stop strings). Dispose frees it.</summary>
    internal sealed class NativeStrings : IDisposable
    {
        private readonly IntPtr[] strings_;

        /// <summary>The array (IntPtr.Zero when there are no strings) and its length.</summary>
        public IntPtr Array { get; private set; }
        public UIntPtr Count { get { return (UIntPtr)strings_.Length; } }

        /// <summary>ArgumentNullException for a null string, ArgumentException for one with a NUL inside
        /// (C would cut it short). A null or empty list gives no array.</summary>
        public NativeStrings(string[] strings, string paramName)
        {
            strings_ = new IntPtr[strings == null ? 0 : strings.Length];
            try
            {
                for (int i = 0; i < strings_.Length; i++)
                {
                    byte[] bytes = Utf8.ToNative(strings[i], paramName);
                    strings_[i] = Marshal.AllocHGlobal(bytes.Length);
                    Marshal.Copy(bytes, 0, strings_[i], bytes.Length);
                }
                if (strings_.Length > 0)
                {
                    Array = Marshal.AllocHGlobal(IntPtr.Size * strings_.Length);
                    Marshal.Copy(strings_, 0, Array, strings_.Length);
                }
            }
            catch
            {
                Dispose();
                throw;
            }
        }

        public void Dispose()
        {
            for (int i = 0; i < strings_.Length; i++)
            {
                if (strings_[i] != IntPtr.Zero) Marshal.FreeHGlobal(strings_[i]);
                strings_[i] = IntPtr.Zero;
            }
            if (Array != IntPtr.Zero) Marshal.FreeHGlobal(Array);
            Array = IntPtr.Zero;
        }
    }

    /// <summary>A grammar's native pointer held open for a native call (null: IntPtr.Zero). The
    /// SafeHandle's reference keeps a concurrent Dispose from freeing it during the call.</summary>
    internal struct GrammarRef : IDisposable
    {
        private readonly GrammarHandle handle_;
        private readonly bool added_;

        public IntPtr Pointer { get; private set; }

        public GrammarRef(Grammar grammar) : this()
        {
            if (grammar == null) return;
            handle_ = grammar.Handle;
            bool added = false;
            handle_.DangerousAddRef(ref added);   // ObjectDisposedException when the grammar is disposed
            added_ = added;
            Pointer = handle_.DangerousGetHandle();
        }

        public void Dispose()
        {
            if (added_) handle_.DangerousRelease();
        }
    }
}
