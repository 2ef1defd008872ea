using System;
using Ember.Native;

namespace Ember
{
    /// <summary>A failed ember call: the status it returned and the library's message for it
    /// (ember_last_error, read on the same thread right after the call).</summary>
    public class EmberException : Exception
    {
        public EmberException(Status status, string message)
            : base(StatusName(status) + ": " + message)
        {
            Status = status;
            NativeMessage = message;
        }

        /// <summary>What the call returned.</summary>
        public Status Status { get; private set; }

        /// <summary>ember_last_error() as it was after the failing call.</summary>
        public string NativeMessage { get; private set; }

        /// <summary>The C name of a status, e.g. "EMBER_ERR_IO".</summary>
        public static string StatusName(Status status)
        {
            return Utf8.FromNative(NativeMethods.ember_status_string(status));
        }

        /// <summary>Throws for an error status (negative); returns non-error statuses unchanged. Must be
        /// called right after the native call, on its thread, before any other ember call.</summary>
        internal static Status Check(Status status)
        {
            if ((int)status < 0) throw new EmberException(status, Utf8.FromNative(NativeMethods.ember_last_error()));
            return status;
        }
    }
}
