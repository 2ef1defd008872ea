//! Raw declarations of libember's C ABI, one for one with `include/ember/ember.h`.
//!
//! The header is the documentation: every function's ownership, threading and error rules are written
//! there and apply unchanged. Nothing here is safe to call without reading them; the `ember` crate is
//! the safe API.
//!
//! Choices that differ from a literal transcription, and why:
//! - C enums are integer type aliases with one `const` per value, not Rust enums: a library newer than
//!   this crate may return a value this crate does not know, and a Rust enum holding an undeclared
//!   value is undefined behaviour.
//! - Callback types are `Option<unsafe extern "C" fn ...>`, so that NULL (None) is representable.
//! - Opaque handles are zero-sized `#[repr(C)]` structs used only behind pointers.
//!
//! `tests/layout.rs` compares every declaration below with `bindings/layout/ember.layout` (the table
//! the C compiler checked against the header), so this file cannot drift from the library unnoticed.
//! It reads this file's text, so keep one declaration per `pub` item in the forms used here.
#![allow(non_camel_case_types)]
#![no_std]

pub use core::ffi::{c_char, c_void};

// ---- Versions ----

pub const EMBER_VERSION_MAJOR: u32 = 0;
pub const EMBER_VERSION_MINOR: u32 = 4;
pub const EMBER_VERSION_PATCH: u32 = 0;
pub const EMBER_ABI_VERSION: u32 = 1;

// ---- Status and errors ----

pub type ember_status = i32;
pub const EMBER_OK: ember_status = 0;
pub const EMBER_END_OF_GENERATION: ember_status = 1;
pub const EMBER_STOPPED: ember_status = 2;
pub const EMBER_ERR_INVALID_ARGUMENT: ember_status = -1;
pub const EMBER_ERR_OUT_OF_MEMORY: ember_status = -2;
pub const EMBER_ERR_IO: ember_status = -3;
pub const EMBER_ERR_INVALID_MODEL: ember_status = -4;
pub const EMBER_ERR_UNSUPPORTED: ember_status = -5;
pub const EMBER_ERR_CANCELLED: ember_status = -6;
pub const EMBER_ERR_CONTEXT_FULL: ember_status = -7;
pub const EMBER_ERR_BUFFER_TOO_SMALL: ember_status = -8;
pub const EMBER_ERR_NOT_FOUND: ember_status = -9;
pub const EMBER_ERR_TYPE_MISMATCH: ember_status = -10;
pub const EMBER_ERR_BACKEND: ember_status = -11;
pub const EMBER_ERR_INVALID_STATE: ember_status = -12;
pub const EMBER_ERR_CORRUPT_DATA: ember_status = -13;
pub const EMBER_ERR_GRAMMAR_DEAD_END: ember_status = -14;
pub const EMBER_ERR_INTERNAL: ember_status = -100;

// ---- Logging ----

pub type ember_log_level = i32;
pub const EMBER_LOG_DEBUG: ember_log_level = 0;
pub const EMBER_LOG_INFO: ember_log_level = 1;
pub const EMBER_LOG_WARN: ember_log_level = 2;
pub const EMBER_LOG_ERROR: ember_log_level = 3;

pub type ember_log_fn =
    Option<unsafe extern "C" fn(level: ember_log_level, message: *const c_char, user_data: *mut c_void)>;

// ---- Models ----

#[repr(C)]
pub struct ember_model {
    _opaque: [u8; 0],
}

/// A device of any backend (ember_devices); owned by the library for the process's life.
#[repr(C)]
pub struct ember_device {
    _opaque: [u8; 0],
}

pub type ember_token = i32;

