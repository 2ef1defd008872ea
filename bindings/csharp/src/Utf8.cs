using System;
using System.Runtime.InteropServices;
using System.Text;

namespace Ember.Native
{
    /// <summary>UTF-8 both ways, by hand: Marshal.PtrToStringUTF8 is not in .NET Standard 2.0, and the
    /// default string marshalling is ANSI on .NET Framework.</summary>
    internal static class Utf8
    {
        /// <summary>The NUL-terminated UTF-8 bytes of s, for a `const char *` parameter.</summary>
        internal static byte[] ToNative(string s, string paramName)
        {
            if (s == null) throw new ArgumentNullException(paramName);
            if (s.IndexOf('\0') >= 0) throw new ArgumentException("contains a NUL character", paramName);
            byte[] bytes = new byte[Encoding.UTF8.GetByteCount(s) + 1];
            Encoding.UTF8.GetBytes(s, 0, s.Length, bytes, 0);
            return bytes;
        }

        internal static string FromNative(IntPtr p, int length)
        {
            if (p == IntPtr.Zero || length <= 0) return "";
            byte[] bytes = new byte[length];
            Marshal.Copy(p, bytes, 0, length);
            return Encoding.UTF8.GetString(bytes);
        }

        /// <summary>A NUL-terminated string that the library owns ("" for NULL).</summary>
        internal static string FromNative(IntPtr p)
        {
            if (p == IntPtr.Zero) return "";
            int n = 0;
            while (Marshal.ReadByte(p, n) != 0) n++;
            return FromNative(p, n);
        }
    }
}
