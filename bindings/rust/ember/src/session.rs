//! Sessions: one sequence's state (KV cache, logits) on one model; and their cancellation.
use crate::error::{check, Result};
use crate::strings::{path_to_c, two_call};
use crate::{Model, Token};
use ember_sys as sys;
use std::marker::PhantomData;
use std::path::Path;
use std::ptr::{self, NonNull};
use std::sync::{Arc, Mutex};

/// Which compute backend a session runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The best one available on this machine (the default).
    Auto,
    Cpu,
    Cuda,
    Vulkan,
}

/// Element type of the KV cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvType {
    F16,
    Q8_0,
    /// 3.56 times the tokens of F16 in the same memory, for a larger quality cost (EMBER_1.10).
    Q4_0,
}

impl KvType {
    pub(crate) fn from_sys(t: sys::ember_kv_type) -> KvType {
        match t {
            sys::EMBER_KV_Q8_0 => KvType::Q8_0,
            sys::EMBER_KV_Q4_0 => KvType::Q4_0,
            _ => KvType::F16,
        }
    }
    pub(crate) fn to_sys(self) -> sys::ember_kv_type {
        match self {
            KvType::F16 => sys::EMBER_KV_F16,
            KvType::Q8_0 => sys::EMBER_KV_Q8_0,
            KvType::Q4_0 => sys::EMBER_KV_Q4_0,
        }
    }
}

/// How a session's products with quantized weights (Q8_0, Q4_0, K-quants, ...) round the activations
/// (`Session::set_precision`; ember.h's `ember_precision` documents both in full). Float weights are
/// unaffected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Precision {
    /// 8-bit activations with a scale per block of 32, as llama.cpp does: the fastest (the default).
    #[default]
    Default,
    /// The remainder of that rounding multiplied too: logits 30-100 times closer to exact arithmetic,
    /// prefill up to twice as long, decode a little slower. For evaluation and exact references. CPU
    /// backend only.
    High,
}

/// Parameters of `Session::new`. `Default` takes the library's own defaults
/// (`ember_session_params_init`); the header documents each field.
#[derive(Clone, Debug)]
pub struct SessionParams {
    /// Context length in tokens (0: the model's trained context, capped at 4096).
    pub n_ctx: u32,
    /// CPU worker threads (0: physical cores, at most 8).
    pub n_threads: u32,
    /// Tokens per forward pass when feeding long prompts.
    pub n_batch: u32,
    pub seed: u64,
    pub backend: Backend,
    /// Sequences the KV cache is sized for (this session and its forks).
    pub n_seq_max: u32,
    pub kv_type: KvType,
    /// Placement across devices with a GPU backend (docs/offload.md): the GPU's layer count,
    /// `sys::EMBER_GPU_LAYERS_ALL` (default) or `sys::EMBER_GPU_LAYERS_AUTO`; the rest run on the CPU.
    pub gpu_layers: i32,
    /// GPU layers whose MoE experts run on the CPU (`sys::EMBER_GPU_LAYERS_ALL`: every one).
    pub experts_on_cpu: i32,
    /// Bytes the GPU's part may take (0: its free memory less a margin).
    pub gpu_budget_bytes: u64,
}

fn c_session_params_default() -> sys::ember_session_params {
    let mut p = std::mem::MaybeUninit::<sys::ember_session_params>::uninit();
    // SAFETY: init fills every field.
    unsafe {
        sys::ember_session_params_init(p.as_mut_ptr());
        p.assume_init()
    }
}

impl Default for SessionParams {
    fn default() -> Self {
        let p = c_session_params_default();
        SessionParams {
            n_ctx: p.n_ctx,
            n_threads: p.n_threads,
            n_batch: p.n_batch,
            seed: p.seed,
            backend: match p.backend {
                sys::EMBER_BACKEND_CPU => Backend::Cpu,
                sys::EMBER_BACKEND_CUDA => Backend::Cuda,
                sys::EMBER_BACKEND_VULKAN => Backend::Vulkan,
                _ => Backend::Auto,
            },
            n_seq_max: p.n_seq_max,
            kv_type: KvType::from_sys(p.kv_type),
            gpu_layers: p.gpu_layers,
            experts_on_cpu: p.experts_on_cpu,
            gpu_budget_bytes: p.gpu_budget_bytes,
        }
    }
}

/// The CPU worker threads a session gets when its `n_threads` is 0 (this machine's choice).
pub fn default_thread_count() -> u32 {
    // SAFETY: no arguments; always callable.
    unsafe { sys::ember_default_thread_count() }
}

