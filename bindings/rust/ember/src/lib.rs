//! The safe Rust API of libember, an embeddable LLM inference runtime.
//!
//! ```no_run
//! use ember::{Model, Sampler, Session, SessionParams};
//! let model = Model::load("models/stories15M-q8_0.gguf")?;
//! let mut session = Session::new(&model, &SessionParams::default())?;
//! session.feed(&model.tokenize("Once upon a time", true, false)?)?;
//! let mut sampler = Sampler::greedy()?;
//! for piece in session.tokens(&mut sampler, 32) {
//!     print!("{}", piece?.text);
//! }
//! # Ok::<(), ember::Error>(())
//! ```
//!
//! Ownership and threads follow `ember.h` (each `unsafe impl Send/Sync` cites its rule): a [`Model`]
//! is `Send + Sync` and may be shared (e.g. in an `Arc`) by sessions on many threads; a [`Session`]
//! and a [`Sampler`] are `Send` but not `Sync` (one thread at a time). A session borrows its model,
//! so the model cannot be dropped first:
//!
//! ```compile_fail
//! let model = ember::Model::load("m.gguf").unwrap();
//! let session = ember::Session::new(&model, &Default::default()).unwrap();
//! drop(model); // error: `model` is still borrowed by `session`
//! drop(session);
//! ```
//!
//! and a session cannot be shared between threads:
//!
//! ```compile_fail
//! fn shared<T: Sync>() {}
//! shared::<ember::Session<'static>>(); // error: Session is not Sync
//! ```
//!
//! ```compile_fail
//! fn shared<T: Sync>() {}
//! shared::<ember::Sampler>(); // error: Sampler is not Sync
//! ```
//!
//! Every fallible call returns [`Result`]; an [`Error`] carries the [`Status`] and the message that
//! `ember_last_error()` gave right after the failing call, on the same thread. No panic crosses into C:
//! closures passed to the library run under `catch_unwind`, and a caught panic resumes after the C call.

mod chat;
mod embed;
mod engine;
mod error;
mod generate;
mod model;
mod sampler;
mod session;
mod strings;
mod structured;

pub use chat::ChatMessage;
pub use embed::{EmbedOptions, Pooling};
pub use ember_sys as sys;
pub use engine::{Engine, EngineParams, Request, RequestOptions, RequestState, RequestStats, Speculation};
pub use error::{Error, Result, Status};
pub use generate::{Finish, GenerateOptions, Generated, Piece, Tokens};
pub use model::{LoadOptions, Model, ModelInfo};
pub use sampler::{Grammar, Sampler, SamplerParams};
pub use session::{default_thread_count, Backend, CancelHandle, KvType, Precision, Session, SessionParams};
pub use structured::{Logprobs, TokenLogprob};

/// A token id.
pub type Token = sys::ember_token;

/// The release string of the loaded library, e.g. "0.4.0".
pub fn version() -> &'static str {
    // SAFETY: static storage, never NULL.
    unsafe { std::ffi::CStr::from_ptr(sys::ember_version()) }.to_str().unwrap_or("")
}

/// The ABI generation of the loaded library; this crate was written for `sys::EMBER_ABI_VERSION`.
pub fn abi_version() -> u32 {
    // SAFETY: no arguments.
    unsafe { sys::ember_abi_version() }
}
