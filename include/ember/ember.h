/*
 * ember.h — the public C ABI of libember, an embeddable LLM inference runtime.
 *
 * This header is the manual. Every function is documented where it is declared: what it does, who owns
 * what it returns, what may be NULL, which thread may call it and which errors it gives.
 *
 * Conventions that hold for every function below (read these once):
 *
 *  - Handles are opaque. Each object has a create/load function and a free function; free accepts NULL.
 *  - Params structs begin with `uint32_t struct_size` and are passed by pointer. Call the matching
 *    `*_params_init()` first: it sets struct_size and fills the defaults. Fields are never reordered or
 *    removed; new ones are appended and read only when struct_size covers them, so a caller compiled
 *    against an older header still works. A NULL params pointer means "all defaults". When a struct
 *    grows, its init function gets a new symbol version (ELF builds): a program linked against the
 *    older header keeps calling the init that writes only the older struct's bytes.
 *  - Every fallible call returns an `ember_status`: EMBER_OK (0) on success, a positive value for a
 *    non-error outcome worth telling apart (e.g. EMBER_END_OF_GENERATION), a negative value on error.
 *    The numbers are stable. On error, `ember_last_error()` returns a message naming what went wrong
 *    (thread-local: it describes the last failing call made on the calling thread).
 *  - No exception, assert, `abort()` or `exit()` ever leaves the library: out-of-memory and internal
 *    failures are returned as statuses.
 *  - Strings are UTF-8 and NUL-terminated unless a length is passed beside them.
 *  - Variable-size output uses the two-call idiom: pass NULL (capacity 0) to learn the size, then call
 *    again with a buffer at least that large. A too-small non-NULL buffer gives
 *    EMBER_ERR_BUFFER_TOO_SMALL and still reports the size needed.
 *
 * Threads: an `ember_model` is immutable after loading and may be shared by any number of sessions on
 * any threads. An `ember_session` or `ember_sampler` must be used by one thread at a time (different
 * sessions may run concurrently, forks of one session included). Functions that take no handle are safe from any thread.
 * Since EMBER_1.8 this is checked: a call on a session or sampler while another thread is inside a call
 * on the same handle fails with EMBER_ERR_INVALID_STATE ("in use by a call on another thread") and
 * changes nothing (the call in progress goes on). The check is one atomic operation per call; it cannot
 * see a free racing a call, which stays undefined behaviour as with free(). The calls a callback makes
 * on its own handles are governed by the callback rules below, not by this. Engines, requests and
 * grammars are thread-safe.
 */
#ifndef EMBER_EMBER_H
#define EMBER_EMBER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && !defined(EMBER_STATIC)
#  ifdef EMBER_BUILD
#    define EMBER_API __declspec(dllexport)
#  else
#    define EMBER_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__)
#  define EMBER_API __attribute__((visibility("default")))
#else
#  define EMBER_API
#endif

/* ---------------------------------------------------------------------------------------------------
 * Versions
 * ------------------------------------------------------------------------------------------------- */

/** The library release this header belongs to (semantic versioning). */
#define EMBER_VERSION_MAJOR 0
#define EMBER_VERSION_MINOR 4
#define EMBER_VERSION_PATCH 0
#define EMBER_VERSION_STRING "0.4.0"

/** The ABI generation. It changes only if a published function or struct must break, which we never
 *  plan to do: functions whose meaning must change get a `_v2` beside the old one. */
#define EMBER_ABI_VERSION 1

/** The release string of the loaded library, e.g. "0.1.0". Static storage; never NULL. */
EMBER_API const char *ember_version(void);

/** The ABI generation of the loaded library; compare with EMBER_ABI_VERSION. */
EMBER_API uint32_t ember_abi_version(void);

/* ---------------------------------------------------------------------------------------------------
 * Status and errors
 * ------------------------------------------------------------------------------------------------- */

/** Result of every fallible call. Values are stable and never renumbered. */
typedef enum ember_status {
    EMBER_OK = 0,
    /** Generation ended because the model produced an end-of-generation token (not an error). */
    EMBER_END_OF_GENERATION = 1,
    /** A callback returned false (or ember_session_cancel was called) and the work stopped early (not
     *  an error). */
    EMBER_STOPPED = 2,

    /** An argument was NULL where it may not be, out of range, or a struct_size was too small. */
    EMBER_ERR_INVALID_ARGUMENT = -1,
    /** Memory (host or device) could not be allocated. */
    EMBER_ERR_OUT_OF_MEMORY = -2,
    /** A file could not be opened, mapped or read. */
    EMBER_ERR_IO = -3,
    /** The model file is malformed: bad magic, truncated, inconsistent metadata, tensor out of bounds. */
    EMBER_ERR_INVALID_MODEL = -4,
    /** Well-formed input that this build cannot handle: unknown architecture, tensor type, backend. */
    EMBER_ERR_UNSUPPORTED = -5,
    /** A progress callback returned false, or ember_session_cancel was called: the operation was cancelled
     *  and left nothing behind (nothing was created, or the session is as before the call). */
    EMBER_ERR_CANCELLED = -6,
    /** The session's context is full: truncate it or create one with a larger n_ctx. */
    EMBER_ERR_CONTEXT_FULL = -7,
    /** The caller's buffer is too small; the size needed was still reported. */
    EMBER_ERR_BUFFER_TOO_SMALL = -8,
    /** A metadata key or other named item does not exist. */
    EMBER_ERR_NOT_FOUND = -9,
    /** A metadata value exists but has another type than the one asked for. */
    EMBER_ERR_TYPE_MISMATCH = -10,
    /** A compute backend failed (device lost, driver error). */
    EMBER_ERR_BACKEND = -11,
    /** The call is not valid in the object's current state (e.g. no logits before the first feed). */
    EMBER_ERR_INVALID_STATE = -12,
    /** Saved data is truncated, corrupted, from a newer format version or from another model. */
    EMBER_ERR_CORRUPT_DATA = -13,
    /** A grammar constrains sampling and no token of the vocabulary can continue it, while what was
     *  generated is not yet complete (added in EMBER_1.4). Generation cannot go on; the sampler and
     *  session are unchanged, so the caller may reset the sampler or stop. */
    EMBER_ERR_GRAMMAR_DEAD_END = -14,
    /** A bug in ember. The message says where; please report it. */
    EMBER_ERR_INTERNAL = -100
} ember_status;

/** A short constant name for a status ("EMBER_ERR_IO"); "unknown status" for other values. */
EMBER_API const char *ember_status_string(ember_status status);

/** The message of the last failing call on this thread ("" if none). The pointer stays valid until the
 *  next ember call on the same thread. Successful calls do not clear it. */
EMBER_API const char *ember_last_error(void);

/* ---------------------------------------------------------------------------------------------------
 * Logging (silent by default)
 * ------------------------------------------------------------------------------------------------- */

typedef enum ember_log_level {
    EMBER_LOG_DEBUG = 0,
    EMBER_LOG_INFO = 1,
    EMBER_LOG_WARN = 2,
    EMBER_LOG_ERROR = 3
} ember_log_level;

/** A log sink. `message` is one line without the trailing newline, valid only during the call. It may
 *  be called from any thread that is running ember work, so it must be thread-safe. */
typedef void (*ember_log_fn)(ember_log_level level, const char *message, void *user_data);

/** Sets the process-wide log sink (NULL: silent, the default) and the lowest level passed to it.
 *  Messages of a model with its own sink (ember_model_params.log) go there instead. Thread-safe. */
EMBER_API void ember_log_set(ember_log_fn fn, void *user_data, ember_log_level min_level);

/* ---------------------------------------------------------------------------------------------------
 * Models
 * ------------------------------------------------------------------------------------------------- */

typedef struct ember_model ember_model;
typedef int32_t ember_token;

/** Load progress, in [0, 1], called on the loading thread. Return false to cancel the load: the load
 *  then fails with EMBER_ERR_CANCELLED and frees everything it allocated. */
typedef bool (*ember_progress_fn)(float progress, void *user_data);

typedef struct ember_model_params {
    uint32_t struct_size;
    /** Optional progress callback (default NULL). */
    ember_progress_fn progress;
    void *progress_user_data;
    /** Load only the metadata and tokenizer, no weights (default false). Such a model tokenizes but
     *  cannot create sessions; any architecture, known or not, loads this way. */
    bool vocab_only;
    /** Optional log sink for this model's messages (default NULL: the process-wide sink). */
    ember_log_fn log;
    void *log_user_data;
} ember_model_params;

/** Fills *params with the defaults and sets struct_size. */
EMBER_API void ember_model_params_init(ember_model_params *params);

/** Loads a GGUF file (versions 2 and 3). The file is memory-mapped and validated before use: magic,
 *  version, counts, string lengths, types, shapes and that every tensor lies inside the file.
 *  The weights stay in the mapping (shared with other processes through the page cache) until the
 *  model's first session or engine on the CPU backend: that one may copy them into private memory
 *  backed by transparent huge pages, where decode runs faster (each 4 KiB page a weight crosses costs
 *  a TLB miss), when the kernel offers them, the weights take 64 MiB or more and the copy fits in half
 *  of the available memory; it takes that session's creation about the time of reading the file from
 *  the page cache (0.14-0.7 s for 620 MB on a 2-vCPU VM), and is not shared between processes. The
 *  environment variable EMBER_HUGEPAGES=0 keeps the mapping, EMBER_HUGEPAGES=1 copies whenever huge
 *  pages are offered. A GPU backend uploads from the mapping and never makes the copy.
 *  Errors: EMBER_ERR_IO (cannot open/map), EMBER_ERR_INVALID_MODEL (malformed; the message names the
 *  field), EMBER_ERR_UNSUPPORTED (unknown architecture or tensor type, named in the message),
 *  EMBER_ERR_CANCELLED, EMBER_ERR_OUT_OF_MEMORY. On success *out owns the model; release it with
 *  ember_model_free() after every session using it has been freed. On failure *out is set to NULL. */
EMBER_API ember_status ember_model_load(const char *path, const ember_model_params *params,
                                        ember_model **out);

/** Loads only what a GGUF file says about itself, its metadata and tensor table, validated as
 *  ember_model_load validates them (since EMBER_1.5). Neither the tokenizer nor the weights are built, so
 *  a well-formed file loads whatever its architecture, tokenizer model, pre-tokenizer or tensor types:
 *  this describes a file that ember_model_load refuses (EMBER_ERR_UNSUPPORTED; its message says why the
 *  file does not run here). On such a model ember_model_get_info fills architecture, name, size_bytes
 *  and n_vocab (the length of tokenizer.ggml.tokens, 0 if absent); n_params and the shape fields are 0
 *  (the tensor table has the parameters). The metadata and tensor functions work as on any model. It
 *  cannot tokenize: ember_tokenize, ember_token_to_piece, ember_detokenize, the grammar constructors and
 *  ember_chat_apply_template with this model fail with EMBER_ERR_UNSUPPORTED; ember_token_bos and
 *  ember_token_eos return -1 and ember_token_is_eog false; sessions and engines are refused with
 *  EMBER_ERR_INVALID_ARGUMENT, as for a vocab-only load. `params` as for ember_model_load (NULL: the
 *  defaults; vocab_only is ignored; progress and log are used). Errors: EMBER_ERR_INVALID_ARGUMENT,
 *  EMBER_ERR_IO, EMBER_ERR_INVALID_MODEL, EMBER_ERR_CANCELLED, EMBER_ERR_OUT_OF_MEMORY. On success *out
 *  owns the model (free it with ember_model_free()); on failure *out is set to NULL. Thread-safe. */
EMBER_API ember_status ember_model_load_metadata(const char *path, const ember_model_params *params,
                                                 ember_model **out);

/** Frees a model. NULL is a no-op. All sessions created on it must have been freed first. */
EMBER_API void ember_model_free(ember_model *model);

/** A summary of a loaded model. Strings are owned by the model and live as long as it does. */
typedef struct ember_model_info {
    uint32_t struct_size;
    const char *architecture; /**< general.architecture, e.g. "llama" */
    const char *name;         /**< general.name, or "" */
    uint64_t n_params;        /**< number of weights (0 for a vocab-only load) */
    uint64_t size_bytes;      /**< bytes of tensor data in the file */
    uint32_t n_ctx_train;     /**< trained context length */
    uint32_t n_vocab;
    uint32_t n_embd;
    uint32_t n_layer;
    uint32_t n_head;
    uint32_t n_head_kv;
    uint64_t kv_bytes_per_token; /**< KV-cache bytes one token of context takes (f16 cache) */
    /* EMBER_1.9: the two kinds of per-sequence memory, for hybrid models whose recurrent layers carry a
     * fixed-size state instead of KV rows (ember_estimate_memory counts both). */
    uint64_t state_bytes_per_sequence; /**< recurrent-state bytes one sequence carries, whatever its
                                        *  length (0: no recurrent layers); a session holds
                                        *  2 + EMBER_SESSION_KEPT_STATES such states */
    uint32_t n_kv_layers;        /**< layers that keep KV rows (kv_bytes_per_token covers these) */
    uint32_t n_recurrent_layers; /**< layers that carry a recurrent state instead */
} ember_model_info;

/** Fills *info (whose struct_size the caller sets; ember_model_info_init does it). Thread-safe. */
EMBER_API void ember_model_info_init(ember_model_info *info);
EMBER_API ember_status ember_model_get_info(const ember_model *model, ember_model_info *info);

/** Number of metadata key/value pairs in the file. Thread-safe. */
EMBER_API ember_status ember_model_meta_count(const ember_model *model, size_t *out_count);

/** The key of the i-th metadata pair. The string is owned by the model. EMBER_ERR_NOT_FOUND when i is
 *  out of range. */
EMBER_API ember_status ember_model_meta_key(const ember_model *model, size_t i, const char **out_key);

/** Any metadata value rendered as text (numbers in decimal, booleans as true/false, arrays as
 *  "[a, b, ...]" truncated after 16 elements). Two-call idiom on buf/capacity; *out_len receives the
 *  length without the NUL (the buffer needs *out_len + 1 bytes). EMBER_ERR_NOT_FOUND if absent. */
EMBER_API ember_status ember_model_meta_string(const ember_model *model, const char *key, char *buf,
                                               size_t capacity, size_t *out_len);

/** Typed metadata reads. Integer types of any width convert to int64 when the value fits; floats of
 *  either width convert to double. EMBER_ERR_NOT_FOUND if absent, EMBER_ERR_TYPE_MISMATCH otherwise. */
EMBER_API ember_status ember_model_meta_int(const ember_model *model, const char *key, int64_t *out);
EMBER_API ember_status ember_model_meta_float(const ember_model *model, const char *key, double *out);

