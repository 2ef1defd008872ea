//! Structured output besides the grammar itself (`Grammar`, in sampler.rs): stop strings for
//! `Session::generate_next`, and log-probabilities. Stop strings and grammars for `generate_with` and
//! engine requests are in their options (`GenerateOptions`, `RequestOptions`).
use crate::error::{check, Result};
use crate::generate::text_of;
use crate::strings::str_to_c;
use crate::{Request, Sampler, Session, Token};
use ember_sys as sys;
use std::ffi::{c_char, CString};
use std::ptr;

/// Stop strings as C wants them: NUL-terminated copies and an array of pointers to them, alive as
/// long as this value. A string with a NUL byte inside is an error (C would cut it short).
pub(crate) struct CStrings {
    _owned: Vec<CString>,
    ptrs: Vec<*const c_char>,
}

impl CStrings {
    pub(crate) fn new(strings: &[&str]) -> Result<CStrings> {
        let owned = strings.iter().map(|s| str_to_c(s, "stop string")).collect::<Result<Vec<_>>>()?;
        let ptrs = owned.iter().map(|c| c.as_ptr()).collect();
        Ok(CStrings { _owned: owned, ptrs })
    }

    /// The array for C (NULL when empty) and its length.
    pub(crate) fn as_c(&self) -> (*const *const c_char, usize) {
        if self.ptrs.is_empty() {
            (ptr::null(), 0)
        } else {
            (self.ptrs.as_ptr(), self.ptrs.len())
        }
    }
}

/// A token and its log-probability (natural log) under the model's distribution: a log-softmax of
/// the raw logits, before penalties and grammar (as OpenAI's `logprobs`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokenLogprob {
    pub token: Token,
    pub logprob: f32,
}

/// What one sample recorded: the sampled token's log-probability and the `n_logprobs` most probable
/// tokens', best first.
#[derive(Clone, Debug, PartialEq)]
pub struct Logprobs {
    pub sampled: TokenLogprob,
    pub top: Vec<TokenLogprob>,
}

/// The most top tokens a sampler records (`SamplerParams::n_logprobs`).
const MAX_LOGPROBS: usize = 20;

fn logprobs_out(
    call: impl FnOnce(*mut sys::ember_token_logprob, *mut sys::ember_token_logprob, *mut usize) -> sys::ember_status,
) -> Result<Logprobs> {
    let empty = sys::ember_token_logprob { token: 0, logprob: 0.0 };
    let mut sampled = empty;
    let mut top = vec![empty; MAX_LOGPROBS];
    let mut n = 0usize;
    check(call(&mut sampled, top.as_mut_ptr(), &mut n))?;
    top.truncate(n.min(MAX_LOGPROBS));
    let conv = |t: &sys::ember_token_logprob| TokenLogprob { token: t.token, logprob: t.logprob };
    Ok(Logprobs { sampled: conv(&sampled), top: top.iter().map(conv).collect() })
}

impl Sampler {
    /// The log-probabilities recorded by the last sample (`sample`, `generate_next`, a `generate` step)
    /// of a sampler made with `n_logprobs > 0`. `InvalidState` when it records none (`n_logprobs` 0, or
    /// nothing sampled yet).
    pub fn logprobs(&mut self) -> Result<Logprobs> {
        let raw = self.as_ptr();
        // SAFETY: live sampler; buffers of MAX_LOGPROBS entries and out pointers.
        logprobs_out(|s, t, n| unsafe { sys::ember_sampler_logprobs(raw, s, t, MAX_LOGPROBS, n) })
    }
}

impl Request {
    /// The log-probabilities of the request's `i`-th generated token (0-based, in the order `poll`
    /// returns tokens) when its sampling params set `n_logprobs`. `NotFound` while token `i` is not
    /// generated; `InvalidState` when `n_logprobs` was 0.
    pub fn logprobs(&self, i: usize) -> Result<Logprobs> {
        let raw = self.as_ptr();
        // SAFETY: live request; buffers of MAX_LOGPROBS entries and out pointers.
        logprobs_out(|s, t, n| unsafe { sys::ember_request_logprobs(raw, i, s, t, MAX_LOGPROBS, n) })
    }
}

impl Session<'_> {
    /// Stop strings for `generate_next` and `tokens` (up to 16 of up to 1024 bytes; empty: none). Once
    /// the generated text contains one, that step returns a piece with `end_of_generation` set and the
    /// text before it (its token was fed); a step whose text could begin a stop string holds it back
    /// (its `text` may be empty) until a later step decides. The match starts anew after an end, after
    /// this call, and when the session was fed, truncated or restored between two steps. `generate`
    /// takes its own (`GenerateOptions::stop`). `InvalidArgument` for too many or too long strings, or a
    /// NUL inside one (nothing changes).
    pub fn set_stop(&mut self, stop: &[&str]) -> Result<()> {
        let c = CStrings::new(stop)?;
        let (p, n) = c.as_c();
        // SAFETY: live session; the strings are copied during the call.
        check(unsafe { sys::ember_session_set_stop(self.as_ptr(), p, n) }).map(|_| ())
    }

    /// The text `generate_next` holds back as a possible start of a stop string, for a caller that
    /// ends generation itself (its own token limit); the match starts anew.
    pub fn flush_stop(&mut self) -> Result<String> {
        let mut text = ptr::null();
        let mut len = 0usize;
        // SAFETY: live session, out pointers; the text is copied before the next call.
        check(unsafe { sys::ember_session_flush_stop(self.as_ptr(), &mut text, &mut len) })?;
        Ok(text_of(text, len))
    }
}
