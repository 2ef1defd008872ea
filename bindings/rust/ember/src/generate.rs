//! Generation: one token at a time, as an iterator, or in one call with a streaming closure.
use crate::error::{check, Error, Result, Status};
use crate::structured::CStrings;
use crate::{Grammar, Sampler, Session, Token};
use ember_sys as sys;
use std::any::Any;
use std::ffi::{c_char, c_void};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::ptr;

/// One generated token and the text it completes (whole UTF-8 characters: bytes of a character split
/// across tokens come with the token that completes it, so `text` may be empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece {
    pub token: Token,
    pub text: String,
    /// The token ends generation: EOS and the like (not fed; `text` holds what was still held back),
    /// or, with `Session::set_stop`, a token that completes a stop string (fed; `text` ends before it).
    pub end_of_generation: bool,
}

/// Why `Session::generate` returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    /// max_tokens were generated.
    MaxTokens,
    /// The model produced an end-of-generation token, or the text reached a stop string.
    EndOfGeneration,
    /// The closure returned false, or a `CancelHandle` cancelled.
    Stopped,
}

/// What one `Session::generate_with` call takes besides the sampler. `Default`: no token limit (until
/// end of generation or a full context), no stop strings, no grammar.
#[derive(Clone, Copy, Debug, Default)]
pub struct GenerateOptions<'a> {
    /// Tokens to generate at most; 0: until end of generation or a full context.
    pub max_tokens: u32,
    /// Up to 16 stop strings of up to 1024 bytes: generation ends (`Finish::EndOfGeneration`) once the
    /// text contains one, across token boundaries. Neither the stop string nor anything after it
    /// reaches `on_token`: text that could begin one is held back until the next token decides, so a
    /// token's text may be empty and a later one's longer than its own.
    pub stop: &'a [&'a str],
    /// Constrains this call only (replacing the sampler's own grammar for the call).
    pub grammar: Option<&'a Grammar>,
}

/// `Session::generate`'s result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Generated {
    pub count: usize,
    pub finish: Finish,
}

pub(crate) fn text_of(p: *const c_char, len: usize) -> String {
    if p.is_null() || len == 0 {
        return String::new();
    }
    // SAFETY: len bytes at p, valid during the call that gave them.
    let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, len) };
    String::from_utf8_lossy(bytes).into_owned()
}

struct Stream<F> {
    f: F,
    panic: Option<Box<dyn Any + Send>>,
}

unsafe extern "C" fn token_trampoline<F: FnMut(Token, &str) -> bool>(
    token: Token,
    text: *const c_char,
    text_len: usize,
    user_data: *mut c_void,
) -> bool {
    // SAFETY: user_data is the &mut Stream<F> that Session::generate passed, alive for the call.
    let ctx = unsafe { &mut *(user_data as *mut Stream<F>) };
    if ctx.panic.is_some() {
        return false;
    }
    let text = text_of(text, text_len);
    // A panic must not unwind into C: stop generating and resume it after ember_generate returned.
    match catch_unwind(AssertUnwindSafe(|| (ctx.f)(token, &text))) {
        Ok(go_on) => go_on,
        Err(payload) => {
            ctx.panic = Some(payload);
            false
        }
    }
}

impl<'m> Session<'m> {
    /// One decode step (`ember_generate_next`): samples from the current logits, records the token in
    /// the sampler and, unless it ends generation, feeds it.
    pub fn generate_next(&mut self, sampler: &mut Sampler) -> Result<Piece> {
        self.arm_cancel();
        self.step(sampler)
    }

