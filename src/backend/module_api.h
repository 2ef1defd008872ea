/* module_api.h — the one backend interface: the plain-C table every backend implements — the CPU's,
 * linked into libember (src/cpu/cpu_module.cpp), and the modules loaded at run time (libember-vulkan.so,
 * libember-cuda.so). The core reaches each through one adapter (module_loader.cpp).
 *
 * Why C and not the C++ Backend classes: a C++ exception thrown in one shared object and caught in
 * another (each with hidden visibility and possibly its own copy of the type info) is not reliable, and
 * a C table is narrow and versionable. The module catches everything at its exported functions; each
 * function returns an ember_status and, on failure, writes a NUL-terminated message into the caller's
 * buffer. libember (src/backend/module_loader.cpp) turns those into ember::Error.
 *
 * Versioning: the module exports one symbol, EMBER_BACKEND_MODULE_SYMBOL, a function returning a const
 * table. The table only grows at its end; struct_size tells the loader which entries exist, and
 * api_version changes only if an existing entry changes meaning (the loader then refuses the module).
 * The structs passed in are likewise append-only and carry struct_size where they may grow.
 *
 * A backend receives the model as a description: host pointers to the tensors' bytes as stored in the
 * GGUF file, and the forward pass as a program of graph.h ops; a GPU module copies what it needs into
 * device memory during model_load, the CPU uses the bytes in place. */
#ifndef EMBER_BACKEND_MODULE_API_H
#define EMBER_BACKEND_MODULE_API_H

#include <stddef.h>
#include <stdint.h>

#include "backend/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

#define EMBER_MODULE_API_VERSION 2u /* 2: the model as a program of graph.h ops */
#define EMBER_BACKEND_MODULE_SYMBOL "ember_backend_module_v1"

typedef struct ember_mod_backend ember_mod_backend; /* an opened device */
typedef struct ember_mod_model ember_mod_model;     /* weights on that device */
typedef struct ember_mod_context ember_mod_context; /* KV cache and activations of one context */

/* A tensor as stored in the file: GGUF type id, shape (ne[0] innermost), host bytes, name (for messages).
 * The type carries EMBER_MOD_TYPE_HOST_LAYOUT where the module's host_layout_rewrite rewrote the bytes
 * (only in a description whose tensors point into the core's private host copy of the weights). */
typedef struct ember_mod_tensor {
    uint32_t type;
    int32_t n_dims;
    int64_t ne[4];
    const void *data;
    size_t n_bytes;
    const char *name;
} ember_mod_tensor;

#define EMBER_MOD_TYPE_HOST_LAYOUT 0x80000000u

/* A model as every backend sees it: its tensors and the forward pass as a program of ops (graph.h).
 * Nothing here names an architecture. */
typedef struct ember_mod_model_desc {
    uint32_t struct_size;
    uint32_t n_vocab;     /* logits per logits row */
    uint32_t n_layer;     /* KV cache layers */
    uint32_t kv_width;    /* floats of one K (or V) row of one layer: n_head_kv * head_dim */
    uint32_t head_dim;    /* of the cached heads (a Q8_0 cache needs it a multiple of 8) */
    uint32_t n_tensors;
    const ember_mod_tensor *tensors;   /* [n_tensors], referred to by the nodes' w and b */
    uint32_t n_bufs;
    const ember_graph_buf *bufs;       /* [n_bufs] activation buffers */
    uint32_t node_size;                /* sizeof(ember_graph_node) of the builder: nodes only grow at their end */
    uint32_t n_nodes;
    const ember_graph_node *nodes;     /* [n_nodes] the forward pass, in order (stride node_size) */
    int32_t logits_buf;                /* the buffer (per logits row, width n_vocab) the pass returns */
    /* Appended: floats of one sequence's recurrent state (graph.h's SSM_CONV and GATED_DELTA nodes own
     * their part of it), 0 for a model of attention layers only. A context keeps n_state_slots such
     * states, f32, each addressed by its slot number. */
    uint32_t state_floats;
    /* Appended: a per-token buffer whose rows a pass also returns, in the batch's `hidden`, when the
     * batch asks for them (its hidden is not NULL): the model's final hidden state, which a
     * multi-token-prediction block reads through INPUT_ROWS. -1 (or a struct_size that stops before
     * it): none. A module that runs EMBER_GRAPH_INPUT_ROWS honours it; the core asks no other. */
    int32_t hidden_buf;
    /* Appended (placement across devices: a program cut into parts, each run by its own backend): with
     * has_input nonzero, the pass starts from activations instead of tokens — the batch's `input` rows
     * ([n_tokens][width of input_buf]) are written into buffer input_buf before the first node. Only a
     * module whose caps has EMBER_MOD_CAP_INPUT_ROWS is given such a description. */
    uint32_t has_input;
    int32_t input_buf;
} ember_mod_model_desc;