/** One tensor of the file. Strings are owned by the model and live as long as it does. */
typedef struct ember_tensor_info {
    uint32_t struct_size;
    const char *name;
    const char *type;   /**< GGUF type name, e.g. "Q8_0" */
    uint32_t n_dims;
    int64_t dims[4];    /**< dims[0] is the innermost (row length); unused dims are 1 */
    uint64_t n_bytes;
} ember_tensor_info;

EMBER_API void ember_tensor_info_init(ember_tensor_info *info);

/** Number of tensors in the file (0 for vocab-only files). Thread-safe. */
EMBER_API ember_status ember_model_tensor_count(const ember_model *model, size_t *out_count);

/** Describes the i-th tensor. EMBER_ERR_NOT_FOUND when i is out of range. Thread-safe. */
EMBER_API ember_status ember_model_tensor_info(const ember_model *model, size_t i, ember_tensor_info *info);

/* ---------------------------------------------------------------------------------------------------
 * Tokenizer (part of the model; thread-safe)
 * ------------------------------------------------------------------------------------------------- */

/* Flags for ember_tokenize. */
/** Add BOS (and EOS) where the model's metadata asks for them. */
#define EMBER_TOKENIZE_ADD_SPECIAL (1u << 0)
/** Parse special tokens written in the text (e.g. "<s>", "<|im_start|>") as those tokens. Without this
 *  flag such text is tokenized as plain text: untrusted input cannot inject control tokens. Tokens the
 *  vocabulary marks user-defined (Gemma's HTML and tab tokens, Qwen3's "<think>") are not control tokens:
 *  they are always matched in the text, with or without this flag, as the models were trained. */
#define EMBER_TOKENIZE_PARSE_SPECIAL (1u << 1)

/** Tokenizes `text` (`text_len` bytes; it need not be NUL-terminated; NULL only with length 0).
 *  Two-call idiom: with tokens NULL and capacity 0, *out_count receives the number of tokens. */
EMBER_API ember_status ember_tokenize(const ember_model *model, const char *text, size_t text_len,
                                      uint32_t flags, ember_token *tokens, size_t capacity,
                                      size_t *out_count);

/* Flags for ember_token_to_piece and ember_detokenize. */
/** Render control tokens (BOS, EOS, ...) as their text; by default they produce nothing. */
#define EMBER_DETOKENIZE_RENDER_SPECIAL (1u << 0)
/** Keep the space that SentencePiece models put before the first word (by default ember_detokenize
 *  removes it from the start of the text). */
#define EMBER_DETOKENIZE_KEEP_LEADING_SPACE (1u << 1)

/** The bytes one token stands for (for byte tokens, one raw byte: possibly part of a UTF-8 character).
 *  Two-call idiom; *out_len is the length in bytes (no NUL is written). EMBER_ERR_INVALID_ARGUMENT for
 *  an id outside the vocabulary. */
EMBER_API ember_status ember_token_to_piece(const ember_model *model, ember_token token, uint32_t flags,
                                            char *buf, size_t capacity, size_t *out_len);

/** The text of a token sequence, NUL-terminated. Two-call idiom; *out_len excludes the NUL, the buffer
 *  needs *out_len + 1 bytes. Invalid UTF-8 that the tokens spell is replaced by U+FFFD. */
EMBER_API ember_status ember_detokenize(const ember_model *model, const ember_token *tokens, size_t n_tokens,
                                        uint32_t flags, char *buf, size_t capacity, size_t *out_len);

/** Special token ids; -1 when the model has none. */
EMBER_API ember_token ember_token_bos(const ember_model *model);
EMBER_API ember_token ember_token_eos(const ember_model *model);
/** True when the token ends generation (EOS, EOT, <|im_end|>, ...). */
EMBER_API bool ember_token_is_eog(const ember_model *model, ember_token token);

/* ---------------------------------------------------------------------------------------------------
 * Sessions: one sequence's state (KV cache, logits) on one model
 * ------------------------------------------------------------------------------------------------- */

typedef struct ember_session ember_session;

/** A device any backend runs on — the CPU, or one device of a GPU backend — as an object (since
 *  EMBER_1.4; see ember_devices()). Owned by the library and valid for the process's life; never freed by
 *  the caller. */
typedef struct ember_device ember_device;

typedef enum ember_backend_kind {
    EMBER_BACKEND_AUTO = 0, /**< the best backend available on this machine */
    EMBER_BACKEND_CPU = 1,
    EMBER_BACKEND_CUDA = 2,
    EMBER_BACKEND_VULKAN = 3
} ember_backend_kind;

/** Element type of the KV cache. Q8_0 stores K and V in GGUF's Q8_0 blocks (32 values and one f16
 *  scale: 1.0625 bytes per value instead of 2), so the same memory holds 1.88 times the tokens, for a
 *  small quality cost (docs/benchmarks.md measures it on stories15M). It needs a model whose K/V rows
 *  are a multiple of 32 values and whose head size is a multiple of 8 (EMBER_ERR_UNSUPPORTED otherwise).
 *  Q4_0 (EMBER_1.10) stores them in GGUF's Q4_0 blocks (32 values as 4-bit codes and one f16 scale:
 *  0.5625 bytes per value), 3.56 times the tokens of F16 for a larger quality cost (docs/benchmarks.md);
 *  the same shape rules as Q8_0. */
typedef enum ember_kv_type {
    EMBER_KV_F16 = 0,
    EMBER_KV_Q8_0 = 1,
    EMBER_KV_Q4_0 = 2 /**< EMBER_1.10 */
} ember_kv_type;

/** ember_session_params.gpu_layers and ember_engine_params.gpu_layers (EMBER_1.9): every layer on the GPU,
 *  or the automatic fit to the budget. experts_on_cpu takes EMBER_GPU_LAYERS_ALL too. */
#define EMBER_GPU_LAYERS_ALL (-1)
#define EMBER_GPU_LAYERS_AUTO (-2)

typedef struct ember_session_params {
    uint32_t struct_size;
    /** Context length in tokens (default 0: the model's trained context, capped at 4096). */
    uint32_t n_ctx;
    /** Worker threads for the CPU backend (default 0: the number of physical cores, at most 8). */
    uint32_t n_threads;
    /** Tokens evaluated per forward pass when feeding long prompts (default 256). */
    uint32_t n_batch;
    /** Seed for anything random the session does (default 0, a fixed seed: see ember_sampler_params.seed). */
    uint64_t seed;
    /** Backend choice (default EMBER_BACKEND_AUTO). */
    ember_backend_kind backend;
    /* --- EMBER_1.1 (a caller built against EMBER_1 passes struct_size 32 and gets the defaults) --- */
    /** Keep 0 (what was padding in EMBER_1, named so that no later field lands in it). */
    uint32_t reserved;
    /** Sequences the session's KV cache is sized for: itself and the sessions forked from it
     *  (ember_session_fork) share one cache of n_seq_max × n_ctx tokens (default 1). Blocks they have in
     *  common are stored once, so forks of a long prompt fit even at the default. */
    uint32_t n_seq_max;
    /** KV cache element type (default EMBER_KV_F16). */
    ember_kv_type kv_type;
    /* --- EMBER_1.4 (a caller built against EMBER_1.1 passes struct_size 40 and gets the default) --- */
    /** The device to run on, from ember_devices() (default NULL: the one `backend` chooses). When set,
     *  `backend` is ignored; see ember_devices() for what choosing a GPU device means. */
    const ember_device *device;
    /* --- EMBER_1.9 (a caller built against EMBER_1.4 passes struct_size 48 and gets the defaults) --- */
    /** Placement across devices (docs/offload.md), with a GPU backend or device: how many decoder layers
     *  run on the GPU, the rest on the CPU — a count, EMBER_GPU_LAYERS_ALL (default: the whole model on the
     *  GPU) or EMBER_GPU_LAYERS_AUTO (the placement that fits gpu_budget_bytes and decodes fastest). With
     *  the CPU backend, ignored. A placement that cannot fit is refused before anything is allocated
     *  (EMBER_ERR_OUT_OF_MEMORY, with the numbers); ember_session_placement says where each part went. */
    int32_t gpu_layers;
    /** MoE experts of this many GPU layers (the first ones) stay in host memory and run on the CPU while
     *  the rest of each layer runs on the GPU (default 0; EMBER_GPU_LAYERS_ALL: every layer's). */
    int32_t experts_on_cpu;
    /** Bytes the GPU's part may take: weights, KV cache, recurrent states, activations (default 0: the
     *  device's free memory less a margin of 5%, at least 256 MiB). */
    uint64_t gpu_budget_bytes;
} ember_session_params;

EMBER_API void ember_session_params_init(ember_session_params *params);

/** Creates a session on `model` (which must outlive it). Allocates the KV cache for n_ctx tokens.
 *  Errors: EMBER_ERR_INVALID_ARGUMENT (vocab-only model, bad params), EMBER_ERR_UNSUPPORTED (backend
 *  not available in this build or on this machine), EMBER_ERR_OUT_OF_MEMORY (on the CPU and CUDA
 *  backends also before allocating, when the memory needed exceeds what the system, or the CUDA device,
 *  has available: the message gives both figures; $EMBER_MEMORY_CHECK=0 turns that check off). */
EMBER_API ember_status ember_session_create(const ember_model *model, const ember_session_params *params,
                                            ember_session **out);

/** Frees a session. NULL is a no-op. A session forked from it lives on. */
EMBER_API void ember_session_free(ember_session *session);

/** Creates a session that continues from `session`'s current state — its tokens, KV cache, logits —
 *  without copying or recomputing anything: the two share their KV blocks until one of them writes
 *  into a shared block, which it then copies first (copy-on-write; only a partial last block ever is).
 *  Use it to branch a conversation, or to sample several continuations of one prompt. The fork has the
 *  same model, params and cache; samplers are not part of a session (give each branch its own).
 *  Sessions forked from one another may be used on different threads: their calls are serialized on
 *  the cache they share. Feeding a branch fails with EMBER_ERR_OUT_OF_MEMORY (evaluating nothing) when
 *  the shared cache has too few free blocks (see ember_session_params.n_seq_max). Since EMBER_1.1. */
EMBER_API ember_status ember_session_fork(ember_session *session, ember_session **out);

/** Evaluates `n_tokens` tokens after the current position (a prompt: prefill; one token: decode) in
 *  chunks of n_batch, and keeps the logits of the last one. EMBER_ERR_CONTEXT_FULL if they would not
 *  fit (nothing is evaluated then); EMBER_ERR_INVALID_ARGUMENT for ids outside the vocabulary;
 *  EMBER_ERR_CANCELLED when ember_session_cancel stopped it (the session is then as before the call).
 *  A feed is all or nothing: when any error stops it part way (a backend failure too), the chunks it
 *  had evaluated are forgotten and the position is as before the call; the earlier logits stay
 *  readable, unless the failure hit the pass that writes them (ember_session_logits then gives
 *  EMBER_ERR_INVALID_STATE until the next successful feed). */
EMBER_API ember_status ember_session_feed(ember_session *session, const ember_token *tokens, size_t n_tokens);

/** Stops the ember_session_feed or ember_generate running on this session on another thread (a long
 *  prompt, a reply the user interrupts): a feed returns EMBER_ERR_CANCELLED with the session as it was
 *  before the call (checked between chunks of n_batch tokens and between layers); ember_generate
 *  returns EMBER_STOPPED after the token it is emitting, which stays evaluated as usual. It affects
 *  only a call in progress: each feed or generate starts uncancelled. Only sets a flag, so it may be
 *  called from any thread and from a signal handler (Ctrl-C). NULL is a no-op. Since EMBER_1.2. */
EMBER_API void ember_session_cancel(ember_session *session);

/** Makes cancellation of this session impossible to lose. ember_session_cancel alone affects only a
 *  call already running, since each call starts uncancelled: a cancel that lands between the
 *  application's last check and its next call is forgotten (the bindings re-sent it, or let that call
 *  run to its end). After ember_session_cancel_arm, a cancel stays until the next arm: a feed then
 *  returns EMBER_ERR_CANCELLED (the session as before), ember_generate returns EMBER_STOPPED before
 *  generating anything, and ember_generate_next returns EMBER_STOPPED without sampling (*out_token
 *  -1, no text), for every call until the session is armed again. So: arm, check your own
 *  cancellation, call; another thread cancels whenever it likes. Arming also clears a cancel that is
 *  pending. Call it on the thread that uses the session; ember_session_cancel stays callable from any
 *  thread and from signal handlers. A session stays in this mode once armed (forks start without it).
 *  NULL is a no-op. Since EMBER_1.4. */
EMBER_API void ember_session_cancel_arm(ember_session *session);

/** The logits (n_vocab floats) after the last fed token. The pointer is owned by the session and is
 *  valid until the next call that changes it (feed, truncate, generate). EMBER_ERR_INVALID_STATE
 *  before anything was fed or right after a truncate. */
EMBER_API ember_status ember_session_logits(const ember_session *session, const float **out_logits,
                                            size_t *out_n_vocab);

/** Number of tokens in the session (the position of the next token). */
EMBER_API ember_status ember_session_position(const ember_session *session, uint32_t *out_position);

/** The session's context length in tokens. */
EMBER_API ember_status ember_session_context_length(const ember_session *session, uint32_t *out_n_ctx);

/** Where the session runs: *out_backend receives its backend — the one EMBER_BACKEND_AUTO (or a device)
 *  chose, never AUTO itself — and *out_n_threads the CPU worker threads it started (n_threads as given,
 *  or ember_default_thread_count() for 0; 0 on a GPU backend). The CPU backend may use fewer of them
 *  while the machine is busy (ember_cpu_budget_set). Either out pointer may be NULL. Thread-safe; callable
 *  from a streaming callback. Errors: EMBER_ERR_INVALID_ARGUMENT (NULL session). Since EMBER_1.5. */
EMBER_API ember_status ember_session_backend(const ember_session *session, ember_backend_kind *out_backend,
                                             uint32_t *out_n_threads);

/** How a session's products with quantized weights (Q8_0, Q4_0, K-quants, ...) round the activations.
 *  Float weights (F32, F16, BF16) are unaffected by it. */
typedef enum ember_precision {
    /** 8-bit integers with a scale per block of 32 (per super-block of 256 for Q4_K weights, CPU) — as
     *  llama.cpp does (it takes 256 for every K-quant). The products are then integer dot
     *  products (AVX-512 VNNI, AMX): the fastest, and the rounding of the activations is the whole of the
     *  error against exact arithmetic on the file's weights (relative logit error ~0.6 % on small models),
     *  enough to flip the argmax where the two best tokens are within about that of each other. */
    EMBER_PRECISION_DEFAULT = 0,
    /** The remainder of that rounding is rounded and multiplied too (two 8-bit products per weight,
     *  about 15 bits of activation): logits 60-300 times closer to exact arithmetic on the file's
     *  weights. The weights are still read once, but the integer work doubles: measured on a 1.1B Q4_0
     *  model, prefill at 0.48x and decode at 0.74x the default's speed (docs/model-families.md). For
     *  evaluation, scoring and reproducing a reference. CPU backend only (Vulkan and CUDA:
     *  EMBER_ERR_UNSUPPORTED). */
    EMBER_PRECISION_HIGH = 1
} ember_precision;

