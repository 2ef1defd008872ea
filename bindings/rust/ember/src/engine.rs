//! Engine: many requests on one model, batched continuously by a worker thread (or by `step`).
use crate::error::{check, Error, Result};
use crate::session::{Backend, KvType};
use crate::strings::two_call;
use crate::structured::CStrings;
use crate::{Grammar, Model, SamplerParams, Token};
use ember_sys as sys;
use std::ffi::{c_char, c_void, CStr};
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{self, NonNull};
use std::time::Duration;

/// Parameters of `Engine::new`; `Default` is `ember_engine_params_init`'s (the header documents each).
#[derive(Clone, Debug)]
pub struct EngineParams {
    pub n_ctx: u32,
    pub n_seq_max: u32,
    pub kv_bytes: u64,
    pub n_threads: u32,
    pub n_batch: u32,
    pub backend: Backend,
    /// No worker thread: the caller advances the engine with `Engine::step`.
    pub manual_step: bool,
    pub kv_type: KvType,
    /// Placement across devices, as `SessionParams`'s.
    pub gpu_layers: i32,
    pub experts_on_cpu: i32,
    pub gpu_budget_bytes: u64,
    /// Speculative decoding for the requests that do not opt out (`RequestOptions::no_speculation`):
    /// `Speculation::Mtp` (the model's own multi-token-prediction layers) or `Speculation::Lookup`
    /// (n-gram lookup); a request's tokens are the same as without it.
    pub speculation: Speculation,
    /// Tokens a request drafts per step, 1..8.
    pub spec_k: u32,
    /// `Speculation::Lookup`: longest suffix matched, 1..16.
    pub spec_ngram_max: u32,
}

/// An engine's speculative decoding (`ember_spec_mode`; an engine takes no draft model).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Speculation {
    Off,
    Lookup,
    Mtp,
}

/// A request's counters (`ember_request_stats`).
#[derive(Clone, Copy, Debug, Default)]
pub struct RequestStats {
    /// Tokens generated so far.
    pub tokens: u64,
    /// Engine steps whose pass evaluated its generated tokens.
    pub decode_steps: u64,
    pub drafted: u64,
    pub accepted: u64,
    /// accepted / drafted (0 when nothing was drafted).
    pub acceptance_rate: f64,
}

fn c_engine_params_default() -> sys::ember_engine_params {
    let mut p = std::mem::MaybeUninit::<sys::ember_engine_params>::uninit();
    // SAFETY: init fills every field.
    unsafe {
        sys::ember_engine_params_init(p.as_mut_ptr());
        p.assume_init()
    }
}

impl Default for EngineParams {
    fn default() -> Self {
        let p = c_engine_params_default();
        EngineParams {
            n_ctx: p.n_ctx,
            n_seq_max: p.n_seq_max,
            kv_bytes: p.kv_bytes,
            n_threads: p.n_threads,
            n_batch: p.n_batch,
            backend: Backend::Auto,
            manual_step: p.manual_step,
            kv_type: KvType::from_sys(p.kv_type),
            gpu_layers: p.gpu_layers,
            experts_on_cpu: p.experts_on_cpu,
            gpu_budget_bytes: p.gpu_budget_bytes,
            speculation: Speculation::Off,
            spec_k: p.spec_k,
            spec_ngram_max: p.spec_ngram_max,
        }
    }
}

/// An engine on a model. It borrows the model (which must outlive it); requests do not borrow the
/// engine (their handles stay valid after it is gone). Freed on drop, cancelling running requests.
pub struct Engine<'m> {
    raw: NonNull<sys::ember_engine>,
    _model: PhantomData<&'m Model>,
}

// SAFETY: ember.h, "Engine": "every engine and request function may be called from any thread,
// concurrently". So engines and requests are Send and Sync (all their methods take &self).
unsafe impl Send for Engine<'_> {}
unsafe impl Sync for Engine<'_> {}