typedef struct ember_mod_context_params {
    uint32_t struct_size;
    uint32_t n_blocks, block_size, n_batch, n_logits;
    uint32_t kv_type; /* GGUF type id: F16 (1), Q8_0 (8) or Q4_0 (2) */
    /* Host threads a context may use (the CPU backend's workers; GPU modules ignore it), and a context
     * of the same module whose threads this one runs on instead of starting its own (for contexts used
     * by turns, such as a speculative draft and its target), or NULL. */
    uint32_t n_threads;
    ember_mod_context *share_threads_with;
    /* Blocks of a second pool for the sliding-window layers' K/V rows (each ember_mod_batch then has
     * window_tables), or 0: every layer's rows are in the n_blocks pool. The core asks only a module
     * whose caps has EMBER_MOD_CAP_WINDOW_BLOCKS for one. */
    uint32_t n_window_blocks;
    /* Recurrent states this context keeps (the model's state_floats each), addressed by the batches'
     * state_slots and by copy_state / read_state / write_state. 0 for a model without state. */
    uint32_t n_state_slots;
} ember_mod_context_params;

/* Returns nonzero to cancel; called between command-buffer chunks of a long forward pass. */
typedef int (*ember_mod_cancel_fn)(void *user_data);

typedef struct ember_mod_batch {
    uint32_t struct_size;
    uint32_t n_tokens;
    const int32_t *tokens, *pos;
    const int32_t *const *tables;
    uint32_t n_logits;
    const int32_t *logits_rows;
    float *logits;
    ember_mod_cancel_fn cancel; /* may be NULL */
    void *cancel_data;
    /* With n_window_blocks: each token's block table in the window pool, which the window layers read
     * and write instead of tables (-1 for blocks released as older than any window); else NULL. */
    const int32_t *const *window_tables;
    /* EMBER_PRECISION_* of ember.h: how the products with quantized weights round the activations (0,
     * the default: 8 bits per block of 32). Only a module whose caps has EMBER_MOD_CAP_PRECISION_HIGH is
     * given another value. */
    uint32_t precision;
    /* For a model with recurrent state (state_floats > 0), else NULL: [n_tokens] the state slot of each
     * token's sequence, which the pass leaves holding the sequence's state after its last token here, and
     * the slot that sequence's first token reads its state from (-1: the zero state of a new sequence; the
     * same slot: go on in place; another: the state that slot holds, which the pass does not change). A
     * sequence's tokens are consecutive in the batch, in position order (graph.h). */
    const int32_t *state_slots, *state_src;
    /* Appended: for a program with EMBER_GRAPH_INPUT_ROWS, its input rows ([n_tokens][width of the
     * node's dst]); else NULL. And, NULL or [n_tokens][width of the description's hidden_buf]: where the
     * pass writes the hidden_buf rows of every token. */
    const float *inputs;
    float *hidden;
    /* Appended: with a description's has_input, the rows written into its input_buf (else NULL); the
     * tokens are then only the sequence's bookkeeping (not read by any GET_ROWS). */
    const float *input;
    /* Appended, with EMBER_MOD_CAP_KEEP_STATES (else NULL; NULL: nothing kept): [n_tokens] a state slot
     * that the pass also leaves holding the sequence's state after that token (-1: none), as a
     * speculative verifying pass keeps each drafted token's state so that a rejection only picks one.
     * Such a slot is none of the pass's state_slots or state_src, and no two tokens name the same one. */
    const int32_t *state_keep;
} ember_mod_batch;

/* What opening a backend may be told. Every pointer may be NULL. */
typedef struct ember_mod_open_params {
    uint32_t struct_size;
    int32_t device_index;   /* -1: the best-scoring device */
    /* An app's own Vulkan objects (VkInstance, VkPhysicalDevice, VkDevice, VkQueue as opaque pointers),
     * all four or none; the module then creates nothing of its own at that level and destroys none. */
    void *vk_instance, *vk_physical_device, *vk_device, *vk_queue;
    uint32_t vk_queue_family;
    /* CUDA: device_index above is the CUDA device ordinal; an app's own stream (a cudaStream_t, not the
     * legacy default stream) on which every context then enqueues its work. NULL: the module's own. */
    void *cuda_stream;
} ember_mod_open_params;