    /// One decode step without arming: a `Tokens` iteration's pending cancel stops it
    /// (`ember_generate_next` then returns EMBER_STOPPED, here an `Err` with `Status::Cancelled`).
    fn step(&mut self, sampler: &mut Sampler) -> Result<Piece> {
        let mut token = 0;
        let mut text = ptr::null();
        let mut len = 0usize;
        // SAFETY: live session and sampler; out pointers; the text is copied before the next call.
        let st = check(unsafe {
            sys::ember_generate_next(self.as_ptr(), sampler.as_ptr(), &mut token, &mut text, &mut len)
        })?;
        if st == sys::EMBER_STOPPED {
            return Err(Error { status: Status::Cancelled, message: "cancelled by a CancelHandle".to_string() });
        }
        Ok(Piece { token, text: text_of(text, len), end_of_generation: st == sys::EMBER_END_OF_GENERATION })
    }

    /// Streams up to `max_tokens` pieces, one decode step each. The last piece may be the
    /// end-of-generation token (`end_of_generation` set); after it, or after an error, the iterator
    /// ends. A `CancelHandle` stops it from another thread: the next step gives an `Err` with
    /// `Status::Cancelled` (a cancel between steps is kept for it) and the iterator ends.
    pub fn tokens<'s>(&'s mut self, sampler: &'s mut Sampler, max_tokens: usize) -> Tokens<'s, 'm> {
        self.arm_cancel();
        Tokens { session: self, sampler, left: max_tokens, done: false }
    }

    /// Generates up to `max_tokens` (0: until end of generation or a full context) in one call,
    /// calling `on_token` with each token and its text; returning false stops. Runs speculatively when
    /// speculation is attached (same tokens). A panic in `on_token` stops the generation and is
    /// resumed here.
    pub fn generate<F>(&mut self, sampler: &mut Sampler, max_tokens: u32, on_token: F) -> Result<Generated>
    where
        F: FnMut(Token, &str) -> bool,
    {
        self.generate_with(sampler, &GenerateOptions { max_tokens, ..Default::default() }, on_token)
    }

    /// `generate` with stop strings and a grammar for the call (see `GenerateOptions`). A stop string
    /// with a NUL inside is `InvalidArgument`.
    pub fn generate_with<F>(&mut self, sampler: &mut Sampler, options: &GenerateOptions, on_token: F) -> Result<Generated>
    where
        F: FnMut(Token, &str) -> bool,
    {
        let stop = CStrings::new(options.stop)?;
        let mut p = std::mem::MaybeUninit::<sys::ember_generate_params>::uninit();
        // SAFETY: init fills every field.
        let mut p = unsafe {
            sys::ember_generate_params_init(p.as_mut_ptr());
            p.assume_init()
        };
        let mut ctx = Stream { f: on_token, panic: None };
        p.max_tokens = options.max_tokens;
        (p.stop, p.n_stop) = stop.as_c();
        p.grammar = options.grammar.map_or(ptr::null(), Grammar::as_ptr);
        p.on_token = Some(token_trampoline::<F>);
        p.user_data = &mut ctx as *mut Stream<F> as *mut c_void;
        let mut count = 0usize;
        self.arm_cancel();
        // SAFETY: live session and sampler, params whose user_data, stop strings and grammar outlive
        // the call.
        let st = unsafe { sys::ember_generate(self.as_ptr(), sampler.as_ptr(), &p, &mut count) };
        if let Some(payload) = ctx.panic {
            resume_unwind(payload);
        }
        let finish = match check(st)? {
            sys::EMBER_END_OF_GENERATION => Finish::EndOfGeneration,
            sys::EMBER_STOPPED => Finish::Stopped,
            _ => Finish::MaxTokens,
        };
        Ok(Generated { count, finish })
    }
}

/// The iterator of `Session::tokens`.
pub struct Tokens<'s, 'm> {
    session: &'s mut Session<'m>,
    sampler: &'s mut Sampler,
    left: usize,
    done: bool,
}

impl Iterator for Tokens<'_, '_> {
    type Item = Result<Piece>;

    fn next(&mut self) -> Option<Result<Piece>> {
        if self.done || self.left == 0 {
            return None;
        }
        self.left -= 1;
        let r = self.session.step(self.sampler);
        self.done = match &r {
            Ok(p) => p.end_of_generation,
            Err(_) => true,
        };
        Some(r)
    }
}
