using System;
using System.Runtime.ExceptionServices;
using System.Runtime.InteropServices;
using System.Threading;

namespace Ember.Native
{
    /// <summary>
    /// The functions native code calls back. Each is a static method wrapped once in a static delegate
    /// that lives as long as the process, so the function pointer handed to the library can never point
    /// at a collected delegate. The per-call state (the user's delegate, a cancellation token, an
    /// exception to rethrow) travels in user_data as a GCHandle that the caller allocates for exactly as
    /// long as native code may call back (the call, or a request's life). An exception thrown by user code
    /// must not unwind through native frames: it is caught here, stops the native work (the callback
    /// returns false) and is rethrown by the caller once the native call has returned.
    /// </summary>
    internal static class Callbacks
    {
        internal static readonly ember_progress_fn Progress = OnProgress;
        internal static readonly IntPtr ProgressPtr = Marshal.GetFunctionPointerForDelegate(Progress);
        internal static readonly ember_token_fn Token = OnToken;
        internal static readonly IntPtr TokenPtr = Marshal.GetFunctionPointerForDelegate(Token);
        internal static readonly ember_request_token_fn RequestToken = OnRequestToken;
        internal static readonly IntPtr RequestTokenPtr = Marshal.GetFunctionPointerForDelegate(RequestToken);
        internal static readonly ember_log_fn Log = OnLog;
        internal static readonly IntPtr LogPtr = Marshal.GetFunctionPointerForDelegate(Log);

        /// <summary>What one callback-taking call shares with its callback.</summary>
        internal abstract class CallState
        {
            internal CancellationToken Cancellation;
            internal ExceptionDispatchInfo Error;

            /// <summary>Rethrows, on the caller's thread, what the callback caught.</summary>
            internal void RethrowIfFailed()
            {
                if (Error != null) Error.Throw();
            }
        }

        internal sealed class ProgressState : CallState
        {
            internal Func<float, bool> User;
        }

        internal sealed class TokenState : CallState
        {
            internal Func<TokenEvent, bool> User;
        }

        internal sealed class RequestCallState : CallState
        {
            internal Func<TokenEvent, bool> User;
        }

        [MonoPInvokeCallback(typeof(ember_progress_fn))]
        private static bool OnProgress(float progress, IntPtr user_data)
        {
            var state = (ProgressState)GCHandle.FromIntPtr(user_data).Target;
            try
            {
                if (state.Cancellation.IsCancellationRequested) return false;
                return state.User == null || state.User(progress);
            }
            catch (Exception e)
            {
                state.Error = ExceptionDispatchInfo.Capture(e);
                return false;
            }
        }

        [MonoPInvokeCallback(typeof(ember_token_fn))]
        private static bool OnToken(int token, IntPtr text, UIntPtr text_len, IntPtr user_data)
        {
            var state = (TokenState)GCHandle.FromIntPtr(user_data).Target;
            try
            {
                if (state.Cancellation.IsCancellationRequested) return false;
                return state.User(new TokenEvent(token, Utf8.FromNative(text, checked((int)text_len.ToUInt64())), false));
            }
            catch (Exception e)
            {
                state.Error = ExceptionDispatchInfo.Capture(e);
                return false;
            }
        }

        [MonoPInvokeCallback(typeof(ember_request_token_fn))]
        private static bool OnRequestToken(IntPtr request, int token, IntPtr text, UIntPtr text_len, IntPtr user_data)
        {
            // Runs on the engine's worker thread: there is no caller to rethrow to, so an exception
            // cancels the request and is kept for Request.CallbackError.
            var state = (RequestCallState)GCHandle.FromIntPtr(user_data).Target;
            try
            {
                if (state.Cancellation.IsCancellationRequested) return false;
                return state.User(new TokenEvent(token, Utf8.FromNative(text, checked((int)text_len.ToUInt64())), false));
            }
            catch (Exception e)
            {
                state.Error = ExceptionDispatchInfo.Capture(e);
                return false;
            }
        }

        // The process-wide log sink (Ember.SetLogger); it may be called from any ember thread.
        internal static volatile Action<LogLevel, string> Logger;

        [MonoPInvokeCallback(typeof(ember_log_fn))]
        private static void OnLog(LogLevel level, IntPtr message, IntPtr user_data)
        {
            var logger = Logger;
            if (logger == null) return;
            try { logger(level, Utf8.FromNative(message)); }
            catch (Exception) { /* a logger that throws loses its line; nothing may unwind into C */ }
        }
    }
}