typedef struct ember_mod_device_info {
    char name[128];
    uint32_t type;  /* VkPhysicalDeviceType: 1 integrated, 2 discrete, 3 virtual, 4 CPU, 0 other */
    int32_t score;  /* higher is better; 0: unusable */
} ember_mod_device_info;

/* --- the op-level test interface: one op of graph.h on host arrays (tests/test_parity.cpp) ---------
 * kind is an ember_graph_op_kind; the fields each kind reads:
 *   MATMUL        y[t][o] = W[o]·x[t] + bias[o]; w of `type`, n_out x n_in; t < n_tokens
 *   RMS_NORM      y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * norm; n_tokens rows of n_in (norm may be NULL)
 *   ROPE          y = rope(x): n_tokens rows of n_head heads of head_dim, positions ids
 *   SWIGLU        y = silu(x) * x2, n_in values
 *   GET_ROWS      y[t] = row ids[t] of W (n_out rows of n_in, `type`)
 *   ATTENTION     y = attention(q = x; k, v caches of `type` (F16 or Q8_0), paged by tables, positions ids)
 *   KV_STORE      rows x (K) and x2 (V), n_tokens of n_in, stored as `type` into k_out / v_out (caches of
 *                 n_blocks * block_size rows) at each token's position ids[t] of its table
 *   ADD           y = x + x2, n_in values
 *   GATHER_LOGITS y[i] = x[ids[i]], n_tokens rows of n_in
 * and, with the fields appended after k_out / v_out (a caller's struct_size says whether it has them):
 *   SCALE         y = x * scale, n_in values
 *   SOFTCAP       y = softcap * tanh(x / softcap), n_in values
 *   GEGLU         y = gelu(x) * x2, n_in values (graph.h's tanh form)
 *   ATTENTION_EXT ATTENTION's fields, plus window, softcap and sinks ([n_head], or NULL)
 *   ROPE_YARN     ROPE's fields, plus the rope_* fields below (graph.h gives the formula)
 *   MOE           x: n_tokens rows of n_in; x2: their router logits, n_expert each; w, w2: the gate and up
 *                 experts (n_expert matrices of n_ff rows of n_in, of `type` and `type2`), w3: the down
 *                 experts (n_expert matrices of n_out rows of n_ff, `type3`); bias, bias2, bias3: optional
 *                 [n_expert][n_ff], [n_expert][n_ff], [n_expert][n_out]; y: n_tokens rows of n_out;
 *                 n_expert_used, moe_gating, moe_act, act_alpha, act_limit as graph.h's MOE node */
#define EMBER_MOD_OP_MATMUL EMBER_GRAPH_MATMUL
#define EMBER_MOD_OP_RMSNORM EMBER_GRAPH_RMS_NORM
#define EMBER_MOD_OP_ROPE EMBER_GRAPH_ROPE
#define EMBER_MOD_OP_SWIGLU EMBER_GRAPH_SWIGLU
#define EMBER_MOD_OP_GET_ROWS EMBER_GRAPH_GET_ROWS
#define EMBER_MOD_OP_ATTENTION EMBER_GRAPH_ATTENTION
/* Makes a deliberately invalid API call: with the validation layer on (EMBER_VULKAN_VALIDATION=1) it must
 * fail with EMBER_ERR_BACKEND; without it, EMBER_ERR_UNSUPPORTED. Proves the trap works. */
#define EMBER_MOD_OP_VALIDATION_PROBE 100u

