/* graph.h — the decoder as data: one forward pass as a program of backend-neutral ops over a model's
 * tensors and a few activation buffers.
 *
 * Why: an architecture is described once (src/model/arch_*.cpp builds this program from the GGUF
 * metadata) and every backend — the CPU, CUDA and Vulkan — runs the same program. A backend knows ops,
 * never an architecture: there is no "llama" or "qwen2" below this line, only "rope, NEOX pairs, theta
 * 1e6". A backend may fuse a run of ops it recognises (a matmul followed by an add into the residual,
 * the Q/K/V products sharing one quantized input, a whole decode step as one CUDA graph) as long as the
 * result is the unfused one within the parity bounds of tests/test_parity.cpp.
 *
 * Plain C so that it crosses the module boundary (module_api.h) as it is; append-only like that
 * boundary: new ops get new numbers, nodes grow at their end (the model description carries the node
 * size), and a backend that meets an op or an option it does not implement refuses the model with
 * EMBER_ERR_UNSUPPORTED naming it — never a wrong answer.
 *
 * Shapes. A pass has n_tokens token rows (the batch) and n_logits logits rows. Every activation buffer
 * has a width (floats per row) and is either per token (EMBER_GRAPH_ROWS_TOKENS) or per logits row
 * (EMBER_GRAPH_ROWS_LOGITS). Tensors are the model's weights as stored in the file (GGUF types and
 * layout; ne[0] innermost): a matrix W of ne = [n_in, n_out] maps rows of n_in to rows of n_out. */
#ifndef EMBER_BACKEND_GRAPH_H
#define EMBER_BACKEND_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The numbers are also those of module_api.h's single-op test interface (ember_mod_op), which runs one
 * of these ops on host arrays: one list of ops for the programs and the parity harness. */
enum ember_graph_op_kind {
    /* dst[t] = row tokens[t] of w, as f32. */
    EMBER_GRAPH_GET_ROWS = 5,
    /* dst[r] = src[r] / sqrt(mean(src[r]^2) + eps) * w, over groups of n values: a row of width W is
     * W / n groups (n == W: the usual norm; n == head_dim: a per-head norm). w: F32 [n], or -1 for none.
     * dst may be src. */
    EMBER_GRAPH_RMS_NORM = 2,
    /* dst[r] = W src[r] (+ b): w a matrix [width(src), width(dst)], b an optional F32 [width(dst)].
     * dst is not src. Consecutive matmuls of one src may share its quantized copy. */
    EMBER_GRAPH_MATMUL = 1,
    /* Rotates dst in place: each row is n_head heads of head_dim; the first n_rot dims of a head turn by
     * pos * freq_i, freq_i = rope_freq_scale * rope_theta^(-2i/n_rot) / factor_i (w: optional F32
     * [n_rot/2] factors, -1 for none), in pairs (2i, 2i+1) (EMBER_GRAPH_ROPE_NORMAL) or (i, i+n_rot/2)
     * (EMBER_GRAPH_ROPE_NEOX). Angles are formed in double precision. */
    EMBER_GRAPH_ROPE = 3,
    /* Writes each token's K row (src) and V row (src2) into the cache of `layer` at the token's position
     * in its sequence's blocks. Rows of the width of the model's cache (kv_width). */
    EMBER_GRAPH_KV_STORE = 7,
    /* dst = causal attention of the queries src (n_head heads of head_dim) over the keys and values of
     * `layer` at positions 0..pos of each token's sequence (grouped: query head h reads KV head
     * h / (n_head / n_head_kv)), scores scaled by `scale`. The cache rows of this pass are stored before
     * (a KV_STORE of the same layer precedes it). */
    EMBER_GRAPH_ATTENTION = 6,
    /* dst += src (same width). */
    EMBER_GRAPH_ADD = 8,
    /* dst = silu(src) * src2, elementwise (dst may be src or src2). */
    EMBER_GRAPH_SWIGLU = 4,
    /* dst[i] = src[logits_rows[i]]: the token rows whose logits the pass returns (dst per logits row). */
    EMBER_GRAPH_GATHER_LOGITS = 9
};

/* The op's name for messages ("matmul"), or NULL for a number this header does not define (a backend
 * refusing a program names the number then). */
static inline const char *ember_graph_op_name(uint32_t op) {
    switch (op) {
    case EMBER_GRAPH_GET_ROWS: return "get_rows";
    case EMBER_GRAPH_RMS_NORM: return "rms_norm";
    case EMBER_GRAPH_MATMUL: return "matmul";
    case EMBER_GRAPH_ROPE: return "rope";
    case EMBER_GRAPH_KV_STORE: return "kv_store";
    case EMBER_GRAPH_ATTENTION: return "attention";
    case EMBER_GRAPH_ADD: return "add";
    case EMBER_GRAPH_SWIGLU: return "swiglu";
    case EMBER_GRAPH_GATHER_LOGITS: return "gather_logits";
    default: return NULL;
    }
}

enum ember_graph_rope_mode { EMBER_GRAPH_ROPE_NORMAL = 0, EMBER_GRAPH_ROPE_NEOX = 2 };
enum ember_graph_rows { EMBER_GRAPH_ROWS_TOKENS = 0, EMBER_GRAPH_ROWS_LOGITS = 1 };

typedef struct ember_graph_buf {
    uint32_t width; /* floats per row */
    uint32_t rows;  /* an ember_graph_rows */
} ember_graph_buf;

/* One op. Fields an op does not use are 0 (or -1 for the ids). */
typedef struct ember_graph_node {
    uint32_t op;            /* an ember_graph_op_kind */
    int32_t layer;          /* the decoder layer it belongs to: -1 before the first, n_layer after the last.
                               Backends check for cancellation where it changes, and may cut work there. */
    int32_t dst, src, src2; /* activation buffers (indices into the description's bufs); -1: none */
    int32_t w, b;           /* tensors (indices into the description's tensors); -1: none */
    uint32_t n;             /* RMS_NORM: values per group */
    uint32_t n_head, n_head_kv, head_dim; /* ROPE (n_head only), ATTENTION */
    uint32_t n_rot, rope_mode;            /* ROPE */
    float eps;                            /* RMS_NORM */
    float rope_theta, rope_freq_scale;    /* ROPE */
    float scale;                          /* ATTENTION */
} ember_graph_node;

#ifdef __cplusplus
}
#endif

#endif
