//! Samplers: logits to a token (penalties, greedy or top-k/top-p/min-p/temperature; see ember.h).
use crate::error::{check, Result};
use crate::Token;
use ember_sys as sys;
use std::ptr::{self, NonNull};

/// Parameters of `Sampler::new`. `Default` is the library's (`ember_sampler_params_init`):
/// temperature 1, top_k 0 (off), top_p 1 (off), min_p 0 (off), repeat_penalty 1 (off), frequency and
/// presence penalties 0, penalty_last_n 64, seed 0, n_logprobs 0.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplerParams {
    /// <= 0 means greedy.
    pub temperature: f32,
    pub top_k: i32,
    pub top_p: f32,
    pub min_p: f32,
    pub repeat_penalty: f32,
    pub frequency_penalty: f32,
    pub presence_penalty: f32,
    pub penalty_last_n: i32,
    pub seed: u64,
    /// 0 (off) to 20: every sample records the sampled token's log-probability and the `n_logprobs`
    /// most probable tokens' (`Sampler::logprobs`, `Request::logprobs`).
    pub n_logprobs: i32,
}

fn c_sampler_params_default() -> sys::ember_sampler_params {
    let mut p = std::mem::MaybeUninit::<sys::ember_sampler_params>::uninit();
    // SAFETY: init fills every field.
    unsafe {
        sys::ember_sampler_params_init(p.as_mut_ptr());
        p.assume_init()
    }
}

impl Default for SamplerParams {
    fn default() -> Self {
        let p = c_sampler_params_default();
        SamplerParams {
            temperature: p.temperature,
            top_k: p.top_k,
            top_p: p.top_p,
            min_p: p.min_p,
            repeat_penalty: p.repeat_penalty,
            frequency_penalty: p.frequency_penalty,
            presence_penalty: p.presence_penalty,
            penalty_last_n: p.penalty_last_n,
            seed: p.seed,
            n_logprobs: p.n_logprobs,
        }
    }
}

impl SamplerParams {
    /// The defaults with temperature 0: the highest logit wins.
    pub fn greedy() -> Self {
        SamplerParams { temperature: 0.0, ..Default::default() }
    }

    pub(crate) fn to_c(&self) -> sys::ember_sampler_params {
        let mut p = c_sampler_params_default();
        p.temperature = self.temperature;
        p.top_k = self.top_k;
        p.top_p = self.top_p;
        p.min_p = self.min_p;
        p.repeat_penalty = self.repeat_penalty;
        p.frequency_penalty = self.frequency_penalty;
        p.presence_penalty = self.presence_penalty;
        p.penalty_last_n = self.penalty_last_n;
        p.seed = self.seed;
        p.n_logprobs = self.n_logprobs;
        p
    }
}

/// A sampler with its own penalty history and random generator. Freed on drop.
pub struct Sampler {
    raw: NonNull<sys::ember_sampler>,
}

// SAFETY: ember.h, "Threads": "An ember_session or ember_sampler must be used by one thread at a time".
// A sampler holds no reference to anything else, so it may move between threads (Send); all its
// methods take &mut self and it is not Sync, so two threads never use it at once.
unsafe impl Send for Sampler {}

impl Sampler {
    /// `InvalidArgument` for out-of-range values (negative top_k, top_p outside (0, 1], ...).
    pub fn new(params: &SamplerParams) -> Result<Sampler> {
        let p = params.to_c();
        let mut raw = ptr::null_mut();
        // SAFETY: initialised params, out pointer.
        check(unsafe { sys::ember_sampler_create(&p, &mut raw) })?;
        Ok(Sampler { raw: NonNull::new(raw).expect("ember returned OK with a NULL sampler") })
    }

    /// A greedy sampler (`SamplerParams::greedy()`).
    pub fn greedy() -> Result<Sampler> {
        Sampler::new(&SamplerParams::greedy())
    }

    pub fn as_ptr(&mut self) -> *mut sys::ember_sampler {
        self.raw.as_ptr()
    }

