//! Models: loading, metadata and the tokenizer.
use crate::error::{check, Error, Result};
use crate::strings::{path_to_c, str_to_c, two_call};
use crate::Token;
use ember_sys as sys;
use std::any::Any;
use std::ffi::{c_void, CStr};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::path::Path;
use std::ptr::{self, NonNull};

/// A loaded model: weights, metadata and tokenizer. Freed on drop; every `Session` borrows it, so it
/// cannot be dropped while one lives (the header: free a model "after every session using it has been
/// freed").
pub struct Model {
    raw: NonNull<sys::ember_model>,
}

// SAFETY: ember.h, "Threads": "an ember_model is immutable after loading and may be shared by any
// number of sessions on any threads", and every model function says it is thread-safe. So a model may
// move to another thread (Send) and be used through `&Model` from many at once (Sync).
unsafe impl Send for Model {}
unsafe impl Sync for Model {}

/// Options of `Model::load_with`.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// Load only the metadata and tokenizer (no sessions can be created on such a model).
    pub vocab_only: bool,
    /// Load only the metadata and tensor table (`ember_model_load_metadata`): neither tokenizer nor
    /// weights, so any well-formed file loads and can be described whatever its architecture or
    /// tokenizer; it cannot tokenize (`Status::Unsupported`) or run. `vocab_only` is then ignored.
    pub metadata_only: bool,
}

/// `Model::info()`: a summary of the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelInfo {
    pub architecture: String,
    pub name: String,
    pub n_params: u64,
    pub size_bytes: u64,
    pub n_ctx_train: u32,
    pub n_vocab: u32,
    pub n_embd: u32,
    pub n_layer: u32,
    pub n_head: u32,
    pub n_head_kv: u32,
    pub kv_bytes_per_token: u64,
    /// Recurrent-state bytes one sequence carries whatever its length (hybrid models; 0 otherwise).
    pub state_bytes_per_sequence: u64,
    /// Layers that keep KV rows.
    pub n_kv_layers: u32,
    /// Layers that carry a recurrent state instead of KV rows.
    pub n_recurrent_layers: u32,
}

struct Progress<'a> {
    f: &'a mut dyn FnMut(f32) -> bool,
    panic: Option<Box<dyn Any + Send>>,
}

unsafe extern "C" fn progress_trampoline(progress: f32, user_data: *mut c_void) -> bool {
    // SAFETY: user_data is the &mut Progress that Model::load_with passed, alive for the whole load.
    let ctx = unsafe { &mut *(user_data as *mut Progress) };
    if ctx.panic.is_some() {
        return false;
    }
    // A panic must not unwind into C: catch it, cancel the load, and resume it once the C call returned.
    match catch_unwind(AssertUnwindSafe(|| (ctx.f)(progress))) {
        Ok(go_on) => go_on,
        Err(payload) => {
            ctx.panic = Some(payload);
            false
        }
    }
}

