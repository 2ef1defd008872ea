//! Embedding requests on an engine (`ember_engine_submit_embed`, EMBER_1.11): texts batched with the
//! running generations in the engine's forward passes (docs/embeddings.md).
use crate::engine::{Engine, Request};
use crate::error::{check, Result};
use crate::strings::{str_to_c, two_call};
use ember_sys as sys;
use std::ffi::{c_char, CStr};
use std::ptr;

/// How a text's rows become one vector (`ember_pooling`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pooling {
    /// An embedding model's own (its pooling type); a generating model has none.
    #[default]
    Model,
    Mean,
    Cls,
    Last,
}

/// What `Engine::submit_embed` takes besides the texts. `Default`: the model's own pooling, normalised
/// vectors of the model's width, texts over the engine's longest refused.
#[derive(Clone, Copy, Debug)]
pub struct EmbedOptions {
    /// On a generating model `Mean` or `Last` (over its final normed hidden states).
    pub pooling: Pooling,
    pub normalize: bool,
    /// Matryoshka truncation (0: every value).
    pub dimensions: u32,
    /// Cut texts over `max_tokens` instead of refusing them.
    pub truncate: bool,
    /// The longest text in tokens (0: the most the engine's pass holds for a text).
    pub max_tokens: u32,
}

impl Default for EmbedOptions {
    fn default() -> Self {
        EmbedOptions { pooling: Pooling::Model, normalize: true, dimensions: 0, truncate: false, max_tokens: 0 }
    }
}

impl Engine<'_> {
    /// Queues an embedding request for `texts` (each tokenized with the model's special tokens); read
    /// its vectors with `Request::embeddings` once it is done.
    pub fn submit_embed(&self, texts: &[&str], options: &EmbedOptions) -> Result<Request> {
        self.submit_texts(texts, None, options)
    }

    /// Queues a scoring request on an engine over a reranking model (`ember_engine_submit_embed` with a
    /// query): each document is scored as the pair (query, document) that `ember_rerank` forms;
    /// `Request::embeddings` gives one `vec![score]` per document once it is done. Any other model
    /// refuses it (`Status::InvalidArgument`); leave `pooling` and `dimensions` at their defaults.
    pub fn submit_rerank(&self, query: &str, docs: &[&str], options: &EmbedOptions) -> Result<Request> {
        let query = str_to_c(query, "query")?;
        self.submit_texts(docs, Some(&query), options)
    }

    fn submit_texts(&self, texts: &[&str], query: Option<&CStr>, options: &EmbedOptions) -> Result<Request> {
        let ptrs: Vec<*const c_char> = texts.iter().map(|t| t.as_ptr() as *const c_char).collect();
        let lengths: Vec<usize> = texts.iter().map(|t| t.len()).collect();
        let mut p = std::mem::MaybeUninit::<sys::ember_embed_request_params>::uninit();
        // SAFETY: init fills every field.
        let mut p = unsafe {
            sys::ember_embed_request_params_init(p.as_mut_ptr());
            p.assume_init()
        };
        p.texts = if texts.is_empty() { ptr::null() } else { ptrs.as_ptr() };
        p.lengths = lengths.as_ptr();
        p.n_texts = texts.len();
        p.pooling = match options.pooling {
            Pooling::Model => sys::EMBER_POOLING_MODEL,
            Pooling::Mean => sys::EMBER_POOLING_MEAN,
            Pooling::Cls => sys::EMBER_POOLING_CLS,
            Pooling::Last => sys::EMBER_POOLING_LAST,
        };
        p.normalize = options.normalize;
        p.dimensions = options.dimensions;
        p.truncate = options.truncate;
        p.max_tokens = options.max_tokens;
        p.query = query.map_or(ptr::null(), |q| q.as_ptr());
        let mut raw = ptr::null_mut();
        // SAFETY: the texts (with their lengths) and the query are valid for the call, which copies them.
        check(unsafe { sys::ember_engine_submit_embed(self.as_ptr(), &p, &mut raw) })?;
        Ok(Request::from_raw(raw))
    }
}

impl Request {
    /// Floats per vector of an embedding request (0 for a generation request).
    pub fn embedding_dim(&self) -> usize {
        // SAFETY: live request.
        unsafe { sys::ember_request_embedding_dim(self.as_ptr()) }
    }

    /// An embedding request's vectors, one per text, once it is done (`Status::InvalidState` before,
    /// or when it was cancelled or failed).
    pub fn embeddings(&self) -> Result<Vec<Vec<f32>>> {
        let flat = two_call::<f32>(0, |buf, cap, len| unsafe {
            // SAFETY: buffer of cap floats or NULL.
            sys::ember_request_embeddings(self.as_ptr(), buf, cap, len)
        })?;
        let dim = self.embedding_dim().max(1);
        Ok(flat.chunks(dim).map(|c| c.to_vec()).collect())
    }
}