impl SessionParams {
    fn to_c(&self) -> sys::ember_session_params {
        let mut p = c_session_params_default();
        p.n_ctx = self.n_ctx;
        p.n_threads = self.n_threads;
        p.n_batch = self.n_batch;
        p.seed = self.seed;
        p.backend = match self.backend {
            Backend::Auto => sys::EMBER_BACKEND_AUTO,
            Backend::Cpu => sys::EMBER_BACKEND_CPU,
            Backend::Cuda => sys::EMBER_BACKEND_CUDA,
            Backend::Vulkan => sys::EMBER_BACKEND_VULKAN,
        };
        p.n_seq_max = self.n_seq_max;
        p.kv_type = self.kv_type.to_sys();
        p.gpu_layers = self.gpu_layers;
        p.experts_on_cpu = self.experts_on_cpu;
        p.gpu_budget_bytes = self.gpu_budget_bytes;
        p
    }
}

/// The session pointer as cancel handles see it: NULL once the session is freed.
struct CancelTarget(Mutex<*mut sys::ember_session>);

// SAFETY: the pointer is only passed to ember_session_cancel, which the header allows "from any thread"
// ("Only sets a flag"), and only under the mutex that Session's drop takes before freeing it.
unsafe impl Send for CancelTarget {}
unsafe impl Sync for CancelTarget {}

/// Stops the `feed`/`generate` running on a session from another thread (a user's Ctrl-C, a UI button),
/// or a `tokens` iteration. A cancelled feed returns an `Error` with `Status::Cancelled` and leaves the
/// session as before it; a cancelled generation ends with `Finish::Stopped` after the token it was
/// emitting; a cancelled iteration gives one `Err` with `Status::Cancelled` at its next step and ends
/// (a cancel between two steps is kept for the next one: `ember_session_cancel_arm`). Each `feed`,
/// `generate`, `generate_next` and `tokens` starts uncancelled; a cancel does nothing once the session
/// is dropped.
#[derive(Clone)]
pub struct CancelHandle {
    target: Arc<CancelTarget>,
}

// CancelHandle is Send + Sync through Arc<CancelTarget> (see the SAFETY note there): ember.h says
// ember_session_cancel "may be called from any thread and from a signal handler".

impl CancelHandle {
    pub fn cancel(&self) {
        let guard = self.target.0.lock().unwrap_or_else(|e| e.into_inner());
        if !guard.is_null() {
            // SAFETY: non-NULL means the session is alive: drop sets NULL under this lock first.
            unsafe { sys::ember_session_cancel(*guard) };
        }
    }
}

/// A session on a model: the KV cache and logits of one sequence. It borrows its model (`'m`), so the
/// model cannot be dropped first. Freed on drop.
pub struct Session<'m> {
    raw: NonNull<sys::ember_session>,
    cancel: Arc<CancelTarget>,
    _model: PhantomData<&'m Model>,
}

// SAFETY: ember.h, "Threads": "An ember_session ... must be used by one thread at a time (different
// sessions may run concurrently, forks of one session included)". So a session may move to another
// thread (Send) but not be used from two at once: no Sync (every mutating method takes &mut self, and
// without Sync no two threads can hold &Session). Its model is Sync, so the borrow may cross too.
unsafe impl Send for Session<'_> {}

impl<'m> Session<'m> {
    /// Creates a session on `model` (errors: a vocab-only model, bad params, an unavailable backend,
    /// out of memory).
    pub fn new(model: &'m Model, params: &SessionParams) -> Result<Session<'m>> {
        let p = params.to_c();
        let mut raw = ptr::null_mut();
        // SAFETY: live model, initialised params, out pointer.
        check(unsafe { sys::ember_session_create(model.as_ptr(), &p, &mut raw) })?;
        Ok(Session::from_raw(raw))
    }

    fn from_raw(raw: *mut sys::ember_session) -> Session<'m> {
        let raw = NonNull::new(raw).expect("ember returned OK with a NULL session");
        Session { raw, cancel: Arc::new(CancelTarget(Mutex::new(raw.as_ptr()))), _model: PhantomData }
    }

    /// The raw handle, for calls into `ember-sys` this crate does not wrap. It stays owned by `self`.
    pub fn as_ptr(&self) -> *mut sys::ember_session {
        self.raw.as_ptr()
    }

    /// A handle that cancels this session's running feed or generation from any thread.
    pub fn cancel_handle(&self) -> CancelHandle {
        CancelHandle { target: self.cancel.clone() }
    }

    /// Evaluates `tokens` after the current position. `ContextFull` if they do not fit (nothing is
    /// evaluated), `Cancelled` when a `CancelHandle` stopped it (the session is as before).
    pub fn feed(&mut self, tokens: &[Token]) -> Result<()> {
        self.arm_cancel();
        // SAFETY: live session, token slice.
        check(unsafe { sys::ember_session_feed(self.as_ptr(), tokens.as_ptr(), tokens.len()) }).map(|_| ())
    }

    /// Starts a call uncancelled, with a cancel that comes from now on kept until the call sees it.
    pub(crate) fn arm_cancel(&mut self) {
        // SAFETY: live session; called on the thread that uses it, as ember.h asks.
        unsafe { sys::ember_session_cancel_arm(self.as_ptr()) }
    }

