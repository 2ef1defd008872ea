using System.Runtime.CompilerServices;

// The unit tests check the binding's defaults against the library's *_params_init (internal helpers).
[assembly: InternalsVisibleTo("EmberTests")]
