using System;
using Ember.Native;

namespace Ember
{
    /// <summary>What concerns the library as a whole. Thread-safe.</summary>
    public static class EmberLibrary
    {
        /// <summary>The ABI generation this binding was written for (EMBER_ABI_VERSION).</summary>
        public const uint AbiVersion = NativeConstants.EMBER_ABI_VERSION;

        /// <summary>The loaded library's release, e.g. "0.4.0".</summary>
        public static string Version { get { return Utf8.FromNative(NativeMethods.ember_version()); } }

        /// <summary>The loaded library's ABI generation; this binding needs it to equal AbiVersion.</summary>
        public static uint LoadedAbiVersion { get { return NativeMethods.ember_abi_version(); } }

        /// <summary>Sends the library's log lines at or above minLevel to logger (null: silent, the
        /// default). The logger may be called from any thread doing ember work and must be
        /// thread-safe.</summary>
        public static void SetLogger(Action<LogLevel, string> logger, LogLevel minLevel)
        {
            Callbacks.Logger = logger;
            NativeMethods.ember_log_set(logger == null ? IntPtr.Zero : Callbacks.LogPtr, IntPtr.Zero, minLevel);
        }
    }
}