/** Sets the precision of the session's passes from the next feed or generated token on (default
 *  EMBER_PRECISION_DEFAULT). The KV cache rows already computed stay as they were: set it before
 *  feeding the prompt to have every position computed this way. A fork starts with its parent's
 *  setting. Outputs at either setting are the same for any batch size (n_batch) and thread count.
 *  Errors: EMBER_ERR_INVALID_ARGUMENT (NULL session, unknown value), EMBER_ERR_UNSUPPORTED
 *  (EMBER_PRECISION_HIGH on a GPU backend); the setting is then unchanged. Same threading as the session
 *  (not from its streaming callback). Since EMBER_1.6. */
EMBER_API ember_status ember_session_set_precision(ember_session *session, ember_precision precision);

/** The CPU worker threads a session, engine or draft gets when its n_threads is 0: this machine's
 *  physical cores (SMT siblings not counted), at most 8. Thread-safe. Since EMBER_1.5. */
EMBER_API uint32_t ember_default_thread_count(void);

/** Rolls the session back to its first `n_tokens` tokens (KV cache included); n_tokens must be <= the
 *  position. Logits are invalid afterwards until the next feed.
 *  Cost: nothing for a model of attention layers. A model with recurrent layers (Qwen3.5, Qwen3-Next,
 *  LFM2, Granite 4 H) keeps one state per sequence, not one per position: it keeps the state at the start
 *  of the last feed (ember_session_feed, or the last step of generation), and a speculative verifying
 *  pass (ember_session_set_speculation) also keeps the state after each of its first
 *  EMBER_SESSION_KEPT_STATES tokens. Truncating to a position that has such a state takes it: nothing is
 *  re-evaluated (a speculative rollback within the default draft length). Otherwise it re-evaluates the
 *  tokens up to n_tokens from the latest of those states before n_tokens when n_tokens is not before the
 *  last feed's start, else all n_tokens from position 0, as costly as feeding them. If that re-evaluation
 *  fails the session is left at the position it re-evaluated from. */
EMBER_API ember_status ember_session_truncate(ember_session *session, uint32_t n_tokens);

/** The recurrent states a session of a model with recurrent layers keeps besides its current one and the
 *  one a feed writes (ember_session_truncate): a session holds 2 + EMBER_SESSION_KEPT_STATES states of
 *  ember_model_info.state_bytes_per_sequence bytes (each fork as many), on backends that keep them (the
 *  CPU, Vulkan and CUDA backends of this release). */
#define EMBER_SESSION_KEPT_STATES 4

/** Saves the session's state — its tokens, KV cache rows, recurrent state (models with recurrent layers)
 *  and last logits — in a versioned format with a
 *  checksum. Two-call idiom on buf/capacity; *out_len receives the size. Restoring it (into a session on
 *  the same model, possibly in another process) gives bit-identical logits to recomputing. */
EMBER_API ember_status ember_session_save(const ember_session *session, void *buf, size_t capacity, size_t *out_len);

/** Replaces the session's state by a saved one. The data is validated completely first: truncated or
 *  corrupted data, another format version or another model give EMBER_ERR_CORRUPT_DATA, a state longer
 *  than the session's context EMBER_ERR_CONTEXT_FULL, and a state of a LongRoPE model (Phi-3 128k) saved by a
 *  session on the other side of the model's original context (whose keys were rotated with the other set
 *  of rope factors) EMBER_ERR_INVALID_ARGUMENT; the session is unchanged then. "Another model" is
 *  told by a fingerprint of every weight (since ember 0.5; states saved by 0.4 and before, whose
 *  fingerprint covered only the shapes and the first embeddings, are refused, saying so). It is computed
 *  on the first save or restore of any session on a model, once: one read of the weights (about 3 to
 *  12 ms for stories15M's 25 MiB; docs/reliability.md). */
EMBER_API ember_status ember_session_restore(ember_session *session, const void *data, size_t size);

/** The same to and from a file (EMBER_ERR_IO when it cannot be written or read, or is not a regular
 *  file). Restoring reads the file's header first and reads the rest only when the header fits this
 *  session and the file's size, so a large or foreign file costs one small read. */
EMBER_API ember_status ember_session_save_file(const ember_session *session, const char *path);
EMBER_API ember_status ember_session_restore_file(ember_session *session, const char *path);

/* ---------------------------------------------------------------------------------------------------
 * Samplers
 *
 * A sampler turns logits into a token. The chain always runs in this order (a stage whose parameter
 * has its neutral value is skipped):
 *   1. penalties over the last `penalty_last_n` accepted tokens: repetition (divide positive logits,
 *      multiply negative ones, by repeat_penalty), then frequency (minus count * frequency_penalty) and
 *      presence (minus presence_penalty if seen);
 *   2. if temperature <= 0: greedy — the highest logit wins (ties: the lowest id); stages 3–6 skipped;
 *   3. top-k: keep the k highest logits;
 *   4. top-p: keep the smallest set whose probability reaches top_p;
 *   5. min-p: drop tokens whose probability is below min_p times the top token's;
 *   6. temperature: divide logits by it, softmax, draw with the sampler's own random generator
 *      (seeded by `seed`, so a fixed seed repeats its draws).
 * ------------------------------------------------------------------------------------------------- */

typedef struct ember_sampler ember_sampler;

typedef struct ember_sampler_params {
    uint32_t struct_size;
    float temperature;       /**< default 1.0; <= 0 means greedy */
    int32_t top_k;           /**< default 0 (off) */
    float top_p;             /**< default 1.0 (off) */
    float min_p;             /**< default 0.0 (off) */
    float repeat_penalty;    /**< default 1.0 (off) */
    float frequency_penalty; /**< default 0.0 (off) */
    float presence_penalty;  /**< default 0.0 (off) */
    int32_t penalty_last_n;  /**< default 64; tokens of history the penalties see */
    uint64_t seed;           /**< default 0: a fixed seed like any other (0 never means "random"), so
                              *   the same inputs sample the same text every run; pass a varying seed
                              *   (the clock, a random device) for different text each run */
    /* --- EMBER_1.4 (a caller built before passes struct_size 48 and gets the default) --- */
    /** Default 0 (off); up to 20: record, at every sample, the sampled token's log-probability and the
     *  n most probable tokens' (ember_sampler_logprobs, ember_request_logprobs). Log-probabilities are
     *  of the model's distribution: a log-softmax of the raw logits, before penalties and grammar (as
     *  OpenAI's `logprobs` report them). */
    int32_t n_logprobs;
} ember_sampler_params;

EMBER_API void ember_sampler_params_init(ember_sampler_params *params);

/** The sampling its authors chose for a model, where its GGUF file carries it (since EMBER_1.8): writes
 *  into *params the values of the metadata keys general.sampling.temp, .top_k, .top_p, .min_p,
 *  .penalty_repeat and .penalty_last_n that the file has (integers or floats), leaving the other fields
 *  as they are. Call it after ember_sampler_params_init and before setting what the application
 *  chooses itself, so the file's values apply where the application sets none. *out_count (may be
 *  NULL) receives how many keys were found. Errors: EMBER_ERR_INVALID_ARGUMENT (NULL; struct_size
 *  below the first version's), EMBER_ERR_INVALID_MODEL (such a key holds no number; named).
 *  Thread-safe (the model is only read). */
EMBER_API ember_status ember_sampler_params_from_model(const ember_model *model, ember_sampler_params *params,
                                                       size_t *out_count);

/** A bias added to one token's logit (an element of an array: no struct_size). EMBER_1.8. */
typedef struct ember_logit_bias {
    ember_token token;
    float bias;   /**< added after the penalties, before every other stage; <= -100 bans the token */
} ember_logit_bias;

/** Favours or bans tokens (OpenAI's logit_bias): from the next sample on, each token's logit gets its
 *  bias after the penalties and before top-k, top-p, min-p, temperature and the grammar; a bias of
 *  -100 or less bans the token (it is drawn only if every token allowed is banned). A token string
 *  (a word the game must never say) is its tokens: ember_tokenize it and ban each. Copies the array;
 *  n = 0 removes the bias. Log-probabilities stay those of the model (before the bias). Errors:
 *  EMBER_ERR_INVALID_ARGUMENT (NULL with n > 0, a negative token, a bias not finite; nothing changes;
 *  a token beyond the vocabulary fails the next sample), EMBER_ERR_INVALID_STATE from inside
 *  ember_generate's callback on this sampler. Same threading as the sampler. Since EMBER_1.8. */
EMBER_API ember_status ember_sampler_set_logit_bias(ember_sampler *sampler, const ember_logit_bias *bias, size_t n);

/** Creates a sampler. EMBER_ERR_INVALID_ARGUMENT for out-of-range values (negative top_k, top_p
 *  outside (0, 1], min_p outside [0, 1], repeat_penalty <= 0, negative penalty_last_n). */
EMBER_API ember_status ember_sampler_create(const ember_sampler_params *params, ember_sampler **out);
EMBER_API void ember_sampler_free(ember_sampler *sampler);

/** Samples a token from `logits` (n_vocab floats; not modified). Does not record it: call
 *  ember_sampler_accept for the token actually used, so penalties see it. */
EMBER_API ember_status ember_sampler_sample(ember_sampler *sampler, const float *logits, size_t n_vocab,
                                            ember_token *out_token);

/** Records a token in the sampler's penalty history. */
EMBER_API ember_status ember_sampler_accept(ember_sampler *sampler, ember_token token);

/** Clears the penalty history and re-seeds the random generator with the params' seed; an attached
 *  grammar starts again from its beginning. */
EMBER_API ember_status ember_sampler_reset(ember_sampler *sampler);

/** A token and its log-probability (natural log) under the model's distribution (EMBER_1.4). */
typedef struct ember_token_logprob {
    ember_token token;
    float logprob;
} ember_token_logprob;

/** The log-probabilities recorded by the last ember_sampler_sample (or generation step) of a sampler
 *  created with n_logprobs > 0 (EMBER_1.4): *sampled (may be NULL) receives the sampled token's,
 *  top[0 .. min(capacity, n)) the n_logprobs most probable tokens', best first, and *out_count (may be
 *  NULL) n. EMBER_ERR_INVALID_STATE when the sampler records none (n_logprobs 0, or nothing sampled yet).
 *  Valid until the sampler's next sample. Same threading as the sampler. */
EMBER_API ember_status ember_sampler_logprobs(const ember_sampler *sampler, ember_token_logprob *sampled,
                                              ember_token_logprob *top, size_t capacity, size_t *out_count);

/* ---------------------------------------------------------------------------------------------------
 * Grammars: structured output (since EMBER_1.4)
 *
 * A grammar constrains sampling to text it allows: at every step the tokens that cannot continue it are
 * masked out before the sampler's chain (so greedy picks the best allowed token, and sampling draws from
 * the allowed tokens' renormalized distribution), and end-of-generation tokens are allowed only where
 * the text is complete. Generated text therefore always matches the grammar (when generation ends by
 * end-of-generation, not by max_tokens or a full context). When no token can continue an incomplete
 * text, sampling fails with EMBER_ERR_GRAMMAR_DEAD_END, never hangs.
 *
 * A grammar is made from GBNF (llama.cpp's grammar syntax, so existing grammar files work: rules
 * `name ::= ...`, "literals", [classes], [^negated], `.`, groups, `*` `+` `?` `{m,n}`, `#` comments;
 * the rule `root` starts) or from a JSON Schema (the common subset: object properties/required, array
 * items/minItems/maxItems, enum, const, string minLength/maxLength/pattern (simple regexes),
 * integer/number bounds, anyOf/oneOf, $ref into $defs; the output is compact JSON in the order of
 * `properties`). It is bound to one model's vocabulary.
 *
 * Cost: the allowed tokens of each grammar state are computed once (a walk of a trie over the
 * vocabulary's token bytes) and cached in the grammar, so after the first generation through a state
 * a step costs little more than applying a bit mask; where a state allows few tokens (digits, an enum,
 * JSON punctuation) they are kept as a list and the sampler looks only at them. Greedy and top-k
 * sampling often need no mask at all (the best tokens' bytes are checked instead). Seeded sampling
 * draws the same tokens whether or not a state's mask was cached. A grammar may be shared by any number
 * of samplers and requests on any threads (its cache is locked internally).
 * ------------------------------------------------------------------------------------------------- */

typedef struct ember_grammar ember_grammar;

/** Compiles GBNF text (len bytes, need not be NUL-terminated) for `model`'s vocabulary. Errors:
 *  EMBER_ERR_INVALID_ARGUMENT for malformed text ("line L, column C: ..."), undefined or left-recursive
 *  rules, or a grammar beyond the size limits (1 MiB of text, 262144 symbols after expansion,
 *  repetition counts up to 4096, 128 nested parentheses); nesting of recursive rules beyond 256 open
 *  calls is not offered while matching, and a grammar so ambiguous that more than 1024 parses are alive
 *  at once, or whose matching would hold more than 128 MiB (ember_grammar_memory), fails sampling with
 *  EMBER_ERR_OUT_OF_MEMORY. Text that is not UTF-8 (overlong forms such as \xC0\xAF, surrogates) is
 *  malformed. len is checked before the text is read. The grammar keeps what it needs of the vocabulary: it does not
 *  refer to the model after this call and may outlive it. Thread-safe. */
EMBER_API ember_status ember_grammar_create_gbnf(const ember_model *model, const char *gbnf, size_t len,
                                                 ember_grammar **out);

/** Compiles a JSON Schema (JSON text, len bytes) for `model`'s vocabulary. Errors:
 *  EMBER_ERR_INVALID_ARGUMENT for malformed JSON (line and column) or schema (a JSON pointer),
 *  EMBER_ERR_UNSUPPORTED for a keyword outside the subset, named with its JSON pointer (e.g. "at
 *  '/properties/date/format': the keyword 'format' is not supported"). The schema `{"type": "object"}`
 *  gives any JSON object (OpenAI's response_format json_object). The schema is at most 1 MiB and nests
 *  at most 128 levels; translating it costs time and memory linear in its size, and the GBNF it makes
 *  is held to the GBNF limits above. Thread-safe. */
EMBER_API ember_status ember_grammar_create_json_schema(const ember_model *model, const char *schema, size_t len,
                                                        ember_grammar **out);

/** Releases the caller's reference; samplers and requests it is attached to keep theirs. NULL is fine. */
EMBER_API void ember_grammar_free(ember_grammar *grammar);