pub type ember_progress_fn = Option<unsafe extern "C" fn(progress: f32, user_data: *mut c_void) -> bool>;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_model_params {
    pub struct_size: u32,
    pub progress: ember_progress_fn,
    pub progress_user_data: *mut c_void,
    pub vocab_only: bool,
    pub log: ember_log_fn,
    pub log_user_data: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_model_info {
    pub struct_size: u32,
    pub architecture: *const c_char,
    pub name: *const c_char,
    pub n_params: u64,
    pub size_bytes: u64,
    pub n_ctx_train: u32,
    pub n_vocab: u32,
    pub n_embd: u32,
    pub n_layer: u32,
    pub n_head: u32,
    pub n_head_kv: u32,
    pub kv_bytes_per_token: u64,
    pub state_bytes_per_sequence: u64,
    pub n_kv_layers: u32,
    pub n_recurrent_layers: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_tensor_info {
    pub struct_size: u32,
    pub name: *const c_char,
    pub type_: *const c_char,
    pub n_dims: u32,
    pub dims: [i64; 4],
    pub n_bytes: u64,
}

// ---- Tokenizer ----

pub const EMBER_TOKENIZE_ADD_SPECIAL: u32 = 1;
pub const EMBER_TOKENIZE_PARSE_SPECIAL: u32 = 2;
pub const EMBER_DETOKENIZE_RENDER_SPECIAL: u32 = 1;
pub const EMBER_DETOKENIZE_KEEP_LEADING_SPACE: u32 = 2;
pub const EMBER_CPU_BUDGET_FIXED_THREADS: u32 = 1 << 0;
/// ember_session_params.gpu_layers / ember_engine_params.gpu_layers (EMBER_1.9).
pub const EMBER_GPU_LAYERS_ALL: i32 = -1;
pub const EMBER_GPU_LAYERS_AUTO: i32 = -2;
/// Recurrent states a session keeps besides its two (a speculative verifying pass's; EMBER_1.10).
pub const EMBER_SESSION_KEPT_STATES: u32 = 4;

// ---- Sessions ----

#[repr(C)]
pub struct ember_session {
    _opaque: [u8; 0],
}

pub type ember_backend_kind = i32;
pub const EMBER_BACKEND_AUTO: ember_backend_kind = 0;
pub const EMBER_BACKEND_CPU: ember_backend_kind = 1;
pub const EMBER_BACKEND_CUDA: ember_backend_kind = 2;
pub const EMBER_BACKEND_VULKAN: ember_backend_kind = 3;

pub type ember_kv_type = i32;
pub const EMBER_KV_F16: ember_kv_type = 0;
pub const EMBER_KV_Q8_0: ember_kv_type = 1;
pub const EMBER_KV_Q4_0: ember_kv_type = 2; // EMBER_1.10

/// How a session's products with quantized weights round the activations (`ember_session_set_precision`).
pub type ember_precision = i32;
pub const EMBER_PRECISION_DEFAULT: ember_precision = 0;
pub const EMBER_PRECISION_HIGH: ember_precision = 1;

pub type ember_cpu_priority = i32;
pub const EMBER_CPU_PRIORITY_NORMAL: ember_cpu_priority = 0;
pub const EMBER_CPU_PRIORITY_LOW: ember_cpu_priority = 1;
pub const EMBER_CPU_PRIORITY_HIGH: ember_cpu_priority = 2;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_session_params {
    pub struct_size: u32,
    pub n_ctx: u32,
    pub n_threads: u32,
    pub n_batch: u32,
    pub seed: u64,
    pub backend: ember_backend_kind,
    pub reserved: u32,
    pub n_seq_max: u32,
    pub kv_type: ember_kv_type,
    pub device: *const ember_device,
    // EMBER_1.9: placement across devices.
    pub gpu_layers: i32,
    pub experts_on_cpu: i32,
    pub gpu_budget_bytes: u64,
}

// ---- Samplers ----

#[repr(C)]
pub struct ember_sampler {
    _opaque: [u8; 0],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_sampler_params {
    pub struct_size: u32,
    pub temperature: f32,
    pub top_k: i32,
    pub top_p: f32,
    pub min_p: f32,
    pub repeat_penalty: f32,
    pub frequency_penalty: f32,
    pub presence_penalty: f32,
    pub penalty_last_n: i32,
    pub seed: u64,
    /// EMBER_1.4
    pub n_logprobs: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct ember_token_logprob {
    pub token: ember_token,
    pub logprob: f32,
}

// ---- Grammars (EMBER_1.4) ----

#[repr(C)]
pub struct ember_grammar {
    _opaque: [u8; 0],
}

// ---- Generation ----

pub type ember_token_fn = Option<
    unsafe extern "C" fn(token: ember_token, text: *const c_char, text_len: usize, user_data: *mut c_void) -> bool,
>;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_generate_params {
    pub struct_size: u32,
    pub max_tokens: u32,
    pub on_token: ember_token_fn,
    pub user_data: *mut c_void,
    pub speculate: bool,
    /// EMBER_1.4 (padding in EMBER_1.2's struct; keep 0)
    pub reserved_1_4: [u8; 7],
    pub grammar: *const ember_grammar,
    pub stop: *const *const c_char,
    pub n_stop: usize,
}

// ---- Speculative decoding ----

pub type ember_spec_mode = i32;
pub const EMBER_SPEC_OFF: ember_spec_mode = 0;
pub const EMBER_SPEC_DRAFT: ember_spec_mode = 1;
pub const EMBER_SPEC_LOOKUP: ember_spec_mode = 2;
pub const EMBER_SPEC_MTP: ember_spec_mode = 3;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_spec_params {
    pub struct_size: u32,
    pub mode: ember_spec_mode,
    pub draft_model: *const ember_model,
    pub k: u32,
    pub adaptive: bool,
    pub k_max: u32,
    pub ngram_max: u32,
    pub n_threads: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_spec_stats {
    pub struct_size: u32,
    pub k: u32,
    pub drafted: u64,
    pub accepted: u64,
    pub target_passes: u64,
    pub generated: u64,
    pub acceptance_rate: f64,
    pub tokens_per_pass: f64,
}

// ---- Engine ----

#[repr(C)]
pub struct ember_engine {
    _opaque: [u8; 0],
}

#[repr(C)]
pub struct ember_request {
    _opaque: [u8; 0],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_engine_params {
    pub struct_size: u32,
    pub n_ctx: u32,
    pub n_seq_max: u32,
    pub kv_bytes: u64,
    pub n_threads: u32,
    pub n_batch: u32,
    pub backend: ember_backend_kind,
    pub manual_step: bool,
    pub kv_type: ember_kv_type,
    pub reserved: u32,
    pub device: *const ember_device,
    // EMBER_1.9: placement across devices.
    pub gpu_layers: i32,
    pub experts_on_cpu: i32,
    pub gpu_budget_bytes: u64,
    // EMBER_1.10: speculative decoding for the requests.
    pub speculation: ember_spec_mode,
    pub spec_k: u32,
    pub spec_ngram_max: u32,
    pub reserved_1_10: u32,
}

/// Where a session's or engine's model runs across devices (EMBER_1.9).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_placement {
    pub struct_size: u32,
    pub n_layer: u32,
    pub gpu_layers: u32,
    pub experts_on_cpu: u32,
    pub gpu_bytes: u64,
    pub cpu_bytes: u64,
    pub gpu_budget_bytes: u64,
    pub automatic: bool,
    pub description: [c_char; 512],
}

/// What switches a lazy grammar on (`ember_grammar_create_lazy`, EMBER_1.10).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_grammar_triggers {
    pub struct_size: u32,
    pub words: *const *const c_char,
    pub n_words: usize,
    pub tokens: *const ember_token,
    pub n_tokens: usize,
    pub once: bool,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_engine_stats {
    pub struct_size: u32,
    pub n_blocks: u32,
    pub n_blocks_used: u32,
    pub n_blocks_cached: u32,
    pub block_size: u32,
    pub n_running: u32,
    pub n_queued: u32,
    pub kv_bytes: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_memory_estimate {
    pub struct_size: u32,
    pub weights_bytes: u64,
    pub kv_bytes: u64,
    pub compute_bytes: u64,
    pub total_bytes: u64,
}

pub type ember_request_token_fn = Option<
    unsafe extern "C" fn(
        request: *mut ember_request,
        token: ember_token,
        text: *const c_char,
        text_len: usize,
        user_data: *mut c_void,
    ) -> bool,
>;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_request_params {
    pub struct_size: u32,
    pub prompt: *const ember_token,
    pub n_prompt: usize,
    pub max_tokens: u32,
    pub sampling: *const ember_sampler_params,
    pub on_token: ember_request_token_fn,
    pub user_data: *mut c_void,
    /// EMBER_1.4
    pub grammar: *const ember_grammar,
    pub stop: *const *const c_char,
    pub n_stop: usize,
    /// EMBER_1.10
    pub speculate: bool,
}

/// A request's counters (EMBER_1.10).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_request_stats {
    pub struct_size: u32,
    pub reserved: u32,
    pub n_tokens: u64,
    pub decode_steps: u64,
    pub drafted: u64,
    pub accepted: u64,
    pub acceptance_rate: f64,
}

pub type ember_request_state = i32;
pub const EMBER_REQUEST_QUEUED: ember_request_state = 0;
pub const EMBER_REQUEST_RUNNING: ember_request_state = 1;
pub const EMBER_REQUEST_DONE: ember_request_state = 2;
pub const EMBER_REQUEST_CANCELLED: ember_request_state = 3;
pub const EMBER_REQUEST_FAILED: ember_request_state = 4;

// ---- Backend devices ----

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_device_info {
    pub struct_size: u32,
    pub index: u32,
    pub name: [c_char; 128],
    pub type_: u32,
    pub score: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_vulkan_device_params {
    pub struct_size: u32,
    pub device_index: i32,
    pub instance: *mut c_void,
    pub physical_device: *mut c_void,
    pub device: *mut c_void,
    pub queue: *mut c_void,
    pub queue_family: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_cuda_device_params {
    pub struct_size: u32,
    pub device_index: i32,
    pub stream: *mut c_void,
}

// ---- CPU budget (EMBER_1.4) ----

/// The process-wide CPU budget (`ember_cpu_budget_set`): the most threads each session computes with,
/// an `ember_cpu_priority`, and `EMBER_CPU_BUDGET_*` flags.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_cpu_budget {
    pub struct_size: u32,
    pub max_threads: u32,
    pub priority: i32,
    pub flags: u32,
}

// ---- Chat templates (EMBER_1.3) ----

/// One message of a conversation, an element of the array `ember_chat_apply_template` reads (both
/// strings NUL-terminated UTF-8, owned by the caller for the call).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_chat_message {
    pub role: *const c_char,
    pub content: *const c_char,
}

// ---- Logit bias (EMBER_1.8) ----

/// A bias added to one token's logit (an array element of `ember_sampler_set_logit_bias`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_logit_bias {
    pub token: ember_token,
    pub bias: f32,
}

// ---- Tool calls and reasoning (EMBER_1.8) ----

/// The reasoning switch of `ember_chat_params` (`enable_thinking` for the template).
pub type ember_reasoning = i32;
pub const EMBER_REASONING_DEFAULT: ember_reasoning = 0;
pub const EMBER_REASONING_OFF: ember_reasoning = 1;
pub const EMBER_REASONING_ON: ember_reasoning = 2;

/// How a family writes calls and reasoning into its output.
pub type ember_chat_format = i32;
pub const EMBER_CHAT_FORMAT_AUTO: ember_chat_format = 0;
pub const EMBER_CHAT_FORMAT_CONTENT: ember_chat_format = 1;
pub const EMBER_CHAT_FORMAT_HERMES: ember_chat_format = 2;
pub const EMBER_CHAT_FORMAT_LLAMA3: ember_chat_format = 3;
pub const EMBER_CHAT_FORMAT_MISTRAL: ember_chat_format = 4;
pub const EMBER_CHAT_FORMAT_GPT_OSS: ember_chat_format = 5;
pub const EMBER_CHAT_FORMAT_GRANITE: ember_chat_format = 6;
pub const EMBER_CHAT_FORMAT_PHI4: ember_chat_format = 7;

/// OpenAI's tool_choice.
pub type ember_tool_choice = i32;
pub const EMBER_TOOL_CHOICE_AUTO: ember_tool_choice = 0;
pub const EMBER_TOOL_CHOICE_NONE: ember_tool_choice = 1;
pub const EMBER_TOOL_CHOICE_REQUIRED: ember_tool_choice = 2;
pub const EMBER_TOOL_CHOICE_NAMED: ember_tool_choice = 3;

/// A tool the model may call (an array element): name, description (may be NULL), JSON Schema of the
/// arguments (may be NULL).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_chat_tool {
    pub name: *const c_char,
    pub description: *const c_char,
    pub parameters: *const c_char,
}

/// One call: by a model (`ember_chat_parser_call`) or in an assistant message.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_chat_tool_call {
    pub id: *const c_char,
    pub name: *const c_char,
    pub arguments: *const c_char,
}

/// A message with tool calls, tool results and reasoning (an array element).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_chat_turn {
    pub role: *const c_char,
    pub content: *const c_char,
    pub reasoning_content: *const c_char,
    pub tool_calls: *const ember_chat_tool_call,
    pub n_tool_calls: usize,
    pub tool_call_id: *const c_char,
    pub name: *const c_char,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_chat_params {
    pub struct_size: u32,
    pub tmpl: *const c_char,
    pub messages: *const ember_chat_turn,
    pub n_messages: usize,
    pub tools: *const ember_chat_tool,
    pub n_tools: usize,
    pub add_generation_prompt: bool,
    pub reasoning: ember_reasoning,
    pub tools_json: *const c_char,
}

#[repr(C)]
pub struct ember_chat_parser {
    _opaque: [u8; 0],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_chat_parser_params {
    pub struct_size: u32,
    pub format: ember_chat_format,
    pub tmpl: *const c_char,
    pub reasoning_open: bool,
    pub tools: *const ember_chat_tool,
    pub n_tools: usize,
}

/// What a parser produced: content and reasoning (not NUL-terminated), a range of calls, the
/// malformed flag.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_chat_delta {
    pub struct_size: u32,
    pub content: *const c_char,
    pub content_len: usize,
    pub reasoning: *const c_char,
    pub reasoning_len: usize,
    pub first_call: usize,
    pub n_calls: usize,
    pub malformed: bool,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_tool_grammar_params {
    pub struct_size: u32,
    pub format: ember_chat_format,
    pub tmpl: *const c_char,
    pub tools: *const ember_chat_tool,
    pub n_tools: usize,
    pub choice: ember_tool_choice,
    pub name: *const c_char,
    pub parallel: bool,
    pub tools_json: *const c_char,
}

// ---- Embeddings and reranking (EMBER_1.9) ----

#[repr(C)]
pub struct ember_embedder {
    _opaque: [u8; 0],
}

pub type ember_pooling = i32;
pub const EMBER_POOLING_MODEL: ember_pooling = 0;
pub const EMBER_POOLING_MEAN: ember_pooling = 1;
pub const EMBER_POOLING_CLS: ember_pooling = 2;
pub const EMBER_POOLING_LAST: ember_pooling = 3;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_embed_params {
    pub struct_size: u32,
    pub backend: ember_backend_kind,
    pub n_threads: u32,
    pub n_batch: u32,
    pub max_tokens: u32,
    pub truncate: bool,
    pub normalize: bool,
    pub dimensions: u32,
    pub pooling: ember_pooling,
}

/// An embedding request on an engine (EMBER_1.11).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ember_embed_request_params {
    pub struct_size: u32,
    pub texts: *const *const c_char,
    pub lengths: *const usize,
    pub tokens: *const *const ember_token,
    pub n_tokens: *const usize,
    pub n_texts: usize,
    pub pooling: ember_pooling,
    pub dimensions: u32,
    pub normalize: bool,
    pub truncate: bool,
    pub max_tokens: u32,
    /// EMBER_1.11: a reranking model's query (NULL: embed the texts).
    pub query: *const c_char,
}

// ---- Functions, in the header's order ----

extern "C" {
    pub fn ember_version() -> *const c_char;
    pub fn ember_abi_version() -> u32;
    pub fn ember_status_string(status: ember_status) -> *const c_char;
    pub fn ember_last_error() -> *const c_char;
    pub fn ember_log_set(fn_: ember_log_fn, user_data: *mut c_void, min_level: ember_log_level);

    pub fn ember_model_params_init(params: *mut ember_model_params);
    pub fn ember_model_load(
        path: *const c_char,
        params: *const ember_model_params,
        out: *mut *mut ember_model,
    ) -> ember_status;
    pub fn ember_model_load_metadata(
        path: *const c_char,
        params: *const ember_model_params,
        out: *mut *mut ember_model,
    ) -> ember_status;
    pub fn ember_model_free(model: *mut ember_model);
    pub fn ember_model_info_init(info: *mut ember_model_info);
    pub fn ember_model_get_info(model: *const ember_model, info: *mut ember_model_info) -> ember_status;
    pub fn ember_model_meta_count(model: *const ember_model, out_count: *mut usize) -> ember_status;
    pub fn ember_model_meta_key(model: *const ember_model, i: usize, out_key: *mut *const c_char) -> ember_status;
    pub fn ember_model_meta_string(
        model: *const ember_model,
        key: *const c_char,
        buf: *mut c_char,
        capacity: usize,
        out_len: *mut usize,
    ) -> ember_status;
    pub fn ember_model_meta_int(model: *const ember_model, key: *const c_char, out: *mut i64) -> ember_status;
    pub fn ember_model_meta_float(model: *const ember_model, key: *const c_char, out: *mut f64) -> ember_status;
    pub fn ember_tensor_info_init(info: *mut ember_tensor_info);
    pub fn ember_model_tensor_count(model: *const ember_model, out_count: *mut usize) -> ember_status;
    pub fn ember_model_tensor_info(model: *const ember_model, i: usize, info: *mut ember_tensor_info) -> ember_status;

    pub fn ember_tokenize(
        model: *const ember_model,
        text: *const c_char,
        text_len: usize,
        flags: u32,
        tokens: *mut ember_token,
        capacity: usize,
        out_count: *mut usize,
    ) -> ember_status;
    pub fn ember_token_to_piece(
        model: *const ember_model,
        token: ember_token,
        flags: u32,
        buf: *mut c_char,
        capacity: usize,
        out_len: *mut usize,
    ) -> ember_status;
    pub fn ember_detokenize(
        model: *const ember_model,
        tokens: *const ember_token,
        n_tokens: usize,
        flags: u32,
        buf: *mut c_char,
        capacity: usize,
        out_len: *mut usize,
    ) -> ember_status;
    pub fn ember_token_bos(model: *const ember_model) -> ember_token;
    pub fn ember_token_eos(model: *const ember_model) -> ember_token;
    pub fn ember_token_is_eog(model: *const ember_model, token: ember_token) -> bool;

    pub fn ember_session_params_init(params: *mut ember_session_params);
    pub fn ember_session_create(
        model: *const ember_model,
        params: *const ember_session_params,
        out: *mut *mut ember_session,
    ) -> ember_status;
    pub fn ember_session_free(session: *mut ember_session);
    pub fn ember_session_fork(session: *mut ember_session, out: *mut *mut ember_session) -> ember_status;
    pub fn ember_session_feed(session: *mut ember_session, tokens: *const ember_token, n_tokens: usize) -> ember_status;
    pub fn ember_session_cancel(session: *mut ember_session);
    pub fn ember_session_cancel_arm(session: *mut ember_session);
    pub fn ember_session_logits(
        session: *const ember_session,
        out_logits: *mut *const f32,
        out_n_vocab: *mut usize,
    ) -> ember_status;
    pub fn ember_session_position(session: *const ember_session, out_position: *mut u32) -> ember_status;
    pub fn ember_session_context_length(session: *const ember_session, out_n_ctx: *mut u32) -> ember_status;
    pub fn ember_session_backend(
        session: *const ember_session,
        out_backend: *mut ember_backend_kind,
        out_n_threads: *mut u32,
    ) -> ember_status;
    pub fn ember_session_set_precision(session: *mut ember_session, precision: ember_precision) -> ember_status;
    pub fn ember_default_thread_count() -> u32;
    pub fn ember_session_truncate(session: *mut ember_session, n_tokens: u32) -> ember_status;
    pub fn ember_session_save(
        session: *const ember_session,
        buf: *mut c_void,
        capacity: usize,
        out_len: *mut usize,
    ) -> ember_status;
    pub fn ember_session_restore(session: *mut ember_session, data: *const c_void, size: usize) -> ember_status;
    pub fn ember_session_save_file(session: *const ember_session, path: *const c_char) -> ember_status;
    pub fn ember_session_restore_file(session: *mut ember_session, path: *const c_char) -> ember_status;

    pub fn ember_sampler_params_init(params: *mut ember_sampler_params);
    pub fn ember_sampler_create(params: *const ember_sampler_params, out: *mut *mut ember_sampler) -> ember_status;
    pub fn ember_sampler_free(sampler: *mut ember_sampler);
    pub fn ember_sampler_sample(
        sampler: *mut ember_sampler,
        logits: *const f32,
        n_vocab: usize,
        out_token: *mut ember_token,
    ) -> ember_status;
    pub fn ember_sampler_accept(sampler: *mut ember_sampler, token: ember_token) -> ember_status;
    pub fn ember_sampler_reset(sampler: *mut ember_sampler) -> ember_status;
    pub fn ember_sampler_logprobs(
        sampler: *const ember_sampler,
        sampled: *mut ember_token_logprob,
        top: *mut ember_token_logprob,
        capacity: usize,
        out_count: *mut usize,
    ) -> ember_status;
    pub fn ember_grammar_create_gbnf(
        model: *const ember_model,
        gbnf: *const c_char,
        len: usize,
        out: *mut *mut ember_grammar,
    ) -> ember_status;
    pub fn ember_grammar_create_json_schema(
        model: *const ember_model,
        schema: *const c_char,
        len: usize,
        out: *mut *mut ember_grammar,
    ) -> ember_status;
    pub fn ember_grammar_free(grammar: *mut ember_grammar);
    pub fn ember_grammar_memory(grammar: *const ember_grammar, out_bytes: *mut usize) -> ember_status;
    pub fn ember_sampler_set_grammar(sampler: *mut ember_sampler, grammar: *const ember_grammar) -> ember_status;

    pub fn ember_generate_next(
        session: *mut ember_session,
        sampler: *mut ember_sampler,
        out_token: *mut ember_token,
        out_text: *mut *const c_char,
        out_text_len: *mut usize,
    ) -> ember_status;
    pub fn ember_session_set_stop(session: *mut ember_session, stop: *const *const c_char, n_stop: usize) -> ember_status;
    pub fn ember_session_flush_stop(
        session: *mut ember_session,
        out_text: *mut *const c_char,
        out_text_len: *mut usize,
    ) -> ember_status;
    pub fn ember_generate_params_init(params: *mut ember_generate_params);
    pub fn ember_generate(
        session: *mut ember_session,
        sampler: *mut ember_sampler,
        params: *const ember_generate_params,
        out_count: *mut usize,
    ) -> ember_status;

    pub fn ember_spec_params_init(params: *mut ember_spec_params);
    pub fn ember_session_set_speculation(session: *mut ember_session, params: *const ember_spec_params) -> ember_status;
    pub fn ember_spec_stats_init(stats: *mut ember_spec_stats);
    pub fn ember_session_spec_stats(session: *const ember_session, stats: *mut ember_spec_stats) -> ember_status;

    pub fn ember_engine_params_init(params: *mut ember_engine_params);
    pub fn ember_engine_create(
        model: *const ember_model,
        params: *const ember_engine_params,
        out: *mut *mut ember_engine,
    ) -> ember_status;
    pub fn ember_engine_free(engine: *mut ember_engine);
    pub fn ember_engine_step(engine: *mut ember_engine, out_busy: *mut bool) -> ember_status;
    pub fn ember_engine_stats_init(stats: *mut ember_engine_stats);
    pub fn ember_engine_get_stats(engine: *mut ember_engine, stats: *mut ember_engine_stats) -> ember_status;
    pub fn ember_memory_estimate_init(estimate: *mut ember_memory_estimate);
    pub fn ember_estimate_memory(
        model: *const ember_model,
        params: *const ember_engine_params,
        out: *mut ember_memory_estimate,
    ) -> ember_status;
    pub fn ember_estimate_memory_file(
        path: *const c_char,
        params: *const ember_engine_params,
        out: *mut ember_memory_estimate,
    ) -> ember_status;
    pub fn ember_placement_init(placement: *mut ember_placement);
    pub fn ember_session_placement(session: *const ember_session, out: *mut ember_placement) -> ember_status;
    pub fn ember_engine_placement(engine: *mut ember_engine, out: *mut ember_placement) -> ember_status;
    pub fn ember_estimate_placement(
        model: *const ember_model,
        params: *const ember_engine_params,
        out: *mut ember_placement,
    ) -> ember_status;
    pub fn ember_engine_pin_prefix(engine: *mut ember_engine, tokens: *const ember_token, n_tokens: usize) -> ember_status;
    pub fn ember_request_params_init(params: *mut ember_request_params);
    pub fn ember_request_submit(
        engine: *mut ember_engine,
        params: *const ember_request_params,
        out: *mut *mut ember_request,
    ) -> ember_status;
    pub fn ember_request_poll(
        request: *mut ember_request,
        tokens: *mut ember_token,
        capacity: usize,
        out_count: *mut usize,
        out_state: *mut ember_request_state,
    ) -> ember_status;
    pub fn ember_request_text(
        request: *mut ember_request,
        buf: *mut c_char,
        capacity: usize,
        out_len: *mut usize,
    ) -> ember_status;
    pub fn ember_request_wait(request: *mut ember_request, timeout_ms: u32) -> ember_status;
    pub fn ember_request_cancel(request: *mut ember_request) -> ember_status;
    pub fn ember_request_error(
        request: *mut ember_request,
        out_status: *mut ember_status,
        out_message: *mut *const c_char,
    ) -> ember_status;
    pub fn ember_request_logprobs(
        request: *mut ember_request,
        i: usize,
        sampled: *mut ember_token_logprob,
        top: *mut ember_token_logprob,
        capacity: usize,
        out_count: *mut usize,
    ) -> ember_status;
    pub fn ember_request_free(request: *mut ember_request);
    pub fn ember_request_stats_init(stats: *mut ember_request_stats);
    pub fn ember_request_get_stats(request: *mut ember_request, stats: *mut ember_request_stats) -> ember_status;

    pub fn ember_device_info_init(info: *mut ember_device_info);
    pub fn ember_backend_devices(
        backend: ember_backend_kind,
        out: *mut ember_device_info,
        capacity: usize,
        out_count: *mut usize,
    ) -> ember_status;
    pub fn ember_devices(out: *mut *const ember_device, capacity: usize, out_count: *mut usize) -> ember_status;
    pub fn ember_device_get_info(
        device: *const ember_device,
        info: *mut ember_device_info,
        out_backend: *mut ember_backend_kind,
    ) -> ember_status;
    pub fn ember_session_device(session: *const ember_session, out_device: *mut *const ember_device) -> ember_status;
    pub fn ember_engine_device(engine: *const ember_engine, out_device: *mut *const ember_device) -> ember_status;
    pub fn ember_vulkan_device_params_init(params: *mut ember_vulkan_device_params);
    pub fn ember_vulkan_set_device(params: *const ember_vulkan_device_params) -> ember_status;
    pub fn ember_cuda_device_params_init(params: *mut ember_cuda_device_params);
    pub fn ember_cuda_set_device(params: *const ember_cuda_device_params) -> ember_status;

    pub fn ember_cpu_budget_init(budget: *mut ember_cpu_budget);
    pub fn ember_cpu_budget_set(budget: *const ember_cpu_budget) -> ember_status;
    pub fn ember_cpu_budget_get(budget: *mut ember_cpu_budget) -> ember_status;

    pub fn ember_chat_apply_template(
        model: *const ember_model,
        tmpl: *const c_char,
        messages: *const ember_chat_message,
        n_messages: usize,
        add_generation_prompt: bool,
        buf: *mut c_char,
        capacity: usize,
        out_len: *mut usize,
    ) -> ember_status;

    pub fn ember_chat_params_init(params: *mut ember_chat_params);
    pub fn ember_chat_apply_template_v2(
        model: *const ember_model,
        params: *const ember_chat_params,
        buf: *mut c_char,
        capacity: usize,
        out_len: *mut usize,
    ) -> ember_status;
    pub fn ember_chat_format_detect(model: *const ember_model, tmpl: *const c_char, out: *mut ember_chat_format) -> ember_status;
    pub fn ember_chat_format_name(format: ember_chat_format) -> *const c_char;
    pub fn ember_chat_parser_params_init(params: *mut ember_chat_parser_params);
    pub fn ember_chat_parser_create(
        model: *const ember_model,
        params: *const ember_chat_parser_params,
        out: *mut *mut ember_chat_parser,
    ) -> ember_status;
    pub fn ember_chat_parser_free(parser: *mut ember_chat_parser);
    pub fn ember_chat_parser_feed(parser: *mut ember_chat_parser, text: *const c_char, len: usize) -> ember_status;
    pub fn ember_chat_parser_finish(parser: *mut ember_chat_parser) -> ember_status;
    pub fn ember_chat_delta_init(delta: *mut ember_chat_delta);
    pub fn ember_chat_parser_take(parser: *mut ember_chat_parser, out: *mut ember_chat_delta) -> ember_status;
    pub fn ember_chat_parser_result(parser: *const ember_chat_parser, out: *mut ember_chat_delta) -> ember_status;
    pub fn ember_chat_parser_call(parser: *const ember_chat_parser, i: usize, out: *mut ember_chat_tool_call) -> ember_status;
    pub fn ember_chat_parser_feed_request(
        parser: *mut ember_chat_parser,
        request: *mut ember_request,
        out_state: *mut ember_request_state,
    ) -> ember_status;
    pub fn ember_sampler_params_from_model(
        model: *const ember_model,
        params: *mut ember_sampler_params,
        out_count: *mut usize,
    ) -> ember_status;
    pub fn ember_sampler_set_logit_bias(sampler: *mut ember_sampler, bias: *const ember_logit_bias, n: usize) -> ember_status;
    pub fn ember_tool_grammar_params_init(params: *mut ember_tool_grammar_params);
    pub fn ember_chat_tool_grammar(
        model: *const ember_model,
        params: *const ember_tool_grammar_params,
        out: *mut *mut ember_grammar,
    ) -> ember_status;
    pub fn ember_chat_tool_prefix(
        model: *const ember_model,
        params: *const ember_tool_grammar_params,
        buf: *mut c_char,
        capacity: usize,
        out_len: *mut usize,
    ) -> ember_status;

    pub fn ember_embed_params_init(params: *mut ember_embed_params);
    pub fn ember_embedder_create(
        model: *const ember_model,
        params: *const ember_embed_params,
        out: *mut *mut ember_embedder,
    ) -> ember_status;
    pub fn ember_embedder_free(embedder: *mut ember_embedder);
    pub fn ember_embedder_dim(embedder: *const ember_embedder) -> usize;
    pub fn ember_embedder_is_reranker(embedder: *const ember_embedder) -> bool;
    pub fn ember_embed(
        embedder: *mut ember_embedder,
        texts: *const *const c_char,
        lengths: *const usize,
        n_texts: usize,
        out: *mut f32,
        capacity: usize,
    ) -> ember_status;
    pub fn ember_embed_tokens(
        embedder: *mut ember_embedder,
        tokens: *const *const ember_token,
        n_tokens: *const usize,
        n_texts: usize,
        out: *mut f32,
        capacity: usize,
    ) -> ember_status;
    pub fn ember_rerank(
        embedder: *mut ember_embedder,
        query: *const c_char,
        docs: *const *const c_char,
        n_docs: usize,
        scores: *mut f32,
    ) -> ember_status;

    // ---- Lazy grammars (EMBER_1.10) ----
    pub fn ember_grammar_triggers_init(triggers: *mut ember_grammar_triggers);
    pub fn ember_grammar_create_lazy(
        model: *const ember_model,
        gbnf: *const c_char,
        len: usize,
        triggers: *const ember_grammar_triggers,
        out: *mut *mut ember_grammar,
    ) -> ember_status;
    pub fn ember_sampler_grammar_constraining(sampler: *const ember_sampler, out_constraining: *mut bool) -> ember_status;

    // ---- Embedding requests on an engine (EMBER_1.11) ----
    pub fn ember_embed_request_params_init(params: *mut ember_embed_request_params);
    pub fn ember_engine_submit_embed(
        engine: *mut ember_engine,
        params: *const ember_embed_request_params,
        out: *mut *mut ember_request,
    ) -> ember_status;
    pub fn ember_request_embedding_dim(request: *const ember_request) -> usize;
    pub fn ember_request_embeddings(
        request: *mut ember_request,
        out: *mut f32,
        capacity: usize,
        out_count: *mut usize,
    ) -> ember_status;
}
