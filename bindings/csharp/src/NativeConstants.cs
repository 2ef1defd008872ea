namespace Ember.Native
{
    /// <summary>The #define constants of ember.h, named verbatim (the layout test checks each against
    /// the table's "const" rows).</summary>
    internal static class NativeConstants
    {
        internal const uint EMBER_ABI_VERSION = 1;
        internal const uint EMBER_VERSION_MAJOR = 0;
        internal const uint EMBER_VERSION_MINOR = 4;
        internal const uint EMBER_VERSION_PATCH = 0;
        internal const uint EMBER_TOKENIZE_ADD_SPECIAL = 1u << 0;
        internal const uint EMBER_TOKENIZE_PARSE_SPECIAL = 1u << 1;
        internal const uint EMBER_DETOKENIZE_RENDER_SPECIAL = 1u << 0;
        internal const uint EMBER_DETOKENIZE_KEEP_LEADING_SPACE = 1u << 1;
        internal const uint EMBER_CPU_BUDGET_FIXED_THREADS = 1u << 0;
        internal const int EMBER_GPU_LAYERS_ALL = -1;
        internal const int EMBER_GPU_LAYERS_AUTO = -2;
        internal const uint EMBER_SESSION_KEPT_STATES = 4u;
    }
}
