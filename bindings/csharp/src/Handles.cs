using System;
using System.Runtime.InteropServices;

// SafeHandles own the native objects: each frees its object exactly once (Dispose or, if the program
// forgot, the finalizer), and P/Invoke keeps a handle alive and referenced for the length of every call
// it is passed to, so a Dispose on another thread cannot free an object under a running call.
namespace Ember.Native
{
    internal abstract class EmberHandle : SafeHandle
    {
        protected EmberHandle() : base(IntPtr.Zero, true) { }
        public override bool IsInvalid { get { return handle == IntPtr.Zero; } }
    }

    internal sealed class ModelHandle : EmberHandle
    {
        protected override bool ReleaseHandle()
        {
            NativeMethods.ember_model_free(handle);
            return true;
        }
    }

    /// <summary>A handle that must not outlive its model (sessions, engines): it holds a reference on
    /// the model's handle, so that the model is freed after it even when the finalizer, which runs in
    /// no set order, frees both.</summary>
    internal abstract class ModelChildHandle : EmberHandle
    {
        private ModelHandle model_;

        internal void HoldModel(ModelHandle model)
        {
            bool added = false;
            model.DangerousAddRef(ref added);
            if (added) model_ = model;
        }

        protected abstract void Free(IntPtr h);

        protected override bool ReleaseHandle()
        {
            Free(handle);
            if (model_ != null) model_.DangerousRelease();
            return true;
        }
    }

    internal sealed class SessionHandle : ModelChildHandle
    {
        protected override void Free(IntPtr h) { NativeMethods.ember_session_free(h); }
    }

    internal sealed class EngineHandle : ModelChildHandle
    {
        protected override void Free(IntPtr h) { NativeMethods.ember_engine_free(h); }
    }

    /// <summary>A grammar: it does not refer to its model once made, so it holds no reference on it.</summary>
    internal sealed class GrammarHandle : EmberHandle
    {
        protected override bool ReleaseHandle()
        {
            NativeMethods.ember_grammar_free(handle);
            return true;
        }
    }

    internal sealed class SamplerHandle : EmberHandle
    {
        protected override bool ReleaseHandle()
        {
            NativeMethods.ember_sampler_free(handle);
            return true;
        }
    }

    /// <summary>A request, and the GCHandle of the object its on_token callback reaches through
    /// user_data: freed only after ember_request_free, which waits out a callback in flight and stops
    /// later ones, so the engine's thread never follows a freed GCHandle.</summary>
    internal sealed class RequestHandle : EmberHandle
    {
        internal GCHandle Callback;

        protected override bool ReleaseHandle()
        {
            NativeMethods.ember_request_free(handle);
            if (Callback.IsAllocated) Callback.Free();
            return true;
        }
    }
}