/** The bytes `grammar` holds now beside the vocabulary it shares: its automaton (built while matching)
 *  and its cache of token masks (EMBER_1.8). Both are bounded per grammar: whatever text is matched, a
 *  grammar holds at most 128 MiB (96 MiB of automaton, 32 MiB of masks); matching that would need more
 *  fails with EMBER_ERR_OUT_OF_MEMORY (that sampling step, or that engine request alone). An application
 *  that caches grammars (a server compiling each client's schema once) bounds its cache in bytes with
 *  this. Thread-safe. */
EMBER_API ember_status ember_grammar_memory(const ember_grammar *grammar, size_t *out_bytes);

/** Constrains `sampler` by `grammar` from its beginning (NULL: removes the constraint). The sampler
 *  takes its own reference (the grammar may be freed after). ember_sampler_accept then advances the
 *  grammar too, and fails with EMBER_ERR_INVALID_ARGUMENT (changing nothing) for a token the grammar
 *  does not allow; ember_sampler_sample and generation fail with EMBER_ERR_GRAMMAR_DEAD_END where no
 *  token is allowed. The logits passed must be of the grammar's model (EMBER_ERR_INVALID_ARGUMENT
 *  otherwise). With a grammar, ember_generate does not speculate. */
EMBER_API ember_status ember_sampler_set_grammar(ember_sampler *sampler, const ember_grammar *grammar);

/* ---------------------------------------------------------------------------------------------------
 * Generation
 * ------------------------------------------------------------------------------------------------- */

/** Pull one token: samples from the session's current logits, records it in the sampler, and (unless it
 *  ends generation) feeds it so the next logits are ready. One call does one decode step, so a game
 *  loop can call it once per frame. `out_text`/`out_text_len` (either may be NULL) receive the text
 *  this step completes: always whole UTF-8 characters — bytes of a character split across tokens are
 *  held back until it is complete. The text is owned by the session, valid until its next call.
 *  Returns EMBER_OK, or EMBER_END_OF_GENERATION when the sampled token ends generation (the token is
 *  still returned and not fed; the remaining held-back text, if any, is returned) or completes a stop
 *  string of ember_session_set_stop (since EMBER_1.5; the token is fed), or an error. */
EMBER_API ember_status ember_generate_next(ember_session *session, ember_sampler *sampler,
                                           ember_token *out_token, const char **out_text,
                                           size_t *out_text_len);

/** Stop strings for ember_generate_next (EMBER_1.5): up to 16 (each up to 1024 bytes, NUL-terminated;
 *  empty ones are ignored), copied; NULL/0 removes them. They work as ember_generate_params.stop does,
 *  across calls: once the text the steps complete contains one, that step returns
 *  EMBER_END_OF_GENERATION with the text before the stop string (the token that completed it is fed
 *  like any other, so it stays evaluated in the session, as with ember_generate). A step whose text ends
 *  with what could be the start of a stop string holds that text back (its out_text may be "") until a
 *  later step decides: the stop string completes (the held text is dropped) or it cannot (the held text
 *  comes out, before that step's own). An end-of-generation token releases what is held.
 *
 *  The match starts anew after a step that returned EMBER_END_OF_GENERATION (nothing is held then),
 *  and, dropping what is held, after this call and when the session is no longer where the last
 *  ember_generate_next left it (a feed, truncate, restore or ember_generate in between moved its
 *  position). ember_generate uses its own
 *  params' stop strings, not these; a fork does not inherit them. Errors: EMBER_ERR_INVALID_ARGUMENT
 *  (stop NULL with n_stop > 0, a NULL string, more or longer strings than allowed, a string that is not
 *  valid UTF-8; nothing changes),
 *  EMBER_ERR_INVALID_STATE from inside ember_generate's callback on the same session. Same threading as
 *  the session. */
EMBER_API ember_status ember_session_set_stop(ember_session *session, const char *const *stop, size_t n_stop);

/** Takes the text ember_generate_next holds back as a possible start of a stop string (EMBER_1.5): for
 *  a caller that ends generation itself (its own token limit) and wants the whole text. *out_text /
 *  *out_text_len (either may be NULL) receive it (possibly ""; owned by the session, valid until its
 *  next call), and the match starts anew. Same threading as the session. */
EMBER_API ember_status ember_session_flush_stop(ember_session *session, const char **out_text, size_t *out_text_len);

/** Streaming callback: one generated token and the text it completes (possibly empty; whole UTF-8
 *  characters only; valid during the call). Runs on the calling thread. Return false to stop.
 *
 *  Calls allowed from it: anything on other handles (another session, the model, another sampler), and
 *  on the session and sampler the running ember_generate uses only ember_session_cancel,
 *  ember_session_position, ember_session_context_length, ember_session_backend, ember_session_spec_stats,
 *  ember_session_free
 *  and ember_sampler_free. Each free stops the generation after this token and is done when
 *  ember_generate returns (which returns EMBER_STOPPED; do not use the freed handle after that). Every
 *  other call on those two handles (feed, generate, truncate, save, restore, fork, logits,
 *  set_speculation, sample, accept, reset) fails with EMBER_ERR_INVALID_STATE and changes nothing:
 *  they would change or free what the generation is using. Since EMBER_1.4 (before, such calls were
 *  undefined behaviour). */
typedef bool (*ember_token_fn)(ember_token token, const char *text, size_t text_len, void *user_data);

typedef struct ember_generate_params {
    uint32_t struct_size;
    uint32_t max_tokens;      /**< default 128; 0 means until end of generation or a full context */
    ember_token_fn on_token;  /**< may be NULL */
    void *user_data;
    /* --- EMBER_1.2 (a caller built against EMBER_1 passes struct_size 24 and gets the defaults) --- */
    /** Default true: speculate when speculation is attached to the session; false: plain decoding for
     *  this call, with the attached draft kept (it catches up on the next speculative call). */
    bool speculate;
    /* --- EMBER_1.4 (a caller built against EMBER_1.2 passes struct_size 32 and gets the defaults) --- */
    uint8_t reserved_1_4[7];  /**< keep 0: padding in EMBER_1.2's struct, never read */
    /** Default NULL. A grammar for this call only: the sampler is constrained by it from its beginning
     *  during the call (replacing, for the call, a grammar attached to the sampler). */
    const ember_grammar *grammar;
    /** Default NULL / 0. Up to 16 stop strings (each up to 1024 bytes, NUL-terminated): generation
     *  ends, returning EMBER_END_OF_GENERATION, once the text contains one of them, even across token
     *  boundaries. The stop text and anything after it is not passed to on_token: text that could be
     *  the start of a stop string is held back until the next token decides (so on_token may get ""
     *  for a token and more than its own text later). The tokens stay evaluated in the session. Stop
     *  strings match whole UTF-8 characters: one that is not valid UTF-8 (a lone continuation byte,
     *  half a character) is refused with EMBER_ERR_INVALID_ARGUMENT (since EMBER_1.8; before, it could
     *  end the text inside a character). */
    const char *const *stop;
    size_t n_stop;
} ember_generate_params;

EMBER_API void ember_generate_params_init(ember_generate_params *params);

/** Generates up to max_tokens with ember_generate_next (or speculatively, when speculation is attached
 *  to the session and params->speculate is set: same tokens, fewer passes), calling on_token for each. *out_count (may be
 *  NULL) receives the number of tokens generated. Returns EMBER_OK when max_tokens were generated,
 *  EMBER_END_OF_GENERATION (an end-of-generation token, or a stop string), EMBER_STOPPED (the callback
 *  returned false, or ember_session_cancel) or an error (including EMBER_ERR_CONTEXT_FULL when
 *  max_tokens is 0 and the context fills, and EMBER_ERR_GRAMMAR_DEAD_END). */
EMBER_API ember_status ember_generate(ember_session *session, ember_sampler *sampler,
                                      const ember_generate_params *params, size_t *out_count);


/* ---------------------------------------------------------------------------------------------------
 * Speculative decoding (since EMBER_1.1)
 *
 * A session with speculation attached generates (ember_generate) several tokens per forward pass of its
 * model, the target: a draft proposes k tokens — a smaller model with the same vocabulary, or, without
 * any model, the tokens that followed an earlier occurrence of the text's last few tokens (lookup
 * decoding: code being edited, a summary quoting its source) — and one target pass scores them all.
 * The acceptance rule keeps a prefix of the proposal plus one token of the target's own, so that the
 * output is distributed exactly as without speculation: greedy output is token for token the same, and
 * sampled output follows the same distribution, with the whole sampler chain applied alike to the
 * target's and the draft's logits. Rejected positions are rolled back (the target's cache ends as if
 * only the emitted tokens had been fed).
 *
 * ember_generate_next never speculates (one target pass per call is its point); ember_generate does
 * whenever speculation is attached, unless ember_generate_params.speculate is false (since EMBER_1.2:
 * speculation off for one call, the draft kept). Detaching (mode EMBER_SPEC_OFF) frees the draft's
 * session instead; attaching again rebuilds it.
 * ------------------------------------------------------------------------------------------------- */

typedef enum ember_spec_mode {
    EMBER_SPEC_OFF = 0,    /**< no speculation (detaches what was attached) */
    EMBER_SPEC_DRAFT = 1,  /**< a draft model proposes */
    EMBER_SPEC_LOOKUP = 2, /**< n-gram lookup in the session's own tokens proposes (no model) */
    /** EMBER_1.9: the session's model proposes with its own multi-token-prediction layers (a GGUF file's
     *  <arch>.nextn_predict_layers; Qwen3.5 / Qwen3.6 carry one): no second model. Its first such layer
     *  reads the model's final hidden state and the token just chosen, and is chained on its own output
     *  for k > 1. Errors: EMBER_ERR_INVALID_ARGUMENT when the model carries none (or this build cannot
     *  read them: the message says why), EMBER_ERR_UNSUPPORTED on a backend that does not run the layer
     *  (the CPU and Vulkan do). The layer's context covers what the session evaluates from the moment
     *  this is attached: attach it before feeding the prompt. Its drafts are checked against the tokens
     *  the sampler draws from the model's own distributions, in the order plain decoding draws them, so
     *  sampled output with a given seed is plain decoding's token for token (greedy too). */
    EMBER_SPEC_MTP = 3
} ember_spec_mode;

typedef struct ember_spec_params {
    uint32_t struct_size;
    ember_spec_mode mode;           /**< default EMBER_SPEC_OFF */
    /** EMBER_SPEC_DRAFT: the draft model (loaded with weights; must outlive the session). Its vocabulary
     *  must be the target's, token for token: otherwise EMBER_ERR_INVALID_ARGUMENT names the first
     *  difference. */
    const ember_model *draft_model;
    uint32_t k;                     /**< tokens proposed per target pass, 1..16 (default 4) */
    bool adaptive;                  /**< default true: each round picks k in 1..k_max for the most tokens
                                         per second, from the measured acceptance and costs */
    uint32_t k_max;                 /**< default 8 (adaptive only) */
    uint32_t ngram_max;             /**< EMBER_SPEC_LOOKUP: longest suffix matched, 1..16 (default 3) */
    uint32_t n_threads;             /**< the draft's CPU threads (default 0: as ember_session_params) */
} ember_spec_params;

EMBER_API void ember_spec_params_init(ember_spec_params *params);

/** Attaches speculation to a session (replacing what was attached), or detaches it (params NULL or
 *  mode EMBER_SPEC_OFF). A draft model gets a session of its own, with the target's context length.
 *  Errors: EMBER_ERR_INVALID_ARGUMENT (bad params, vocabulary mismatch, vocab-only draft), those of
 *  ember_session_create for the draft's session. A fork (ember_session_fork) starts without it. */
EMBER_API ember_status ember_session_set_speculation(ember_session *session, const ember_spec_params *params);

/** Counters since speculation was attached. */
typedef struct ember_spec_stats {
    uint32_t struct_size;
    uint32_t k;                 /**< the current draft length (adaptive mode moves it) */
    uint64_t drafted;           /**< tokens proposed */
    uint64_t accepted;          /**< of those, kept */
    uint64_t target_passes;     /**< forward passes of the target model */
    uint64_t generated;         /**< tokens generated */
    double acceptance_rate;     /**< accepted / drafted (0 when nothing was drafted) */
    double tokens_per_pass;     /**< generated / target_passes */
} ember_spec_stats;

EMBER_API void ember_spec_stats_init(ember_spec_stats *stats);
/** EMBER_ERR_INVALID_STATE when no speculation is attached. */
EMBER_API ember_status ember_session_spec_stats(const ember_session *session, ember_spec_stats *stats);

/* ---------------------------------------------------------------------------------------------------
 * Engine: many sequences on one model, batched continuously
 *
 * An engine owns one KV cache (a pool of fixed-size blocks) and, by default, a worker thread. Each step
 * the worker puts the next token of every generating request and chunks of pending prompts into one
 * forward pass, so the weights are read once for all of them. Requests are submitted, polled without
 * blocking, and cancelled at any time (also in the middle of a long prompt). Full blocks of evaluated
 * prompts stay cached after a request ends: a later request whose prompt starts with the same tokens
 * (a system prompt, an earlier chat turn) reuses them instead of recomputing them.
 *
 * Threads: every engine and request function may be called from any thread, concurrently. Callbacks
 * (ember_request_params.on_token) run on the engine's worker thread (or inside ember_engine_step).
 *
 * Failures: what fails for one request (its grammar's limits or dead end, its sampler, stop strings or
 * logprobs) ends that request alone, EMBER_REQUEST_FAILED with the status (ember_request_error); the
 * other requests of the step go on. Only a failure of the step itself (the forward pass) fails the
 * requests it carried.
 * ------------------------------------------------------------------------------------------------- */

typedef struct ember_engine ember_engine;
typedef struct ember_request ember_request;

