using System;
using System.Runtime.InteropServices;

// The callback types of ember.h. The binding passes them to native code only as function pointers made
// from static delegate instances that live as long as the process (see Callbacks.cs), so no delegate
// native code holds can be collected.
namespace Ember.Native
{
    [NativeName("ember_log_fn")]
    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    internal delegate void ember_log_fn(LogLevel level, IntPtr message, IntPtr user_data);

    [NativeName("ember_progress_fn")]
    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    [return: MarshalAs(UnmanagedType.I1)]
    internal delegate bool ember_progress_fn(float progress, IntPtr user_data);

    [NativeName("ember_token_fn")]
    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    [return: MarshalAs(UnmanagedType.I1)]
    internal delegate bool ember_token_fn(int token, IntPtr text, UIntPtr text_len, IntPtr user_data);

    [NativeName("ember_request_token_fn")]
    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    [return: MarshalAs(UnmanagedType.I1)]
    internal delegate bool ember_request_token_fn(IntPtr request, int token, IntPtr text, UIntPtr text_len,
                                                  IntPtr user_data);
}
