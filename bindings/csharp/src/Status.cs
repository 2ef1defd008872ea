namespace Ember
{
    /// <summary>The result of every fallible call (ember_status). The numbers are those of ember.h and
    /// never change; non-negative values are not errors.</summary>
    [NativeName("ember_status")]
    public enum Status
    {
        [NativeName("EMBER_OK")] Ok = 0,
        /// <summary>Generation ended at an end-of-generation token.</summary>
        [NativeName("EMBER_END_OF_GENERATION")] EndOfGeneration = 1,
        /// <summary>A callback returned false or the session was cancelled; the work stopped early.</summary>
        [NativeName("EMBER_STOPPED")] Stopped = 2,
        [NativeName("EMBER_ERR_INVALID_ARGUMENT")] InvalidArgument = -1,
        [NativeName("EMBER_ERR_OUT_OF_MEMORY")] OutOfMemory = -2,
        /// <summary>A file could not be opened, mapped, read or written.</summary>
        [NativeName("EMBER_ERR_IO")] IO = -3,
        [NativeName("EMBER_ERR_INVALID_MODEL")] InvalidModel = -4,
        [NativeName("EMBER_ERR_UNSUPPORTED")] Unsupported = -5,
        [NativeName("EMBER_ERR_CANCELLED")] Cancelled = -6,
        [NativeName("EMBER_ERR_CONTEXT_FULL")] ContextFull = -7,
        [NativeName("EMBER_ERR_BUFFER_TOO_SMALL")] BufferTooSmall = -8,
        [NativeName("EMBER_ERR_NOT_FOUND")] NotFound = -9,
        [NativeName("EMBER_ERR_TYPE_MISMATCH")] TypeMismatch = -10,
        [NativeName("EMBER_ERR_BACKEND")] Backend = -11,
        [NativeName("EMBER_ERR_INVALID_STATE")] InvalidState = -12,
        [NativeName("EMBER_ERR_CORRUPT_DATA")] CorruptData = -13,
        [NativeName("EMBER_ERR_GRAMMAR_DEAD_END")] GrammarDeadEnd = -14,
        /// <summary>A bug in ember; the message says where.</summary>
        [NativeName("EMBER_ERR_INTERNAL")] Internal = -100,
    }
}