typedef struct ember_engine_params {
    uint32_t struct_size;
    /** Longest sequence (prompt + generated) in tokens (default 0: the trained context, capped at 4096). */
    uint32_t n_ctx;
    /** Sequences that generate at the same time (default 8); more requests wait in a queue. */
    uint32_t n_seq_max;
    /** KV-cache budget in bytes (default 0: enough for n_seq_max sequences of n_ctx tokens). */
    uint64_t kv_bytes;
    /** Worker threads for the CPU backend (default 0: physical cores, at most 8). */
    uint32_t n_threads;
    /** Most tokens in one forward pass (default 256): bounds the latency a long prompt adds to a step. */
    uint32_t n_batch;
    /** Backend choice (default EMBER_BACKEND_AUTO). */
    ember_backend_kind backend;
    /** false (default): the engine runs its own worker thread. true: no thread; the caller advances the
     *  engine with ember_engine_step() (e.g. once per frame of a game loop). */
    bool manual_step;
    /* --- EMBER_1.1 (a caller built against EMBER_1 passes struct_size 40 and gets the defaults) --- */
    /** KV cache element type (default EMBER_KV_F16); kv_bytes then buys 1.88 (Q8_0) or 3.56 (Q4_0) times
     *  the tokens. */
    ember_kv_type kv_type;
    /* --- EMBER_1.4 (a caller built against EMBER_1.1 passes struct_size 48 and gets the default) --- */
    /** Keep 0 (what was padding in EMBER_1.1, named so that no later field lands in it). */
    uint32_t reserved;
    /** The device to run on, from ember_devices() (default NULL: the one `backend` chooses). When set,
     *  `backend` is ignored. */
    const ember_device *device;
    /* --- EMBER_1.9 (a caller built against EMBER_1.4 passes struct_size 56 and gets the defaults) --- */
    /** Placement across devices, as ember_session_params's (default EMBER_GPU_LAYERS_ALL, 0, 0). */
    int32_t gpu_layers;
    int32_t experts_on_cpu;
    uint64_t gpu_budget_bytes;
    /* --- EMBER_1.10 (a caller built against EMBER_1.9 passes struct_size 72 and gets the defaults) --- */
    /** Speculative decoding for the requests that ask for it (ember_request_params.speculate; see
     *  "Speculation in the engine" below). Default EMBER_SPEC_OFF. EMBER_SPEC_MTP: the model's own
     *  multi-token-prediction layers draft (EMBER_ERR_INVALID_ARGUMENT at create when the file carries
     *  none); EMBER_SPEC_LOOKUP: n-gram lookup in each request's own tokens; EMBER_SPEC_DRAFT:
     *  EMBER_ERR_UNSUPPORTED (an engine takes no draft model). */
    ember_spec_mode speculation;
    /** The most tokens a request drafts in a step, 1..8 (default 4); it drafts one more than its last
     *  step kept, so a draft that is seldom right costs one token a step. */
    uint32_t spec_k;
    /** EMBER_SPEC_LOOKUP: longest suffix matched, 1..16 (default 3). */
    uint32_t spec_ngram_max;
    /** Keep 0. */
    uint32_t reserved_1_10;
} ember_engine_params;

EMBER_API void ember_engine_params_init(ember_engine_params *params);

/** Creates an engine on `model`, which must outlive it. Allocates the whole KV cache up front.
 *  Errors: EMBER_ERR_INVALID_ARGUMENT (vocab-only model, bad params), EMBER_ERR_UNSUPPORTED (backend),
 *  EMBER_ERR_OUT_OF_MEMORY (on the CPU and CUDA backends also before allocating, when kv_bytes +
 *  compute_bytes of ember_estimate_memory exceed the memory the system, or the CUDA device, has
 *  available, both named in the message). */
EMBER_API ember_status ember_engine_create(const ember_model *model, const ember_engine_params *params,
                                           ember_engine **out);

/** Stops the worker and frees the engine. Requests still running are cancelled; their handles stay
 *  valid (polls report EMBER_REQUEST_CANCELLED) until ember_request_free. NULL is a no-op. */
EMBER_API void ember_engine_free(ember_engine *engine);

/** Manual mode only: runs one step (one forward pass over everything ready). *out_busy (may be NULL)
 *  says whether any request is still queued or running afterwards. EMBER_ERR_INVALID_STATE if the
 *  engine has a worker thread. */
EMBER_API ember_status ember_engine_step(ember_engine *engine, bool *out_busy);

/** A snapshot of an engine's load. */
typedef struct ember_engine_stats {
    uint32_t struct_size;
    uint32_t n_blocks;         /**< KV-cache blocks in all */
    uint32_t n_blocks_used;    /**< held by running requests or pinned prefixes */
    uint32_t n_blocks_cached;  /**< holding reusable prompt prefixes, evicted when blocks run short */
    uint32_t block_size;       /**< tokens per block */
    uint32_t n_running;        /**< requests evaluating or generating */
    uint32_t n_queued;         /**< requests waiting for a slot */
    uint64_t kv_bytes;         /**< bytes of the KV cache */
} ember_engine_stats;

EMBER_API void ember_engine_stats_init(ember_engine_stats *stats);
/** Fills *stats (struct_size set by ember_engine_stats_init). Taken between steps: never blocks on one
 *  for long. */
EMBER_API ember_status ember_engine_get_stats(ember_engine *engine, ember_engine_stats *stats);

/** What an engine with given params would take, computed by the code that sizes the real allocations
 *  (nothing is allocated). */
typedef struct ember_memory_estimate {
    uint32_t struct_size;
    uint64_t weights_bytes;  /**< tensor data; the CPU backend maps it from the file, or copies it into
                              *   transparent huge pages on the model's first CPU session or engine (see
                              *   ember_model_load: then the memory check counts it) */
    uint64_t kv_bytes;       /**< the KV cache, and for a model with recurrent layers (Qwen3.5) their
                              *   states: one per running sequence and as many prefix snapshots (with
                              *   speculation, EMBER_1.10, a second one per running sequence) */
    uint64_t compute_bytes;  /**< activations, scratch and logits (with EMBER_SPEC_MTP also the
                              *   multi-token-prediction layers' context and KV rows) */
    uint64_t total_bytes;    /**< the sum */
} ember_memory_estimate;

EMBER_API void ember_memory_estimate_init(ember_memory_estimate *estimate);

/** Estimates the memory of ember_engine_create(model, params). params may be NULL (defaults). */
EMBER_API ember_status ember_estimate_memory(const ember_model *model, const ember_engine_params *params,
                                             ember_memory_estimate *out);

/** The same for a model file not yet loaded (it is mapped and parsed, and released again). */
EMBER_API ember_status ember_estimate_memory_file(const char *path, const ember_engine_params *params,
                                                  ember_memory_estimate *out);

/** Evaluates `tokens` once and keeps their KV blocks resident until the engine is freed, so every
 *  request starting with them (a system prompt) skips that work and the blocks are never evicted.
 *  Blocks until done. Only whole blocks are kept: a tail shorter than a block is recomputed. Pins
 *  together may hold every block but one context's worth (ceil(n_ctx / block_size) + 1), so that a
 *  request always has room beside them: a pin beyond that fails with EMBER_ERR_OUT_OF_MEMORY, naming
 *  the blocks (since EMBER_1.8; before, pins could take the whole pool). */
EMBER_API ember_status ember_engine_pin_prefix(ember_engine *engine, const ember_token *tokens, size_t n_tokens);

/** Called on the engine's thread for each generated token with the text it completes (whole UTF-8
 *  characters only; valid during the call). Return false to cancel the request. It runs inside a step:
 *  it may poll, submit, cancel or free requests (its own included) and read the engine's stats, and
 *  should return quickly (every request waits for it). ember_engine_step and ember_engine_pin_prefix on
 *  the same engine fail there with EMBER_ERR_INVALID_STATE; ember_engine_free of it frees the engine
 *  when the running ember_engine_step returns (manual mode), and does nothing on the engine's own worker
 *  thread (ember_last_error says so). Since EMBER_1.4 (before, these were undefined behaviour). */
typedef bool (*ember_request_token_fn)(ember_request *request, ember_token token, const char *text,
                                       size_t text_len, void *user_data);

typedef struct ember_request_params {
    uint32_t struct_size;
    /** The prompt (copied at submit; at least one token). */
    const ember_token *prompt;
    size_t n_prompt;
    /** Tokens to generate at most (default 128; 0 means until end of generation or a full context). */
    uint32_t max_tokens;
    /** Sampling (NULL: greedy). Copied at submit. */
    const ember_sampler_params *sampling;
    /** Optional streaming callback and its user_data. */
    ember_request_token_fn on_token;
    void *user_data;
    /* --- EMBER_1.4 (a caller built before passes struct_size 56 and gets the defaults) --- */
    /** Default NULL. Constrains the request's sampling (see Grammars); the request takes its own
     *  reference. A dead end fails the request with EMBER_ERR_GRAMMAR_DEAD_END. */
    const ember_grammar *grammar;
    /** Default NULL / 0. Stop strings, copied at submit, as in ember_generate_params: the request
     *  ends (EMBER_REQUEST_DONE) once its text contains one; neither the text nor on_token get the
     *  stop text or anything after it. */
    const char *const *stop;
    size_t n_stop;
    /* --- EMBER_1.10 (a caller built against EMBER_1.4 passes struct_size 80 and gets the default) --- */
    /** Default true: the request drafts with its engine's speculation (ember_engine_params.speculation),
     *  if any; false: plain decoding. Its tokens are the same either way. */
    bool speculate;
} ember_request_params;

EMBER_API void ember_request_params_init(ember_request_params *params);

/** Queues a request. *out receives its handle, which the caller frees with ember_request_free (also
 *  after the engine is gone). Errors: EMBER_ERR_INVALID_ARGUMENT (empty prompt, token outside the
 *  vocabulary, prompt longer than n_ctx), EMBER_ERR_INVALID_STATE (engine shutting down). */
EMBER_API ember_status ember_request_submit(ember_engine *engine, const ember_request_params *params,
                                           ember_request **out);

typedef enum ember_request_state {
    EMBER_REQUEST_QUEUED = 0,    /**< waiting for a free slot */
    EMBER_REQUEST_RUNNING = 1,   /**< evaluating its prompt or generating */
    EMBER_REQUEST_DONE = 2,      /**< finished: end of generation, max_tokens, or a full context */
    EMBER_REQUEST_CANCELLED = 3, /**< cancelled by ember_request_cancel, a callback, or the engine's end */
    EMBER_REQUEST_FAILED = 4     /**< an error; ember_request_error() says which */
} ember_request_state;

/** Never blocks on the engine's work: copies the tokens generated since the previous poll (up to
 *  `capacity`; the rest stay for the next poll) and reports the request's state. tokens may be NULL
 *  with capacity 0 to read the state and the number of new tokens alone (*out_count) without
 *  consuming them. */
EMBER_API ember_status ember_request_poll(ember_request *request, ember_token *tokens, size_t capacity,
                                         size_t *out_count, ember_request_state *out_state);

/** The text generated so far (whole UTF-8 characters). Two-call idiom; *out_len excludes the NUL. */
EMBER_API ember_status ember_request_text(ember_request *request, char *buf, size_t capacity, size_t *out_len);

/** Blocks until the request is no longer queued or running, or timeout_ms passes (0: do not wait,
 *  UINT32_MAX: no limit). Returns EMBER_OK when it ended, EMBER_STOPPED on time-out. */
EMBER_API ember_status ember_request_wait(ember_request *request, uint32_t timeout_ms);

/** Cancels a request at the next step boundary (between prompt chunks too); its KV blocks are
 *  released. Cancelling an ended request does nothing. */
EMBER_API ember_status ember_request_cancel(ember_request *request);

/** Why a request failed: *out_status receives its error status (EMBER_OK if it has not failed) and
 *  *out_message (may be NULL) a message owned by the request, valid until it is freed. */
EMBER_API ember_status ember_request_error(ember_request *request, ember_status *out_status, const char **out_message);

/** The log-probabilities of the request's i-th generated token (0-based, in the order ember_request_poll
 *  returns tokens) when its sampling params set n_logprobs (EMBER_1.4), as ember_sampler_logprobs gives
 *  them. EMBER_ERR_NOT_FOUND while token i is not generated; EMBER_ERR_INVALID_STATE when n_logprobs
 *  was 0. Thread-safe, like ember_request_poll. */
EMBER_API ember_status ember_request_logprobs(ember_request *request, size_t i, ember_token_logprob *sampled,
                                              ember_token_logprob *top, size_t capacity, size_t *out_count);

/** Cancels the request if it still runs and frees the handle. NULL is a no-op. */
EMBER_API void ember_request_free(ember_request *request);

/* Speculation in the engine (EMBER_1.10). With ember_engine_params.speculation set, each step a request
 * that speculates proposes up to spec_k tokens after its last one (the model's multi-token-prediction
 * layers, or n-gram lookup in its own tokens), and the step's one forward pass evaluates them beside the
 * other requests' work, with logits for each. The request's sampler then draws from those rows exactly
 * as plain decoding draws (the same random numbers, in the same order) and keeps each draft its draw
 * agrees with; the first draw that differs is the request's next token. So a request's tokens are those
 * it gets without speculation, greedy or sampled with a seed, grammar and logprobs included; speculation
 * changes only how many tokens a step yields. Rejected drafts are rolled back (their KV rows forgotten);
 * on a model with recurrent layers (Qwen3.5) the request's state before the drafts is kept, and the
 * tokens accepted before a rejection are evaluated again in its next step (which drafts nothing). */

/** A request's counters, read at any time (like ember_request_poll, never blocking on a step). */
typedef struct ember_request_stats {
    uint32_t struct_size;
    uint32_t reserved;          /**< 0 */
    uint64_t n_tokens;          /**< tokens generated so far (those ember_request_poll returns) */
    uint64_t decode_steps;      /**< engine steps whose forward pass evaluated its generated tokens */
    uint64_t drafted;           /**< tokens it drafted (0 without speculation) */
    uint64_t accepted;          /**< of those, kept */
    double acceptance_rate;     /**< accepted / drafted (0 when nothing was drafted) */
} ember_request_stats;

EMBER_API void ember_request_stats_init(ember_request_stats *stats);
/** Fills *stats (struct_size set by ember_request_stats_init). Also after the request ended. */
EMBER_API ember_status ember_request_get_stats(ember_request *request, ember_request_stats *stats);

/* ---------------------------------------------------------------------------------------------------
 * Backend devices (since EMBER_1.2)
 *
 * GPU backends are modules loaded at run time (libember-vulkan.so beside libember, or in
 * $EMBER_BACKEND_DIR). EMBER_BACKEND_AUTO prefers a GPU device, never a CPU-type Vulkan device (lavapipe)
 * over the CPU backend, and falls back to the CPU backend (with a log line saying why) where a module,
 * its API's loader or a device is missing; an explicit backend there fails with EMBER_ERR_UNSUPPORTED
 * and the reason.
 * ------------------------------------------------------------------------------------------------- */

/** One device of a backend. */
typedef struct ember_device_info {
    uint32_t struct_size;
    /** Index to pass as ember_vulkan_device_params.device_index. */
    uint32_t index;
    /** The driver's name for it ("NVIDIA GeForce RTX 4090", "llvmpipe (LLVM 15.0.6, 256 bits)"). */
    char name[128];
    /** VkPhysicalDeviceType for Vulkan: 1 integrated, 2 discrete, 3 virtual, 4 CPU, 0 other. */
    uint32_t type;
    /** How AUTO ranks it (the CPU backend scores 1; ties go to the CPU backend); 0: unusable. */
    int32_t score;
} ember_device_info;

EMBER_API void ember_device_info_init(ember_device_info *info);

/** Lists the devices of a GPU backend (EMBER_BACKEND_VULKAN) into out[0 .. capacity) (each entry's
 *  struct_size set by ember_device_info_init; out may be NULL with capacity 0) and sets *out_count to
 *  the number of devices. EMBER_ERR_UNSUPPORTED, with the reason, where the backend's module or loader
 *  is missing or it has no device; EMBER_ERR_INVALID_ARGUMENT for the CPU or AUTO. Thread-safe. */