fn cstr_field(p: *const std::ffi::c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: strings the model owns, NUL-terminated, alive while the model is.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

impl Model {
    /// Loads a GGUF file with the default options.
    pub fn load(path: impl AsRef<Path>) -> Result<Model> {
        Model::load_with(path, &LoadOptions::default(), None)
    }

    /// Loads a GGUF file. `progress` (may be None) is called on this thread with values in [0, 1];
    /// returning false cancels the load (an `Error` with `Status::Cancelled`). A panic inside it
    /// cancels the load and is resumed here after the library has cleaned up.
    pub fn load_with(
        path: impl AsRef<Path>,
        options: &LoadOptions,
        progress: Option<&mut dyn FnMut(f32) -> bool>,
    ) -> Result<Model> {
        let c_path = path_to_c(path.as_ref())?;
        let mut params = std::mem::MaybeUninit::<sys::ember_model_params>::uninit();
        // SAFETY: init fills every field of the struct.
        let mut params = unsafe {
            sys::ember_model_params_init(params.as_mut_ptr());
            params.assume_init()
        };
        params.vocab_only = options.vocab_only;
        let mut ctx = progress.map(|f| Progress { f, panic: None });
        if let Some(ctx) = ctx.as_mut() {
            params.progress = Some(progress_trampoline);
            params.progress_user_data = ctx as *mut Progress as *mut c_void;
        }
        let mut raw = ptr::null_mut();
        // SAFETY: valid C string, initialised params, out pointer; ctx outlives the call.
        let st = unsafe {
            if options.metadata_only {
                sys::ember_model_load_metadata(c_path.as_ptr(), &params, &mut raw)
            } else {
                sys::ember_model_load(c_path.as_ptr(), &params, &mut raw)
            }
        };
        let result = check(st);
        if let Some(payload) = ctx.and_then(|c| c.panic) {
            if !raw.is_null() {
                // SAFETY: a model we own and nobody else has seen.
                unsafe { sys::ember_model_free(raw) };
            }
            resume_unwind(payload);
        }
        result?;
        NonNull::new(raw)
            .map(|raw| Model { raw })
            .ok_or_else(|| Error { status: crate::Status::Internal, message: "ember_model_load gave no model".into() })
    }

    /// The raw handle, for calls into `ember-sys` this crate does not wrap. It stays owned by `self`.
    pub fn as_ptr(&self) -> *const sys::ember_model {
        self.raw.as_ptr()
    }

    pub fn info(&self) -> Result<ModelInfo> {
        let mut info = std::mem::MaybeUninit::<sys::ember_model_info>::uninit();
        // SAFETY: init fills the struct; get_info writes into it.
        let info = unsafe {
            sys::ember_model_info_init(info.as_mut_ptr());
            check(sys::ember_model_get_info(self.as_ptr(), info.as_mut_ptr()))?;
            info.assume_init()
        };
        Ok(ModelInfo {
            architecture: cstr_field(info.architecture),
            name: cstr_field(info.name),
            n_params: info.n_params,
            size_bytes: info.size_bytes,
            n_ctx_train: info.n_ctx_train,
            n_vocab: info.n_vocab,
            n_embd: info.n_embd,
            n_layer: info.n_layer,
            n_head: info.n_head,
            n_head_kv: info.n_head_kv,
            kv_bytes_per_token: info.kv_bytes_per_token,
            state_bytes_per_sequence: info.state_bytes_per_sequence,
            n_kv_layers: info.n_kv_layers,
            n_recurrent_layers: info.n_recurrent_layers,
        })
    }

    /// A metadata value rendered as text (`NotFound` if the key is absent).
    pub fn meta_string(&self, key: &str) -> Result<String> {
        let key = str_to_c(key, "metadata key")?;
        let bytes = two_call::<u8>(1, |buf, cap, len| unsafe {
            // SAFETY: buf has cap bytes (or is NULL with cap 0).
            sys::ember_model_meta_string(self.as_ptr(), key.as_ptr(), buf as *mut _, cap, len)
        })?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Tokenizes `text`. `add_special`: BOS/EOS where the model asks for them. `parse_special`: text
    /// such as "<s>" becomes that control token (leave it false for untrusted input).
    pub fn tokenize(&self, text: &str, add_special: bool, parse_special: bool) -> Result<Vec<Token>> {
        let mut flags = 0;
        if add_special {
            flags |= sys::EMBER_TOKENIZE_ADD_SPECIAL;
        }
        if parse_special {
            flags |= sys::EMBER_TOKENIZE_PARSE_SPECIAL;
        }
        two_call::<Token>(0, |buf, cap, count| unsafe {
            // SAFETY: text is text.len() bytes (no NUL needed); buf has cap tokens or is NULL.
            sys::ember_tokenize(self.as_ptr(), text.as_ptr() as *const _, text.len(), flags, buf, cap, count)
        })
    }

    /// The text of a token sequence (control tokens rendered when `render_special`).
    pub fn detokenize(&self, tokens: &[Token], render_special: bool) -> Result<String> {
        let flags = if render_special { sys::EMBER_DETOKENIZE_RENDER_SPECIAL } else { 0 };
        let bytes = two_call::<u8>(1, |buf, cap, len| unsafe {
            // SAFETY: tokens slice and buffer of cap bytes.
            sys::ember_detokenize(self.as_ptr(), tokens.as_ptr(), tokens.len(), flags, buf as *mut _, cap, len)
        })?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The bytes one token stands for: possibly part of a UTF-8 character, so bytes, not a String.
    pub fn token_to_piece(&self, token: Token, render_special: bool) -> Result<Vec<u8>> {
        let flags = if render_special { sys::EMBER_DETOKENIZE_RENDER_SPECIAL } else { 0 };
        two_call::<u8>(0, |buf, cap, len| unsafe {
            // SAFETY: buffer of cap bytes or NULL.
            sys::ember_token_to_piece(self.as_ptr(), token, flags, buf as *mut _, cap, len)
        })
    }

    /// The beginning-of-sequence token, if the model has one.
    pub fn bos(&self) -> Option<Token> {
        // SAFETY: a live model.
        let t = unsafe { sys::ember_token_bos(self.as_ptr()) };
        (t >= 0).then_some(t)
    }

    /// The end-of-sequence token, if the model has one.
    pub fn eos(&self) -> Option<Token> {
        // SAFETY: a live model.
        let t = unsafe { sys::ember_token_eos(self.as_ptr()) };
        (t >= 0).then_some(t)
    }

    /// True when `token` ends generation (EOS, EOT, ...).
    pub fn is_eog(&self, token: Token) -> bool {
        // SAFETY: a live model.
        unsafe { sys::ember_token_is_eog(self.as_ptr(), token) }
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        // SAFETY: we own the model; sessions borrow it, so none is alive now.
        unsafe { sys::ember_model_free(self.raw.as_ptr()) }
    }
}