/// A request's state (`ember_request_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestState {
    Queued,
    Running,
    Done,
    Cancelled,
    Failed,
}

type TokenCallback = Box<dyn FnMut(Token, &str) -> bool + Send>;

/// What `Engine::submit_with` takes besides the prompt and the callback. `Default`: no token limit
/// (until end of generation or a full context), greedy, no stop strings, no grammar.
#[derive(Clone, Copy, Debug, Default)]
pub struct RequestOptions<'a> {
    /// Tokens to generate at most; 0: until end of generation or a full context.
    pub max_tokens: u32,
    /// None: greedy.
    pub sampling: Option<&'a SamplerParams>,
    /// Stop strings (copied at submit): the request ends (`RequestState::Done`) once its text contains
    /// one; neither its text nor the callback get the stop string or what follows it.
    pub stop: &'a [&'a str],
    /// Constrains the request's sampling; the request keeps its own reference, so the grammar may be
    /// dropped after submit. A dead end fails the request with `Status::GrammarDeadEnd`.
    pub grammar: Option<&'a Grammar>,
    /// true: plain decoding for this request even when the engine speculates (the tokens are the same).
    pub no_speculation: bool,
}

/// A submitted request. Freed on drop (cancelling it if it still runs).
pub struct Request {
    raw: NonNull<sys::ember_request>,
    // Freed after ember_request_free, which waits out a callback in flight and prevents later ones.
    _callback: Option<Box<TokenCallback>>,
}

// SAFETY: as for Engine (same header rule).
unsafe impl Send for Request {}
unsafe impl Sync for Request {}

unsafe extern "C" fn request_trampoline(
    _request: *mut sys::ember_request,
    token: Token,
    text: *const c_char,
    text_len: usize,
    user_data: *mut c_void,
) -> bool {
    // SAFETY: user_data is the Box<TokenCallback> owned by the Request, alive until after
    // ember_request_free; the engine calls it from one thread at a time.
    let f = unsafe { &mut *(user_data as *mut TokenCallback) };
    let text = if text.is_null() || text_len == 0 {
        String::new()
    } else {
        // SAFETY: text_len bytes valid during the call.
        String::from_utf8_lossy(unsafe { std::slice::from_raw_parts(text as *const u8, text_len) }).into_owned()
    };
    // A panic must not unwind into the engine's thread: it cancels the request instead.
    catch_unwind(AssertUnwindSafe(|| f(token, &text))).unwrap_or(false)
}