EMBER_API ember_status ember_backend_devices(ember_backend_kind backend, ember_device_info *out, size_t capacity,
                                             size_t *out_count);

/** Lists the devices of every backend that can run here, the CPU's first, then each GPU backend's in
 *  its own order (skipping a backend whose module, loader or devices are missing), into out[0 ..
 *  capacity) (out may be NULL with capacity 0) and sets *out_count to their number. The list and its
 *  handles are made once per process; later calls return the same handles. Thread-safe.
 *
 *  Pass a handle as ember_session_params.device or ember_engine_params.device to run there. A GPU
 *  backend opens one device per process (it compiles its pipelines there, and models are loaded onto it
 *  once): choosing one of its devices before it is open selects it, as ember_vulkan_set_device /
 *  ember_cuda_set_device do; choosing another one while one is open fails with
 *  EMBER_ERR_INVALID_STATE naming the open one. */
EMBER_API ember_status ember_devices(const ember_device **out, size_t capacity, size_t *out_count);

/** The device's description (info->struct_size set by ember_device_info_init; index is the device's
 *  index within its backend, as in ember_backend_devices) and its backend. Either out pointer may be
 *  NULL. Errors: EMBER_ERR_INVALID_ARGUMENT (NULL device). */
EMBER_API ember_status ember_device_get_info(const ember_device *device, ember_device_info *info,
                                             ember_backend_kind *out_backend);

/** The device the session runs on, as a handle of ember_devices() (pass it to ember_device_get_info for
 *  its backend and name): the CPU's on the CPU backend, else the device its GPU backend opened — the one
 *  chosen by a device handle, ember_vulkan_set_device / ember_cuda_set_device, $EMBER_VULKAN_DEVICE /
 *  $EMBER_CUDA_DEVICE, or else the best-scoring one. *out_device is NULL where the session runs on the
 *  application's own Vulkan device (ember_vulkan_set_device with handles), which ember_devices() does not
 *  list. Thread-safe; callable from a streaming callback. Errors: EMBER_ERR_INVALID_ARGUMENT (NULL
 *  session or out_device). Since EMBER_1.7. */
EMBER_API ember_status ember_session_device(const ember_session *session, const ember_device **out_device);

/** The device the engine runs on, as ember_session_device says it for a session. Thread-safe. Errors:
 *  EMBER_ERR_INVALID_ARGUMENT (NULL engine or out_device). Since EMBER_1.7. */
EMBER_API ember_status ember_engine_device(const ember_engine *engine, const ember_device **out_device);

/** Which device the Vulkan backend runs on. Either an index into ember_backend_devices' list, or the
 *  application's own Vulkan objects, so that ember shares its device and queue: then all of instance,
 *  physical_device, device and queue are set (VkInstance, VkPhysicalDevice, VkDevice, VkQueue cast to
 *  void *), the device was created with Vulkan 1.1 or later and the queue supports compute. Ember creates
 *  no instance or device then and destroys none; the objects must outlive every model and session on
 *  the Vulkan backend, and the application must not submit to that queue from another thread while ember
 *  runs a pass (Vulkan queues are externally synchronized). */
typedef struct ember_vulkan_device_params {
    uint32_t struct_size;
    /** Device index (default -1: the best-scoring device). Ignored when the handles are set. */
    int32_t device_index;
    void *instance;         /**< VkInstance (default NULL) */
    void *physical_device;  /**< VkPhysicalDevice */
    void *device;           /**< VkDevice */
    void *queue;            /**< VkQueue */
    uint32_t queue_family;  /**< the queue's family index */
} ember_vulkan_device_params;

EMBER_API void ember_vulkan_device_params_init(ember_vulkan_device_params *params);

/** Chooses the device of the Vulkan backend for this process. Call it before the first model is loaded
 *  onto Vulkan (a session or engine created with EMBER_BACKEND_VULKAN): the device is opened then; a
 *  call while it is open fails with EMBER_ERR_INVALID_STATE. Ember's own device stays open for the
 *  process's life; on the application's device, ember's objects (pipelines, buffers, pools) are all
 *  destroyed when the last model that used it is freed, after which the application may destroy its
 *  device (or choose another one). Without a call, $EMBER_VULKAN_DEVICE (an
 *  index) or the best device is used. Errors: EMBER_ERR_UNSUPPORTED (no Vulkan backend here, with the
 *  reason), EMBER_ERR_INVALID_ARGUMENT (some but not all handles set). Thread-safe. */
EMBER_API ember_status ember_vulkan_set_device(const ember_vulkan_device_params *params);

/** Which device and stream the CUDA backend runs on: a device ordinal (an index into
 *  ember_backend_devices' list for EMBER_BACKEND_CUDA) and optionally the application's own stream,
 *  so that ember's work is ordered with the application's (a game engine's renderer, say). */
typedef struct ember_cuda_device_params {
    uint32_t struct_size;
    /** CUDA device ordinal (default -1: the best-scoring device). */
    int32_t device_index;
    /** A cudaStream_t of the application on that device, cast to void * (default NULL: ember creates
     *  its own). Ember enqueues every pass on it and waits only for its own work's results; the stream
     *  must outlive every model and session on the CUDA backend. */
    void *stream;
} ember_cuda_device_params;

EMBER_API void ember_cuda_device_params_init(ember_cuda_device_params *params);

/** Chooses the CUDA backend's device and stream for this process, before the first model is loaded onto
 *  CUDA (later: EMBER_ERR_INVALID_STATE). Without a call, $EMBER_CUDA_DEVICE (an ordinal) or the best
 *  device is used. Errors: EMBER_ERR_UNSUPPORTED (no CUDA backend, driver or device here, with the
 *  reason). Thread-safe. Since EMBER_1.2. */
EMBER_API ember_status ember_cuda_set_device(const ember_cuda_device_params *params);

/* ---------------------------------------------------------------------------------------------------
 * Chat templates (since EMBER_1.3)
 *
 * A chat model expects its conversation in the exact text format it was trained on. GGUF files carry
 * that format as a Jinja template (metadata `tokenizer.chat_template`, copied from the model's
 * tokenizer_config.json). ember renders it with its own Jinja engine, with the variables Hugging Face's
 * transformers passes: `messages` (a list of {role, content} dicts), `add_generation_prompt`,
 * `bos_token` and `eos_token` (the model's BOS and EOS tokens as text, "" when the model has none);
 * `tools` and `documents` are none (as transformers passes them for a conversation without tools).
 * Whitespace follows transformers' settings (trim_blocks and lstrip_blocks on).
 *
 * The Jinja subset (docs/chat.md has the full list): `{{ }}`, `{% %}`, `{# #}` with `-`/`+` whitespace
 * control; if/elif/else; for (with `loop.index`, `index0`, `revindex`, `first`, `last`, `length`,
 * `previtem`, `nextitem`, `cycle`; an `if` filter; `else`; break/continue); set (also `set ns.x = ...`
 * on a namespace(), tuple targets and `{% set x %}...{% endset %}`); macro; literals (strings, numbers,
 * true/false/none in either case, lists, dicts); `and or not`, comparisons, `in`, `not in`, `~`,
 * `+ - * / // % **`, `x if c else y`, attribute, item and slice access; the tests defined, undefined,
 * none, string, number, integer, float, boolean, true, false, mapping, iterable, sequence, callable,
 * even, odd, divisibleby, eq/ne/lt/le/gt/ge, in, sameas; the filters trim, length/count, upper, lower,
 * capitalize, title, replace, default/d, join, first, last, tojson (as transformers defines it:
 * non-ASCII kept, `indent` honoured), string, int, float, list, items, select, reject, selectattr,
 * rejectattr, map, reverse, abs, indent, safe, escape; the string methods strip, lstrip, rstrip,
 * startswith, endswith, split, upper, lower, title, capitalize, replace, find, count, join; the dict
 * methods items, keys, values, get; and the functions raise_exception(msg), namespace(...), range(...),
 * dict(...) and strftime_now(format) (the local time, as transformers provides it). Values behave as in Python (None prints "None"; strings count code points; upper/lower
 * change ASCII letters only).
 * ------------------------------------------------------------------------------------------------- */

/** One message of a conversation (an element of an array, so no struct_size: a later version would add a new type). */
typedef struct ember_chat_message {
    const char *role;     /**< "system", "user", "assistant", ... */
    const char *content;  /**< UTF-8 text */
} ember_chat_message;

/** Renders a conversation to the prompt text the model expects.
 *
 *  tmpl: the Jinja template text, or NULL for the model's own (`tokenizer.chat_template`); a model
 *  without one (or with an empty one) gets ChatML:
 *  "<|im_start|>{role}\n{content}<|im_end|>\n" per message, then "<|im_start|>assistant\n" when
 *  add_generation_prompt is true. model may be NULL only when tmpl is given (bos_token and eos_token are
 *  then ""). messages may be NULL when n_messages is 0; no role or content may be NULL.
 *  add_generation_prompt: end with the text that opens the assistant's reply, so that generation writes
 *  it.
 *
 *  Output: two-call idiom on buf/capacity; the text is NUL-terminated and *out_len excludes the NUL (the
 *  buffer needs *out_len + 1 bytes). Each call renders anew, so keep the conversation unchanged between
 *  the two calls.
 *
 *  Tokenizing the result: the text contains the template's special tokens as text, usually starting
 *  with the BOS text ("<s>", "<|begin_of_text|>"). Tokenize it with EMBER_TOKENIZE_PARSE_SPECIAL, so that
 *  this text becomes the special tokens, and without EMBER_TOKENIZE_ADD_SPECIAL, which would add a
 *  second BOS before the template's own. (A template that writes no BOS text, such as ChatML, is the
 *  exception: there EMBER_TOKENIZE_ADD_SPECIAL adds BOS where the model's metadata asks for one.) With
 *  SentencePiece models, text after a special token gets the leading space the tokenizer puts at the
 *  start of text ("<s>[INST]" gives <s> "▁[" "INST" "]"), as transformers' tokenizers do. Messages from
 *  untrusted users can contain such special-token text too: where that matters, check the contents
 *  before rendering.
 *
 *  Errors: EMBER_ERR_INVALID_ARGUMENT: a NULL argument (named), a template syntax error (with
 *  line:column), a failure while rendering (a type error, an undefined value used, or a runaway
 *  template passing a limit: a string or the output over 64 MiB, a list over 2^20 items, 2*10^7 steps,
 *  2 s of rendering, 256 MiB of memory (the parsed template and every value built, counted in all;
 *  these two are changed by the environment variables EMBER_CHAT_TIME_LIMIT_MS, 0 for none, and
 *  EMBER_CHAT_MEMORY_LIMIT_MB, read at each call),
 *  macro calls 50 deep, nesting; all with the template line), a template over 1 MiB, a string escape
 *  of a surrogate ('\ud800', which has no UTF-8 form), or the
 *  template's raise_exception(msg), whose message is in ember_last_error() (e.g. a template refusing
 *  a conversation whose roles do not alternate);
 *  EMBER_ERR_UNSUPPORTED: a Jinja construct outside the subset above, named with its line;
 *  EMBER_ERR_INVALID_MODEL: the model's tokenizer.chat_template is not a string;
 *  EMBER_ERR_BUFFER_TOO_SMALL (the size is still reported); EMBER_ERR_OUT_OF_MEMORY.
 *
 *  Threads: the model is immutable, so any number of threads may render with it at once. */
EMBER_API ember_status ember_chat_apply_template(const ember_model *model, const char *tmpl,
                                                 const ember_chat_message *messages, size_t n_messages,
                                                 bool add_generation_prompt, char *buf, size_t capacity,
                                                 size_t *out_len);

/* ---------------------------------------------------------------------------------------------------
 * CPU budget (since EMBER_1.4)
 *
 * An application that shares the CPU (a game rendering, an editor indexing) says how much of it ember
 * may take. Each session's CPU threads (ember_session_params.n_threads, default: the physical cores, at
 * most 8) are the most it uses; by default it measures, while it runs, how much its extra threads speed
 * up each pass and uses fewer while the machine is busy (threads descheduled by other processes make a
 * pass wait), trying more again from time to time. The budget caps that and says how eagerly to yield.
 * ------------------------------------------------------------------------------------------------- */

/** How ember's CPU threads treat cores they are not using right now. Values are stable. */
typedef enum ember_cpu_priority {
    /** Idle worker threads spin for ~0.2 ms after a pass before they sleep (the default): lowest latency
     *  when passes follow each other, which decode's do. */
    EMBER_CPU_PRIORITY_NORMAL = 0,
    /** Background work: idle workers sleep at once and a thread waiting for another sleeps too, so ember
     *  never holds a core it is not computing on (a few percent slower on a quiet machine). */
    EMBER_CPU_PRIORITY_LOW = 1,
    /** Latency first: idle workers spin 4x longer before they sleep. */
    EMBER_CPU_PRIORITY_HIGH = 2
} ember_cpu_priority;

/** ember_cpu_budget.flags: always use the thread count given (the budget's, else the session's), never
 *  fewer; turns off the measurement described above (for benchmarks of a fixed thread count). */
#define EMBER_CPU_BUDGET_FIXED_THREADS (1u << 0)

typedef struct ember_cpu_budget {
    uint32_t struct_size;
    /** The most threads (the calling thread included) each session or engine computes with at once
     *  (default 0: no cap beyond its own n_threads). Lowering it takes effect at the next pass; raising
     *  it above a session's n_threads has no effect (its workers are started at creation). */
    uint32_t max_threads;
    /** An ember_cpu_priority (default EMBER_CPU_PRIORITY_NORMAL). */
    int32_t priority;
    /** EMBER_CPU_BUDGET_* flags (default 0). */
    uint32_t flags;
} ember_cpu_budget;

/** Fills *budget with the defaults (no cap, normal priority, adaptive thread count). NULL is ignored. */
EMBER_API void ember_cpu_budget_init(ember_cpu_budget *budget);

/** Sets the process-wide CPU budget for every session and engine on the CPU backend, existing ones
 *  included, from their next pass on. NULL restores the defaults. Errors: EMBER_ERR_INVALID_ARGUMENT (a
 *  priority or flag that is not defined above, or a struct_size below this struct's first version).
 *  Thread-safe; may be called at any time, also while passes run on other threads. Since EMBER_1.4. */
EMBER_API ember_status ember_cpu_budget_set(const ember_cpu_budget *budget);

/** Writes the process-wide CPU budget into *budget (its struct_size set by ember_cpu_budget_init; an
 *  older, smaller struct gets the fields it has). Errors: EMBER_ERR_INVALID_ARGUMENT (NULL). Thread-safe.
 *  Since EMBER_1.4. */
EMBER_API ember_status ember_cpu_budget_get(ember_cpu_budget *budget);