    /// Samples a token from `logits` without recording it (call `accept` for the token used).
    pub fn sample(&mut self, logits: &[f32]) -> Result<Token> {
        let mut t = 0;
        // SAFETY: logits slice, out pointer.
        check(unsafe { sys::ember_sampler_sample(self.as_ptr(), logits.as_ptr(), logits.len(), &mut t) })?;
        Ok(t)
    }

    /// Records a token in the penalty history.
    pub fn accept(&mut self, token: Token) -> Result<()> {
        // SAFETY: live sampler.
        check(unsafe { sys::ember_sampler_accept(self.as_ptr(), token) }).map(|_| ())
    }

    /// Constrains sampling by `grammar` from its beginning (`None` removes it). The sampler keeps its
    /// own reference, so the grammar may be dropped after. Sampling then fails with
    /// `Status::GrammarDeadEnd` where no token can continue an incomplete text.
    pub fn set_grammar(&mut self, grammar: Option<&Grammar>) -> Result<()> {
        let g = grammar.map_or(ptr::null(), Grammar::as_ptr);
        // SAFETY: live sampler; a live grammar or NULL.
        check(unsafe { sys::ember_sampler_set_grammar(self.as_ptr(), g) }).map(|_| ())
    }

    /// Clears the history and re-seeds the random generator (an attached grammar starts over).
    pub fn reset(&mut self) -> Result<()> {
        // SAFETY: live sampler.
        check(unsafe { sys::ember_sampler_reset(self.as_ptr()) }).map(|_| ())
    }
}

/// A grammar that constrains sampling to the text it allows (`ember_grammar`): GBNF (llama.cpp's
/// syntax) or a JSON Schema, for one model's vocabulary. It keeps what it needs of the vocabulary, so it
/// does not borrow the model; it is immutable and may be shared between threads and samplers.
pub struct Grammar {
    raw: NonNull<sys::ember_grammar>,
}

// SAFETY: ember.h, "Grammars": a grammar may be shared by any number of samplers and requests on any
// threads (its caches are locked inside).
unsafe impl Send for Grammar {}
unsafe impl Sync for Grammar {}

impl Grammar {
    /// `InvalidArgument` for malformed GBNF (the message gives line and column).
    pub fn from_gbnf(model: &crate::Model, gbnf: &str) -> Result<Grammar> {
        let mut raw = ptr::null_mut();
        // SAFETY: live model, bytes with their length, out pointer.
        check(unsafe { sys::ember_grammar_create_gbnf(model.as_ptr(), gbnf.as_ptr().cast(), gbnf.len(), &mut raw) })?;
        Ok(Grammar { raw: NonNull::new(raw).expect("ember returned OK with a NULL grammar") })
    }

    /// `InvalidArgument` for malformed JSON or schema, `Unsupported` for a keyword outside the subset
    /// (the message names it with its JSON pointer).
    pub fn from_json_schema(model: &crate::Model, schema: &str) -> Result<Grammar> {
        let mut raw = ptr::null_mut();
        // SAFETY: as above.
        check(unsafe {
            sys::ember_grammar_create_json_schema(model.as_ptr(), schema.as_ptr().cast(), schema.len(), &mut raw)
        })?;
        Ok(Grammar { raw: NonNull::new(raw).expect("ember returned OK with a NULL grammar") })
    }
}

impl std::fmt::Debug for Grammar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grammar").finish_non_exhaustive()
    }
}

impl Grammar {
    pub(crate) fn as_ptr(&self) -> *const sys::ember_grammar {
        self.raw.as_ptr()
    }
}

impl Drop for Grammar {
    fn drop(&mut self) {
        // SAFETY: we own our reference.
        unsafe { sys::ember_grammar_free(self.raw.as_ptr()) }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        // SAFETY: we own the sampler.
        unsafe { sys::ember_sampler_free(self.raw.as_ptr()) }
    }
}