    /// The logits after the last fed token (n_vocab values). Borrowed from the session: the borrow ends
    /// before the next call that changes them (all of which take `&mut self`).
    pub fn logits(&self) -> Result<&[f32]> {
        let mut p = ptr::null();
        let mut n = 0usize;
        // SAFETY: out pointers; the array is owned by the session and valid until it next changes.
        check(unsafe { sys::ember_session_logits(self.as_ptr(), &mut p, &mut n) })?;
        if p.is_null() {
            return Ok(&[]);
        }
        // SAFETY: n floats at p, alive while &self is borrowed (see above).
        Ok(unsafe { std::slice::from_raw_parts(p, n) })
    }

    /// Number of tokens in the session (the position of the next one).
    pub fn position(&self) -> Result<u32> {
        let mut pos = 0;
        // SAFETY: out pointer.
        check(unsafe { sys::ember_session_position(self.as_ptr(), &mut pos) })?;
        Ok(pos)
    }

    /// The context length in tokens.
    pub fn context_length(&self) -> Result<u32> {
        let mut n = 0;
        // SAFETY: out pointer.
        check(unsafe { sys::ember_session_context_length(self.as_ptr(), &mut n) })?;
        Ok(n)
    }

    /// The backend this session runs on (what `Backend::Auto` chose) and its CPU worker threads
    /// (0 on a GPU backend).
    pub fn backend(&self) -> Result<(Backend, u32)> {
        let mut kind: sys::ember_backend_kind = 0;
        let mut n = 0;
        // SAFETY: out pointers.
        check(unsafe { sys::ember_session_backend(self.as_ptr(), &mut kind, &mut n) })?;
        let b = match kind {
            sys::EMBER_BACKEND_CPU => Backend::Cpu,
            sys::EMBER_BACKEND_CUDA => Backend::Cuda,
            sys::EMBER_BACKEND_VULKAN => Backend::Vulkan,
            _ => Backend::Auto,
        };
        Ok((b, n))
    }

    /// Sets how the next feeds and generated tokens round the activations (see `Precision`). Rows of the
    /// KV cache already computed stay as they were, so set it before feeding the prompt; a fork starts
    /// with this session's setting. `Unsupported` for `Precision::High` on a GPU backend (the setting is
    /// then unchanged). Needs libember's EMBER_1.6.
    pub fn set_precision(&mut self, precision: Precision) -> Result<()> {
        let p = match precision {
            Precision::Default => sys::EMBER_PRECISION_DEFAULT,
            Precision::High => sys::EMBER_PRECISION_HIGH,
        };
        // SAFETY: live session, used by this thread (&mut self).
        check(unsafe { sys::ember_session_set_precision(self.as_ptr(), p) }).map(|_| ())
    }

    /// Rolls back to the first `n_tokens` tokens (at most the position).
    pub fn truncate(&mut self, n_tokens: u32) -> Result<()> {
        // SAFETY: live session.
        check(unsafe { sys::ember_session_truncate(self.as_ptr(), n_tokens) }).map(|_| ())
    }

    /// The session's state (tokens, KV cache, logits) in ember's versioned, checksummed format.
    pub fn save(&self) -> Result<Vec<u8>> {
        two_call::<u8>(0, |buf, cap, len| unsafe {
            // SAFETY: buffer of cap bytes or NULL.
            sys::ember_session_save(self.as_ptr(), buf as *mut _, cap, len)
        })
    }

    /// Replaces the state by a saved one (validated first: `CorruptData` leaves the session unchanged).
    pub fn restore(&mut self, data: &[u8]) -> Result<()> {
        // SAFETY: data slice.
        check(unsafe { sys::ember_session_restore(self.as_ptr(), data.as_ptr() as *const _, data.len()) }).map(|_| ())
    }

    pub fn save_file(&self, path: impl AsRef<Path>) -> Result<()> {
        let p = path_to_c(path.as_ref())?;
        // SAFETY: C string.
        check(unsafe { sys::ember_session_save_file(self.as_ptr(), p.as_ptr()) }).map(|_| ())
    }

    pub fn restore_file(&mut self, path: impl AsRef<Path>) -> Result<()> {
        let p = path_to_c(path.as_ref())?;
        // SAFETY: C string.
        check(unsafe { sys::ember_session_restore_file(self.as_ptr(), p.as_ptr()) }).map(|_| ())
    }

    /// A new session continuing from this one's state, sharing its KV blocks copy-on-write. It borrows
    /// the same model, lives independently of `self` and may be used on another thread.
    pub fn fork(&mut self) -> Result<Session<'m>> {
        let mut raw = ptr::null_mut();
        // SAFETY: live session, out pointer.
        check(unsafe { sys::ember_session_fork(self.as_ptr(), &mut raw) })?;
        Ok(Session::from_raw(raw))
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        // Cancel handles must not reach a freed session: clear their pointer before freeing.
        *self.cancel.0.lock().unwrap_or_else(|e| e.into_inner()) = ptr::null_mut();
        // SAFETY: we own the session.
        unsafe { sys::ember_session_free(self.raw.as_ptr()) }
    }
}