impl<'m> Engine<'m> {
    pub fn new(model: &'m Model, params: &EngineParams) -> Result<Engine<'m>> {
        let mut p = c_engine_params_default();
        p.n_ctx = params.n_ctx;
        p.n_seq_max = params.n_seq_max;
        p.kv_bytes = params.kv_bytes;
        p.n_threads = params.n_threads;
        p.n_batch = params.n_batch;
        p.backend = match params.backend {
            Backend::Auto => sys::EMBER_BACKEND_AUTO,
            Backend::Cpu => sys::EMBER_BACKEND_CPU,
            Backend::Cuda => sys::EMBER_BACKEND_CUDA,
            Backend::Vulkan => sys::EMBER_BACKEND_VULKAN,
        };
        p.manual_step = params.manual_step;
        p.kv_type = params.kv_type.to_sys();
        p.gpu_layers = params.gpu_layers;
        p.experts_on_cpu = params.experts_on_cpu;
        p.gpu_budget_bytes = params.gpu_budget_bytes;
        p.speculation = match params.speculation {
            Speculation::Off => sys::EMBER_SPEC_OFF,
            Speculation::Lookup => sys::EMBER_SPEC_LOOKUP,
            Speculation::Mtp => sys::EMBER_SPEC_MTP,
        };
        p.spec_k = params.spec_k;
        p.spec_ngram_max = params.spec_ngram_max;
        let mut raw = ptr::null_mut();
        // SAFETY: live model, params, out pointer.
        check(unsafe { sys::ember_engine_create(model.as_ptr(), &p, &mut raw) })?;
        Ok(Engine { raw: NonNull::new(raw).expect("ember returned OK with a NULL engine"), _model: PhantomData })
    }

    /// Queues a request: `prompt` (copied), at most `max_tokens` (0: until the end), `sampling` (None:
    /// greedy), and an optional closure called on the engine's thread with each token and its text
    /// (return false to cancel; a panic in it cancels the request).
    pub fn submit(
        &self,
        prompt: &[Token],
        max_tokens: u32,
        sampling: Option<&SamplerParams>,
        on_token: Option<TokenCallback>,
    ) -> Result<Request> {
        self.submit_with(prompt, &RequestOptions { max_tokens, sampling, ..Default::default() }, on_token)
    }

    /// `submit` with stop strings and a grammar (see `RequestOptions`). A stop string with a NUL inside
    /// is `InvalidArgument`.
    pub fn submit_with(&self, prompt: &[Token], options: &RequestOptions, on_token: Option<TokenCallback>) -> Result<Request> {
        let stop = CStrings::new(options.stop)?;
        let (max_tokens, sampling) = (options.max_tokens, options.sampling);
        let mut p = std::mem::MaybeUninit::<sys::ember_request_params>::uninit();
        // SAFETY: init fills every field.
        let mut p = unsafe {
            sys::ember_request_params_init(p.as_mut_ptr());
            p.assume_init()
        };
        let sp = sampling.map(SamplerParams::to_c);
        p.prompt = prompt.as_ptr();
        p.n_prompt = prompt.len();
        p.max_tokens = max_tokens;
        p.sampling = sp.as_ref().map_or(ptr::null(), |s| s as *const _);
        (p.stop, p.n_stop) = stop.as_c();
        p.grammar = options.grammar.map_or(ptr::null(), Grammar::as_ptr);
        p.speculate = !options.no_speculation;
        let mut callback = on_token.map(Box::new);
        if let Some(cb) = callback.as_mut() {
            p.on_token = Some(request_trampoline);
            p.user_data = &mut **cb as *mut TokenCallback as *mut c_void;
        }
        let mut raw = ptr::null_mut();
        // SAFETY: params with pointers valid for the call (prompt, sampling and stop strings are copied
        // at submit, the grammar referenced);
        // the callback box lives in the Request until after ember_request_free.
        check(unsafe { sys::ember_request_submit(self.raw.as_ptr(), &p, &mut raw) })?;
        Ok(Request { raw: NonNull::new(raw).expect("ember returned OK with a NULL request"), _callback: callback })
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::ember_engine {
        self.raw.as_ptr()
    }

    /// Manual mode only: one step; returns whether requests are still queued or running.
    pub fn step(&self) -> Result<bool> {
        let mut busy = false;
        // SAFETY: live engine, out pointer.
        check(unsafe { sys::ember_engine_step(self.raw.as_ptr(), &mut busy) })?;
        Ok(busy)
    }

    /// Evaluates `tokens` once and keeps them cached for every request starting with them.
    pub fn pin_prefix(&self, tokens: &[Token]) -> Result<()> {
        // SAFETY: token slice.
        check(unsafe { sys::ember_engine_pin_prefix(self.raw.as_ptr(), tokens.as_ptr(), tokens.len()) }).map(|_| ())
    }
}

impl Drop for Engine<'_> {
    fn drop(&mut self) {
        // SAFETY: we own the engine; requests keep valid handles after it (header).
        unsafe { sys::ember_engine_free(self.raw.as_ptr()) }
    }
}

fn state_of(s: sys::ember_request_state) -> RequestState {
    match s {
        sys::EMBER_REQUEST_QUEUED => RequestState::Queued,
        sys::EMBER_REQUEST_RUNNING => RequestState::Running,
        sys::EMBER_REQUEST_DONE => RequestState::Done,
        sys::EMBER_REQUEST_CANCELLED => RequestState::Cancelled,
        _ => RequestState::Failed,
    }
}

impl Request {
    pub(crate) fn as_ptr(&self) -> *mut sys::ember_request {
        self.raw.as_ptr()
    }