/* ---------------------------------------------------------------------------------------------------
 * Tool calls and reasoning (since EMBER_1.8)
 *
 * An application that lets a model act gives it tools (functions with JSON Schema arguments), renders
 * them into the prompt the way the model's family expects (ember_chat_apply_template_v2), optionally
 * constrains generation so that calls always parse (ember_chat_tool_grammar), and splits the output
 * into content for the user, reasoning kept apart, and calls (ember_chat_parser). docs/tools.md shows
 * the whole loop.
 *
 * Families (ember_chat_format), chosen from the chat template's markers unless the app names one:
 * Hermes (Qwen2.5, Qwen3, Qwen3.5: `<tool_call>{"name", "arguments"}</tool_call>`, or the XML body
 * `<function=NAME><parameter=P>...`, reasoning in `<think>`), Llama 3.x (a `{"name", "parameters"}`
 * object, or `<|python_tag|>` before it), Mistral (`[TOOL_CALLS]` then a JSON array, or
 * `NAME[ARGS]{...}`), gpt-oss (harmony channels: analysis is reasoning, `commentary to=functions.NAME`
 * a call, final and plain commentary content), Granite 3.x (`<|tool_call|>[...]`) and Phi-4-mini
 * (`<|tool_call|>[...]<|/tool_call|>`). Text with special tokens: the output parsed must carry the
 * model's special tokens as text (detokenize with EMBER_DETOKENIZE_RENDER_SPECIAL, or the tokens' pieces
 * rendered with special tokens).
 * ------------------------------------------------------------------------------------------------- */

/** A tool the model may call (an element of an array: no struct_size). */
typedef struct ember_chat_tool {
    const char *name;         /**< 1 to 64 characters of [A-Za-z0-9_.-], unique among the tools */
    const char *description;  /**< may be NULL */
    /** JSON Schema of the arguments object (the subset of ember_grammar_create_json_schema), or NULL for
     *  no arguments ({"type": "object", "properties": {}}). */
    const char *parameters;
} ember_chat_tool;

/** One call: by a model (ember_chat_parser_call) or in a conversation's assistant message. */
typedef struct ember_chat_tool_call {
    const char *id;         /**< may be NULL in messages (the template then writes none) */
    const char *name;
    const char *arguments;  /**< JSON text of an object */
} ember_chat_tool_call;

/** A message with what tool use adds (an element of an array: no struct_size). Rendered as
 *  transformers' apply_chat_template receives messages: keys a message lacks are absent for the
 *  template. */
typedef struct ember_chat_turn {
    const char *role;               /**< "system", "user", "assistant", "tool" */
    const char *content;            /**< may be NULL (rendered as ""), e.g. an assistant message of calls */
    const char *reasoning_content;  /**< may be NULL: the assistant's reasoning, for templates that keep it */
    const ember_chat_tool_call *tool_calls;  /**< the assistant's calls; NULL when n_tool_calls is 0 */
    size_t n_tool_calls;
    const char *tool_call_id;       /**< role "tool": the id of the call answered; may be NULL */
    const char *name;               /**< role "tool": the tool's name; may be NULL */
} ember_chat_turn;

/** The reasoning switch (`enable_thinking` for the template, where its family has one). */
typedef enum ember_reasoning {
    EMBER_REASONING_DEFAULT = 0,  /**< enable_thinking left undefined: the template's own default */
    EMBER_REASONING_OFF = 1,
    EMBER_REASONING_ON = 2,
} ember_reasoning;

typedef struct ember_chat_params {
    uint32_t struct_size;
    const char *tmpl;                /**< default NULL: the model's template (as ember_chat_apply_template) */
    const ember_chat_turn *messages; /**< may be NULL when n_messages is 0 */
    size_t n_messages;
    const ember_chat_tool *tools;    /**< default NULL / 0: `tools` is none for the template */
    size_t n_tools;
    bool add_generation_prompt;      /**< default true */
    ember_reasoning reasoning;       /**< default EMBER_REASONING_DEFAULT */
    /** Default NULL. More tools as JSON text, as OpenAI's API and Hugging Face take them: an array of
     *  {"type": "function", "function": {"name", "description", "parameters"}} or of the inner objects
     *  (for bindings and tools that hold tools as JSON); they follow `tools`. */
    const char *tools_json;
} ember_chat_params;

EMBER_API void ember_chat_params_init(ember_chat_params *params);

/** ember_chat_apply_template with tools, tool calls, tool results and the reasoning switch. The
 *  template receives `tools` as [{"type": "function", "function": {"name", "description",
 *  "parameters"}}] (none without tools), assistant calls as `tool_calls`: [{"id", "type": "function",
 *  "function": {"name", "arguments"}}] with arguments a dict, tool messages' `tool_call_id` and `name`,
 *  `reasoning_content`, and `enable_thinking` unless reasoning is DEFAULT. Output and limits as
 *  ember_chat_apply_template. Errors, besides that function's: EMBER_ERR_INVALID_ARGUMENT for a bad tool
 *  (name empty, too long, of other characters or a duplicate; parameters not a JSON object schema, or a
 *  schema that cannot be compiled, named with the tool) or a call's arguments that are not a JSON
 *  object; EMBER_ERR_UNSUPPORTED when tools are given and the template has no tool support (it never
 *  reads `tools`), or for a schema keyword outside the subset. Thread-safe (the model is only read). */
EMBER_API ember_status ember_chat_apply_template_v2(const ember_model *model, const ember_chat_params *params,
                                                    char *buf, size_t capacity, size_t *out_len);

/** How a family writes calls and reasoning (values are stable). */
typedef enum ember_chat_format {
    EMBER_CHAT_FORMAT_AUTO = 0,     /**< chosen from the chat template (ember_chat_format_detect) */
    EMBER_CHAT_FORMAT_CONTENT = 1,  /**< no calls; a leading <think> block is reasoning */
    EMBER_CHAT_FORMAT_HERMES = 2,
    EMBER_CHAT_FORMAT_LLAMA3 = 3,
    EMBER_CHAT_FORMAT_MISTRAL = 4,
    EMBER_CHAT_FORMAT_GPT_OSS = 5,
    EMBER_CHAT_FORMAT_GRANITE = 6,
    EMBER_CHAT_FORMAT_PHI4 = 7,
} ember_chat_format;

/** The format of `tmpl` (NULL: the model's template; model may be NULL when tmpl is given), by the
 *  markers it writes; EMBER_CHAT_FORMAT_CONTENT when it writes none. Thread-safe. */
EMBER_API ember_status ember_chat_format_detect(const ember_model *model, const char *tmpl, ember_chat_format *out);

/** "hermes", "llama3", ...; "unknown" for a value outside the enum. */
EMBER_API const char *ember_chat_format_name(ember_chat_format format);

typedef struct ember_chat_parser ember_chat_parser;

typedef struct ember_chat_parser_params {
    uint32_t struct_size;
    ember_chat_format format;      /**< default AUTO: detected from tmpl or the model's template */
    const char *tmpl;              /**< default NULL */
    /** Default false: true when the prompt ended inside the reasoning block (a template whose generation
     *  prompt ends with "<think>\n"), so the text starts with reasoning. */
    bool reasoning_open;
    /** Default NULL / 0. When given, only calls to these tools are calls: a call naming another is
     *  malformed (kept as content). Only the names are read; they are copied. */
    const ember_chat_tool *tools;
    size_t n_tools;
} ember_chat_parser_params;

EMBER_API void ember_chat_parser_params_init(ember_chat_parser_params *params);

/** Creates a parser for one reply. model may be NULL when the format is given or tmpl is. Errors:
 *  EMBER_ERR_INVALID_ARGUMENT (NULL out, a format outside the enum, no model nor tmpl for AUTO). */
EMBER_API ember_status ember_chat_parser_create(const ember_model *model, const ember_chat_parser_params *params,
                                                ember_chat_parser **out);
EMBER_API void ember_chat_parser_free(ember_chat_parser *parser);

/** Adds len bytes of the reply (any split: a token's text, one byte). Text that may still become part
 *  of a call (a possible start of an opener, an unfinished call) is held until later bytes decide.
 *  EMBER_ERR_INVALID_STATE after ember_chat_parser_finish. */
EMBER_API ember_status ember_chat_parser_feed(ember_chat_parser *parser, const char *text, size_t len);

/** Ends the reply: held text is decided; an unfinished or unparsable call becomes content and sets
 *  `malformed`. Calling it again does nothing. */
EMBER_API ember_status ember_chat_parser_finish(ember_chat_parser *parser);

/** What a parser has produced: content and reasoning text (not NUL-terminated; pointers valid until the
 *  next call on the parser), calls [first_call, first_call + n_calls) (ember_chat_parser_call) and
 *  whether some text that opened a call did not parse as one. */
typedef struct ember_chat_delta {
    uint32_t struct_size;
    const char *content;
    size_t content_len;
    const char *reasoning;
    size_t reasoning_len;
    size_t first_call;
    size_t n_calls;
    bool malformed;
} ember_chat_delta;

EMBER_API void ember_chat_delta_init(ember_chat_delta *delta);

/** What became certain since the last take (streaming): content never holds part of a call, and a call
 *  appears once complete. The takes in order add up to the result. */
EMBER_API ember_status ember_chat_parser_take(ember_chat_parser *parser, ember_chat_delta *out);

/** Everything so far: all content, all reasoning, calls [0, n). */
EMBER_API ember_status ember_chat_parser_result(const ember_chat_parser *parser, ember_chat_delta *out);

/** Call i: its id (the model's, or 9 letters and digits derived from the call), name and arguments
 *  (compact JSON of an object), NUL-terminated, valid until the next feed or finish. Errors:
 *  EMBER_ERR_INVALID_ARGUMENT for i out of range. */
EMBER_API ember_status ember_chat_parser_call(const ember_chat_parser *parser, size_t i, ember_chat_tool_call *out);

/** Feeds `parser` the text `request` (ember_request_submit) has produced since the last call, and
 *  finishes the parser once the request has ended: one parser per request, called from the thread that
 *  polls it (once a frame, say), so that an engine's replies arrive as content, reasoning and calls
 *  (ember_chat_parser_take). *out_state (may be NULL) receives the request's state. Errors:
 *  EMBER_ERR_INVALID_ARGUMENT (NULL). Same threading as ember_request_text. */
EMBER_API ember_status ember_chat_parser_feed_request(ember_chat_parser *parser, ember_request *request,
                                                      ember_request_state *out_state);

/** OpenAI's tool_choice. */
typedef enum ember_tool_choice {
    EMBER_TOOL_CHOICE_AUTO = 0,      /**< text or calls, as the model decides */
    EMBER_TOOL_CHOICE_NONE = 1,      /**< no calls (no grammar) */
    EMBER_TOOL_CHOICE_REQUIRED = 2,  /**< one or more calls to any of the tools */
    EMBER_TOOL_CHOICE_NAMED = 3,     /**< calls to the tool `name` */
} ember_tool_choice;

typedef struct ember_tool_grammar_params {
    uint32_t struct_size;
    ember_chat_format format;       /**< default AUTO: from tmpl or the model's template */
    const char *tmpl;               /**< default NULL */
    const ember_chat_tool *tools;
    size_t n_tools;
    ember_tool_choice choice;       /**< default REQUIRED */
    const char *name;               /**< NAMED: the tool */
    /** Default true: up to 8 calls in one reply (OpenAI's parallel_tool_calls); false: exactly one. */
    bool parallel;
    const char *tools_json;         /**< default NULL: more tools as JSON text, as ember_chat_params.tools_json */
} ember_tool_grammar_params;

EMBER_API void ember_tool_grammar_params_init(ember_tool_grammar_params *params);

/** A grammar under which generation writes only calls the parser reads, each call's arguments valid
 *  for its tool's schema (written as the family's template writes calls). *out is NULL for choice NONE.
 *  REQUIRED and NAMED: calls only; for formats whose opener is a control token the grammar starts
 *  after the opener: append ember_chat_tool_prefix's text to the prompt. AUTO: a lazy grammar (see
 *  ember_grammar_create_lazy; since EMBER_1.10, for every format, where before it constrained from the
 *  first token and refused formats with control-token openers): free text, and the family's call opener
 *  (a control token is a trigger token, text a trigger word) switches the call's grammar on; the
 *  prefix is "". With parallel false the reply ends after the call; gpt-oss's grammar holds only the
 *  recipient's tool name (its arguments follow control tokens). Errors:
 *  EMBER_ERR_INVALID_ARGUMENT (no tools, a bad tool as in ember_chat_apply_template_v2, NAMED with a
 *  name not among the tools), EMBER_ERR_UNSUPPORTED (a format without calls, a schema keyword outside
 *  the subset, gpt-oss REQUIRED with several tools). Thread-safe. */
EMBER_API ember_status ember_chat_tool_grammar(const ember_model *model, const ember_tool_grammar_params *params,
                                               ember_grammar **out);

/** The text to append to the prompt for ember_chat_tool_grammar's grammar ("" for Hermes and Llama 3.x;
 *  "[TOOL_CALLS]" for Mistral; "<|tool_call|>" for Granite and Phi-4; gpt-oss NAMED: "<|channel|>
 *  commentary to=functions.NAME <|constrain|>json<|message|>"), two-call idiom as
 *  ember_chat_apply_template. Same errors as ember_chat_tool_grammar. */
EMBER_API ember_status ember_chat_tool_prefix(const ember_model *model, const ember_tool_grammar_params *params,
                                              char *buf, size_t capacity, size_t *out_len);

/* -------------------------------------------------------------------------------------------------
 * Embeddings and reranking (since EMBER_1.9; docs/embeddings.md)
 *
 * An embedding model (a file with <arch>.pooling_type: BERT encoders such as bge or all-MiniLM, decoder
 * embedders such as Qwen3-Embedding) turns a text into a vector; a reranking model (pooling type rank:
 * BERT cross-encoders, Qwen3-Reranker) scores a (query, document) pair. Both run in an ember_embedder,
 * which packs many texts into each forward pass. Such models do not generate: ember_session_create
 * refuses them (EMBER_ERR_UNSUPPORTED), an engine on one takes embedding requests only (on a reranking
 * model, scoring requests: texts with a query; since EMBER_1.11, see "Embedding requests on an engine"),
 * and an embedder refuses a generating model.
 * ------------------------------------------------------------------------------------------------- */

typedef struct ember_embedder ember_embedder;

/** How a text's token rows become one vector. */
typedef enum ember_pooling {
    EMBER_POOLING_MODEL = 0,  /**< the model's own (its pooling_type) */
    EMBER_POOLING_MEAN = 1,   /**< the mean of every token's last hidden state */
    EMBER_POOLING_CLS = 2,    /**< the first token's (BERT's [CLS]) */
    EMBER_POOLING_LAST = 3,   /**< the last token's (decoder embedders) */
} ember_pooling;