typedef struct ember_mod_op {
    uint32_t struct_size;
    uint32_t kind;
    uint32_t type;                 /* weight type (matmul, get_rows) or KV type (attention) */
    uint32_t n_tokens, n_in, n_out;
    uint32_t n_head, n_head_kv, head_dim, n_rot, rope_mode; /* rope_mode: an ember_graph_rope_mode */
    float eps, rope_theta, rope_freq_scale, scale;
    const void *w; size_t w_bytes; /* weight bytes in GGUF layout */
    const float *bias;             /* matmul, optional [n_out] */
    const float *norm;             /* rmsnorm [n_in]; rope: optional freq factors [n_rot/2] */
    const float *x, *x2;
    const int32_t *ids;            /* get_rows [n_tokens]; rope/attention: positions [n_tokens] */
    const int32_t *const *tables;  /* attention: block table of each token */
    const uint8_t *k_cache, *v_cache; /* attention: the whole paged cache, n_blocks*block_size rows */
    uint32_t n_blocks, block_size;
    float *y;
    /* attention: keys per split-K chunk; 0: the backend's choice, UINT32_MAX: no split */
    uint32_t attn_chunk;
    uint8_t *k_out, *v_out;        /* kv_store: the caches written */
    /* Appended for the ops from SCALE on (graph.h). */
    uint32_t window;               /* attention_ext */
    float softcap;                 /* attention_ext, softcap */
    const float *sinks;            /* attention_ext: [n_head] or NULL */
    float rope_ext_factor, rope_attn_factor, rope_beta_fast, rope_beta_slow; /* rope_yarn */
    uint32_t rope_n_ctx_orig;                                                /* rope_yarn */
    const void *w2, *w3;           /* moe: up and down experts */
    size_t w2_bytes, w3_bytes;
    uint32_t type2, type3;         /* moe: their types (w's is `type`) */
    const float *bias2, *bias3;    /* moe: optional */
    uint32_t n_ff, n_expert, n_expert_used, moe_gating, moe_act; /* moe */
    float act_alpha, act_limit;    /* moe */
    /* Appended for the ops from COPY_COLS on (one sequence of n_tokens rows):
     *   COPY_COLS    y[t] = x[t]'s column col_offset.. of each of n_head groups, head_dim each; n_in: x's width;
 *                y's rows n_out wide (0: n_head * head_dim), written from column n_rot on
     *   SIGMOID_MUL  y = x * sigmoid(x2); n_in values per row, x2 of n_in or (n_out == 1) one per row
     *   SSM_CONV     y = silu(conv(x) + bias): n_tokens rows of n_in channels; w: F32 [n_in][conv_kernel];
     *                bias: optional [n_in]; n_out: graph.h's activation (EMBER_GRAPH_SSM_CONV_LINEAR: no SiLU);
     *                state: (conv_kernel - 1) * n_in floats, the carried window before, overwritten with the one after
     *   GATED_DELTA  x: rows of q, k (n_head_kv heads of head_dim each) and v (n_head heads); x2: a, x3: b
     *                (n_head per row); dt, decay_a [n_head]; eps, scale; col_offset: graph.h's key head
 *                mapping (0 tiled, 1 grouped); state: n_head * head_dim^2 floats,
     *                before and after; y: n_head * head_dim per row
     *   SSM_SCAN     x: rows of x (n_head heads of head_dim), B and C (n_head_kv groups of conv_kernel = d_state
     *                each); x2: dt (n_head per row); decay_a: A, norm: D, dt: the dt bias ([n_head] each);
     *                state: n_head * head_dim * d_state floats, before and after; y: n_head * head_dim per row */
    const float *x3;
    const float *dt, *decay_a;
    float *state;
    uint32_t conv_kernel, col_offset;
    /* Appended: attention_ext's chunked local attention and attention temperature (graph.h; 0: off). */
    uint32_t attn_local_chunk;
    float attn_temp_scale, attn_temp_offset;
    uint32_t attn_temp_floor;
    /* Appended for the encoders' ops:
     *   LAYER_NORM    y[r] = (x[r] - mean) / sqrt(var + eps) * norm + bias; n_tokens rows of n_in (norm, bias
     *                 may be NULL)
     *   GELU          y = gelu(x), n_in values
     *   ATTENTION_EXT attn_mask (graph.h's ember_graph_attn_mask): SEQUENCE, every key of the token's sequence
     *                 up to the position of its last token here (tokens of one table consecutive) */
    uint32_t attn_mask;
    /* Appended for SSM_CONV, GATED_DELTA and SSM_SCAN (with EMBER_MOD_CAP_KEEP_STATES): NULL, or
     * [n_tokens][the op's state floats] where the op writes the state after each token (the last row is
     * `state` after the op). */
    float *states_after;
} ember_mod_op;