    /// A request without a callback, from a handle the library returned with EMBER_OK.
    pub(crate) fn from_raw(raw: *mut sys::ember_request) -> Request {
        Request { raw: NonNull::new(raw).expect("ember returned OK with a NULL request"), _callback: None }
    }

    /// Takes the tokens generated since the last poll, and the state; never blocks on the engine.
    pub fn poll(&self) -> Result<(Vec<Token>, RequestState)> {
        let mut state = 0;
        let mut n = 0usize;
        // SAFETY: NULL/0 reads the count and state without consuming.
        check(unsafe { sys::ember_request_poll(self.raw.as_ptr(), ptr::null_mut(), 0, &mut n, &mut state) })?;
        let mut tokens = vec![0; n];
        if n > 0 {
            // SAFETY: buffer of n tokens.
            check(unsafe { sys::ember_request_poll(self.raw.as_ptr(), tokens.as_mut_ptr(), n, &mut n, &mut state) })?;
            tokens.truncate(n);
        }
        Ok((tokens, state_of(state)))
    }

    /// The text generated so far.
    pub fn text(&self) -> Result<String> {
        let bytes = two_call::<u8>(1, |buf, cap, len| unsafe {
            // SAFETY: buffer of cap bytes or NULL.
            sys::ember_request_text(self.raw.as_ptr(), buf as *mut _, cap, len)
        })?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Waits until the request ended (true) or `timeout` passed (false); None waits without limit.
    pub fn wait(&self, timeout: Option<Duration>) -> Result<bool> {
        let ms = timeout.map_or(u32::MAX, |d| d.as_millis().min(u32::MAX as u128 - 1) as u32);
        // SAFETY: live request.
        Ok(check(unsafe { sys::ember_request_wait(self.raw.as_ptr(), ms) })? == sys::EMBER_OK)
    }

    /// Its counters: tokens, steps, drafts and accepted drafts.
    pub fn stats(&self) -> Result<RequestStats> {
        let mut s = std::mem::MaybeUninit::<sys::ember_request_stats>::uninit();
        // SAFETY: init fills every field; live request.
        let s = unsafe {
            sys::ember_request_stats_init(s.as_mut_ptr());
            let mut s = s.assume_init();
            check(sys::ember_request_get_stats(self.raw.as_ptr(), &mut s))?;
            s
        };
        Ok(RequestStats {
            tokens: s.n_tokens,
            decode_steps: s.decode_steps,
            drafted: s.drafted,
            accepted: s.accepted,
            acceptance_rate: s.acceptance_rate,
        })
    }

    /// Cancels at the next step boundary (nothing if it already ended).
    pub fn cancel(&self) -> Result<()> {
        // SAFETY: live request.
        check(unsafe { sys::ember_request_cancel(self.raw.as_ptr()) }).map(|_| ())
    }

    /// Why the request failed (None if it has not).
    pub fn error(&self) -> Result<Option<Error>> {
        let mut status = 0;
        let mut msg: *const c_char = ptr::null();
        // SAFETY: out pointers; the message is owned by the request and copied here.
        check(unsafe { sys::ember_request_error(self.raw.as_ptr(), &mut status, &mut msg) })?;
        if status == sys::EMBER_OK {
            return Ok(None);
        }
        let message = if msg.is_null() {
            String::new()
        } else {
            // SAFETY: NUL-terminated, valid until the request is freed.
            unsafe { CStr::from_ptr(msg) }.to_string_lossy().into_owned()
        };
        Ok(Some(Error { status: crate::Status::from_raw(status), message }))
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        // SAFETY: we own the handle; the callback box is dropped only after this returns.
        unsafe { sys::ember_request_free(self.raw.as_ptr()) }
    }
}