typedef struct ember_embed_params {
    uint32_t struct_size;
    /** Backend choice (default EMBER_BACKEND_AUTO). */
    ember_backend_kind backend;
    /** Worker threads for the CPU backend (default 0: the number of physical cores, at most 8). */
    uint32_t n_threads;
    /** Tokens per forward pass (default 2048; raised to max_tokens when smaller): texts are packed whole. */
    uint32_t n_batch;
    /** The longest text in tokens (default 0: the model's trained context; at most 2048 for a decoder). */
    uint32_t max_tokens;
    /** Longer texts: false (default) refuses them with EMBER_ERR_INVALID_ARGUMENT naming the length; true
     *  cuts them to max_tokens (keeping a closing SEP / EOS token last). */
    bool truncate;
    /** L2-normalise each vector (default true). */
    bool normalize;
    /** Matryoshka truncation: the first `dimensions` values, before normalisation (default 0: all). */
    uint32_t dimensions;
    /** Default EMBER_POOLING_MODEL. Another pooling is allowed except on a reranking model. */
    ember_pooling pooling;
} ember_embed_params;

EMBER_API void ember_embed_params_init(ember_embed_params *params);

/** Creates an embedder on `model` (which must outlive it): a context sized for n_batch tokens. Errors:
 *  EMBER_ERR_INVALID_ARGUMENT (NULL, vocab-only model, bad params), EMBER_ERR_UNSUPPORTED (a model with no
 *  pooling type: it generates, it does not embed; a backend that cannot run it), EMBER_ERR_OUT_OF_MEMORY.
 *  One thread at a time may use an embedder (another thread's overlapping call gets
 *  EMBER_ERR_INVALID_STATE); several embedders on one model may run on different threads. */
EMBER_API ember_status ember_embedder_create(const ember_model *model, const ember_embed_params *params,
                                             ember_embedder **out);
EMBER_API void ember_embedder_free(ember_embedder *embedder);

/** Floats per vector (the model's width, or `dimensions`); 1 for a reranking model. 0 for NULL. */
EMBER_API size_t ember_embedder_dim(const ember_embedder *embedder);
/** Whether the embedder's model is a reranking model (ember_rerank) rather than an embedding one. */
EMBER_API bool ember_embedder_is_reranker(const ember_embedder *embedder);

/** Embeds n_texts texts (texts[i] of lengths[i] bytes; lengths NULL: NUL-terminated), each tokenized with
 *  the model's special tokens: out receives n_texts * ember_embedder_dim() floats, text i's vector at
 *  i * dim (capacity: floats at out). Errors: EMBER_ERR_INVALID_ARGUMENT (NULL, capacity too small, an empty
 *  text, a text over max_tokens without truncate, a reranking model), EMBER_ERR_CANCELLED never. */
EMBER_API ember_status ember_embed(ember_embedder *embedder, const char *const *texts, const size_t *lengths,
                                   size_t n_texts, float *out, size_t capacity);
/** ember_embed for token sequences given as they are (no special tokens added): tokens[i] of n_tokens[i]. */
EMBER_API ember_status ember_embed_tokens(ember_embedder *embedder, const ember_token *const *tokens,
                                          const size_t *n_tokens, size_t n_texts, float *out, size_t capacity);
/** A reranking model's relevance score of each of n_docs documents (NUL-terminated) for `query`: scores
 *  receives n_docs floats (higher: more relevant; Qwen3-Reranker's are probabilities, a BERT
 *  cross-encoder's raw logits). Pairs are formed as the model's "rerank" template says where it has one,
 *  else [CLS] query [SEP] document [SEP]. Errors: EMBER_ERR_INVALID_ARGUMENT (NULL, an embedding model,
 *  a pair over max_tokens without truncate). */
EMBER_API ember_status ember_rerank(ember_embedder *embedder, const char *query, const char *const *docs, size_t n_docs,
                                    float *scores);

/* -------------------------------------------------------------------------------------------------
 * Placement across devices (EMBER_1.9; docs/offload.md): a model larger than the GPU runs its last
 * gpu_layers decoder layers (and the output) on the GPU and the rest on the CPU, optionally with the MoE
 * experts of some GPU layers on the CPU; see ember_session_params.gpu_layers.
 * ------------------------------------------------------------------------------------------------- */

/** Where a session's or engine's model runs, or where it would. */
typedef struct ember_placement {
    uint32_t struct_size;
    uint32_t n_layer;          /**< decoder layers of the model */
    uint32_t gpu_layers;       /**< of them on the GPU (0: all on the CPU) */
    uint32_t experts_on_cpu;   /**< GPU layers whose MoE experts run on the CPU */
    uint64_t gpu_bytes;        /**< what the GPU's part takes: weights, KV cache and states, activations */
    uint64_t cpu_bytes;        /**< the same on the CPU (its weights are mapped from the file) */
    uint64_t gpu_budget_bytes; /**< the budget the placement was chosen for or checked against */
    bool automatic;            /**< chosen by EMBER_GPU_LAYERS_AUTO */
    /** "layers 12-23 and the output on vulkan (...MiB...); layers 0-11 on cpu (...)", NUL-terminated
     *  (truncated to fit). */
    char description[512];
} ember_placement;

EMBER_API void ember_placement_init(ember_placement *placement);

/** The placement the session runs (for one device too: gpu_layers n_layer or 0, bytes 0). Errors:
 *  EMBER_ERR_INVALID_ARGUMENT (NULL, struct_size). Thread-safe. */
EMBER_API ember_status ember_session_placement(const ember_session *session, ember_placement *out);
/** The same for an engine. */
EMBER_API ember_status ember_engine_placement(ember_engine *engine, ember_placement *out);
/** The placement ember_engine_create(model, params) would run, chosen and measured without allocating
 *  anything (`ember info --fit`); a placement that cannot fit fails as the create would, with the numbers.
 *  params may be NULL (defaults: the whole model on the best backend). */
EMBER_API ember_status ember_estimate_placement(const ember_model *model, const ember_engine_params *params,
                                                ember_placement *out);

/* ---------------------------------------------------------------------------------------------------
 * Lazy grammars (since EMBER_1.10; docs/tools.md)
 *
 * A lazy grammar lets the model write freely until a trigger appears in the generated text, then
 * constrains what follows: tool_choice auto, where the model may answer in text or open a call. Until
 * a trigger appears the sampler does no grammar work at all (its draws are those of a sampler without a
 * grammar, for the same seed); a trigger costs a short search of each token's bytes. A trigger word is
 * text: the grammar matches the text from the word's first byte, so a word split across tokens, or
 * preceded by other text in its token, switches it on; where the text from the word on (to the end of
 * its token) is not allowed by the grammar, the word is ignored and the text stays free. A trigger token
 * is a token id (a control token such as [TOOL_CALLS], whose text a grammar cannot match): the grammar
 * matches what follows it. Once the text matched since the trigger is complete under the grammar, the
 * constraint ends and free text resumes until the next trigger (the grammar matches again from its
 * beginning); with `once`, the grammar applies once and only an end-of-generation token may follow.
 * A lazy grammar is attached as any grammar (ember_sampler_set_grammar, ember_generate_params.grammar,
 * ember_request_params.grammar); with one, ember_generate does not speculate.
 * ------------------------------------------------------------------------------------------------- */

typedef struct ember_grammar_triggers {
    uint32_t struct_size;
    const char *const *words;  /**< default NULL: up to 16 NUL-terminated texts of 1 to 256 bytes */
    size_t n_words;
    const ember_token *tokens; /**< default NULL: up to 16 token ids of the model's vocabulary */
    size_t n_tokens;
    bool once;                 /**< default false: free text (and further triggers) may follow a match */
} ember_grammar_triggers;

EMBER_API void ember_grammar_triggers_init(ember_grammar_triggers *triggers);

/** A GBNF grammar (as ember_grammar_create_gbnf) that constrains only from a trigger on; its root
 *  matches the text from a trigger word's first byte, or after a trigger token. The grammar's token masks
 *  are computed here (up to 1024 states, 8 MiB), so that a call costs no more the first time than later:
 *  creating one takes tens of milliseconds with a 32k vocabulary, a few hundred with a 150k one; keep it
 *  while the tools stay the same. Errors: those of ember_grammar_create_gbnf, and
 *  EMBER_ERR_INVALID_ARGUMENT for NULL or no triggers, an empty or over-long word, a token outside the
 *  vocabulary, or more triggers than the limits. Thread-safe. */
EMBER_API ember_status ember_grammar_create_lazy(const ember_model *model, const char *gbnf, size_t len,
                                                 const ember_grammar_triggers *triggers, ember_grammar **out);

/** *out_constraining: whether the sampler's grammar constrains its next token (false without a grammar,
 *  and while a lazy grammar waits for its trigger). Same threading as the sampler. */
EMBER_API ember_status ember_sampler_grammar_constraining(const ember_sampler *sampler, bool *out_constraining);

/* ---------------------------------------------------------------------------------------------------
 * Embedding requests on an engine (since EMBER_1.11; docs/embeddings.md)
 *
 * An app that serves chat and retrieval from one loaded model submits embedding work to its engine: the
 * texts of every caller go into the engine's steps whole (a text is never split across passes), in the
 * same forward pass as the running generations' tokens, so the weights are read once for both; each text
 * is a sequence of its own whose KV blocks are freed after its pass. Generations are not disturbed: their
 * tokens, greedy or sampled with a seed, are those of an engine without embedding requests. A text's
 * vector is the one ember_embed gives for the same text and options, to float rounding: the same rows are
 * pooled the same way, and a row does not depend on the other texts of its pass (on the CPU backend, the
 * bits are the same).
 *
 * Which models. An engine on an embedding model (a file with <arch>.pooling_type: BERT encoders,
 * nomic-bert, gemma-embedding, decoder embedders such as Qwen3-Embedding) takes embedding requests only:
 * ember_request_submit and ember_engine_pin_prefix on it fail with EMBER_ERR_UNSUPPORTED. On a generating
 * model, an embedding request names its pooling, EMBER_POOLING_MEAN or EMBER_POOLING_LAST, over the
 * model's final normed hidden states (EMBER_POOLING_MODEL or CLS: EMBER_ERR_INVALID_ARGUMENT, saying why;
 * a model with recurrent layers: EMBER_ERR_UNSUPPORTED). An engine on a reranking model (pooling type
 * rank: BERT cross-encoders, Qwen3-Reranker) takes scoring requests only: ember_embed_request_params.query
 * set, the texts its documents, each scored as the pair (query, document) that ember_rerank forms, one
 * float per document (ember_request_embedding_dim is 1) equal to ember_rerank's (the same bits on the CPU
 * backend). A query on any other model, no query on a reranking model, or a query with token sequences:
 * EMBER_ERR_INVALID_ARGUMENT.
 *
 * The longest text: on an embedding model its ember_embed default (an encoder's trained positions, at most
 * 2048 tokens for a decoder; the engine's n_batch is raised to hold it), on a generating model what a
 * pass holds beside every running request's decode tokens, n_batch - n_seq_max (with speculation,
 * n_batch - n_seq_max * (spec_k + 1)), at most 2048; never past n_ctx.
 *
 * An embedding request is an ember_request: ember_request_wait, ember_request_cancel (between passes; the
 * texts already embedded are dropped), ember_request_error, ember_request_free and ember_request_poll's
 * state work as for generation; it generates no tokens and no text (ember_request_logprobs:
 * EMBER_ERR_INVALID_STATE). ember_engine_stats counts it in n_running until it ends.
 * ------------------------------------------------------------------------------------------------- */

typedef struct ember_embed_request_params {
    uint32_t struct_size;
    /** The texts, copied at submit: texts[i] of lengths[i] bytes (lengths NULL: NUL-terminated), each
     *  tokenized with the model's special tokens (with a query: each a document, paired with it as
     *  ember_rerank pairs them). NULL to give token sequences instead. */
    const char *const *texts;
    const size_t *lengths;
    /** With texts NULL: token sequences as they are (no special tokens added), tokens[i] of n_tokens[i]. */
    const ember_token *const *tokens;
    const size_t *n_tokens;
    /** How many texts (at least one). */
    size_t n_texts;
    /** Default EMBER_POOLING_MODEL: an embedding model's own. On a generating model MEAN or LAST. */
    ember_pooling pooling;
    /** Matryoshka truncation, as ember_embed_params.dimensions (default 0: every value). */
    uint32_t dimensions;
    /** L2-normalise each vector (default true). */
    bool normalize;
    /** A text over max_tokens: false (default) fails the submit with EMBER_ERR_INVALID_ARGUMENT naming its
     *  length; true cuts it to max_tokens, keeping a closing SEP / EOS token last. */
    bool truncate;
    /** The longest text in tokens (default 0: the engine's longest, above; more is refused). A scoring
     *  request's limit is on each (query, document) pair's tokens. */
    uint32_t max_tokens;
    /** EMBER_1.11. A reranking model's query (NUL-terminated; default NULL, as is every struct_size before
     *  this field): the texts are documents, each scored for it as ember_rerank scores a pair, and the result
     *  is one score per text (pooling MODEL, dimensions 0, normalize unused). Only for a reranking model,
     *  which needs it; not with tokens. */
    const char *query;
} ember_embed_request_params;

EMBER_API void ember_embed_request_params_init(ember_embed_request_params *params);

/** Queues an embedding request; *out receives its handle, freed with ember_request_free (also after the
 *  engine is gone). The texts are checked and tokenized here. Errors: EMBER_ERR_INVALID_ARGUMENT (NULL,
 *  struct_size, no texts, an empty text, one over max_tokens without truncate, a token outside the
 *  vocabulary, a pooling or dimensions that do not fit the model, a query where it does not fit or none on
 *  a reranking model), EMBER_ERR_UNSUPPORTED (see above),
 *  EMBER_ERR_INVALID_STATE (the engine is shutting down). Thread-safe. */
EMBER_API ember_status ember_engine_submit_embed(ember_engine *engine, const ember_embed_request_params *params,
                                                 ember_request **out);

/** Floats per text of an embedding request's result (the model's width, or `dimensions`; 1 for a scoring
 *  request on a reranking model), fixed at submit; 0 for NULL or a generation request. */
EMBER_API size_t ember_request_embedding_dim(const ember_request *request);

/** Copies an embedding request's vectors once it is EMBER_REQUEST_DONE: n_texts * dim floats, text i's at
 *  i * dim, into out (capacity: floats at out); *out_count receives n_texts * dim. Two-call idiom: out NULL
 *  and capacity 0 give the count alone. Errors: EMBER_ERR_INVALID_ARGUMENT (NULL, capacity too small),
 *  EMBER_ERR_INVALID_STATE (a generation request, or one not DONE: still running, cancelled or failed,
 *  ember_request_error says why). Thread-safe; may be called any number of times. */
EMBER_API ember_status ember_request_embeddings(ember_request *request, float *out, size_t capacity, size_t *out_count);

#ifdef __cplusplus
}
#endif

#endif /* EMBER_EMBER_H */