typedef struct ember_backend_module {
    uint32_t struct_size;
    uint32_t api_version;    /* EMBER_MODULE_API_VERSION */
    const char *name;        /* "vulkan" */
    uint32_t backend_kind;   /* an ember_backend_kind */

    /* Lists devices (up to cap into out; *n_out gets the total). Fails with EMBER_ERR_UNSUPPORTED and a
     * reason when the API (e.g. the Vulkan loader) or any device is missing. */
    int (*list_devices)(ember_mod_device_info *out, uint32_t cap, uint32_t *n_out, char *msg, size_t msg_cap);
    int (*open)(const ember_mod_open_params *params, ember_mod_backend **out, char *msg, size_t msg_cap);
    void (*close)(ember_mod_backend *b);
    /* A one-line description of the opened device ("lavapipe (LLVM 15.0.6, 256 bits) [cpu]"). */
    const char *(*device_name)(const ember_mod_backend *b);

    int (*model_load)(ember_mod_backend *b, const ember_mod_model_desc *desc, ember_mod_model **out, char *msg,
                      size_t msg_cap);
    void (*model_free)(ember_mod_model *m);
    int (*context_bytes)(ember_mod_backend *b, const ember_mod_model_desc *desc, const ember_mod_context_params *p,
                         uint64_t *out, char *msg, size_t msg_cap);
    int (*context_create)(ember_mod_model *m, const ember_mod_context_params *p, ember_mod_context **out,
                          char *msg, size_t msg_cap);
    void (*context_free)(ember_mod_context *c);
    int (*forward)(ember_mod_context *c, const ember_mod_batch *batch, char *msg, size_t msg_cap);
    int (*copy_block)(ember_mod_context *c, int32_t src, int32_t dst, char *msg, size_t msg_cap);
    int (*read_kv)(ember_mod_context *c, const int32_t *table, uint32_t n, uint8_t *dst, char *msg, size_t msg_cap);
    int (*write_kv)(ember_mod_context *c, const int32_t *table, uint32_t n, const uint8_t *src, char *msg,
                    size_t msg_cap);
    /* Runs one op (tests). */
    int (*run_op)(ember_mod_backend *b, const ember_mod_op *op, char *msg, size_t msg_cap);
    /* Appended (a module whose struct_size stops before it has none of these): EMBER_MOD_CAP_* bits. */
    uint32_t caps;
    /* Appended, may be NULL (then nothing is checked before a context is made): the bytes the opened
     * device can still allocate, which the core compares with context_bytes before context_create so
     * that a context too large for the device fails first with both figures (host_memory.hpp does the
     * same for the CPU backend's host memory). */
    int (*memory_available)(ember_mod_backend *b, uint64_t *out, char *msg, size_t msg_cap);
    /* Appended, may be NULL (both or neither): a module that reads host weights (the built-in CPU
     * backend) may keep some in a layout of its own. Where the core holds a private host copy of the
     * weights, it asks host_layout_wants about each 2-D tensor that the programs read with MATMUL alone
     * (nonzero: rewrite it), calls host_layout_rewrite once per such tensor on the copy's bytes (n_bytes
     * at data, writable then, read-only afterwards; it must not fail), and gives those tensors the type
     * `type | EMBER_MOD_TYPE_HOST_LAYOUT` in the descriptions it loads. The file mapping is never
     * rewritten. */
    int (*host_layout_wants)(const ember_mod_tensor *t);
    void (*host_layout_rewrite)(const ember_mod_tensor *t, void *data);
    /* Appended, with EMBER_MOD_CAP_RECURRENT_STATE (else NULL): a context's recurrent states by slot —
     * copy one slot's state to another (a fork, a snapshot), and read / write one slot's state_floats
     * floats as bytes (saved states). */
    int (*copy_state)(ember_mod_context *c, int32_t src, int32_t dst, char *msg, size_t msg_cap);
    int (*read_state)(ember_mod_context *c, int32_t slot, float *dst, char *msg, size_t msg_cap);
    int (*write_state)(ember_mod_context *c, int32_t slot, const float *src, char *msg, size_t msg_cap);
} ember_backend_module;

/* The module's contexts take n_window_blocks (the window layers' rows in a pool of their own, addressed
 * through each batch's window_tables; copy_block, read_kv and write_kv as backend.hpp says). */
#define EMBER_MOD_CAP_WINDOW_BLOCKS 1u
/* The module's forward takes ember_mod_batch.precision EMBER_PRECISION_HIGH. */
#define EMBER_MOD_CAP_PRECISION_HIGH 2u
/* The module runs models with recurrent state: the ops from COPY_COLS on, n_state_slots, the batches'
 * state_slots, and copy_state / read_state / write_state. */
#define EMBER_MOD_CAP_RECURRENT_STATE 4u
/* The module runs descriptions with has_input (a part of a program cut across devices, whose first nodes
 * read activations another backend computed: ember_mod_batch.input). */
#define EMBER_MOD_CAP_INPUT_ROWS 8u
/* The module's recurrent ops keep per-token states: ember_mod_batch.state_keep and
 * ember_mod_op.states_after. */
#define EMBER_MOD_CAP_KEEP_STATES 16u

typedef const ember_backend_module *(*ember_backend_module_fn)(void);

/* The CPU backend's table: linked into libember (src/cpu/cpu_module.cpp), registered like the modules. */
const ember_backend_module *ember_cpu_backend_module(void);

#ifdef __cplusplus
}
#endif

#endif
