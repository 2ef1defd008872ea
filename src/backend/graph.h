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
     * in its sequence's blocks. Rows of at most the width of the model's cache (kv_width); narrower rows
     * (a layer of fewer or smaller KV heads than the widest: Gemma 4's window layers) fill the first
     * values of the cache's row, the rest of it unused. */
    EMBER_GRAPH_KV_STORE = 7,
    /* dst = causal attention of the queries src (n_head heads of head_dim) over the keys and values of
     * `layer` at positions 0..pos of each token's sequence (grouped: query head h reads KV head
     * h / (n_head / n_head_kv)), scores scaled by `scale`. The cache rows of this pass are stored before
     * (a KV_STORE of the same layer precedes it). With kv_from > 0 it reads the cache of layer
     * kv_from - 1 instead, an earlier layer whose KV_STORE preceded it (Gemma 4's layers that share an
     * earlier layer's keys and values and store none of their own); ember_graph_kv_layer() gives the
     * layer whose cache an attention node reads. Each cached row's first n_head_kv * head_dim values are
     * its heads. */
    EMBER_GRAPH_ATTENTION = 6,
    /* dst += src (same width). */
    EMBER_GRAPH_ADD = 8,
    /* dst = silu(src) * src2, elementwise (dst may be src or src2). */
    EMBER_GRAPH_SWIGLU = 4,
    /* dst[i] = src[logits_rows[i]]: the token rows whose logits the pass returns (dst per logits row). */
    EMBER_GRAPH_GATHER_LOGITS = 9,

    /* --- Ops of the families with windows, softcaps, YaRN and experts (Gemma 2/3, Phi-3/4, Granite, OLMo 2,
     * Mixtral, Qwen3-MoE, gpt-oss). They read the node fields appended after `scale` below; the ops above never read those.
     * A backend that has not implemented one refuses the model naming it (program_read.hpp's op list). */

    /* dst = src * scale, elementwise (same width; dst may be src). Gemma's sqrt(n_embd) embedding scale,
     * Granite's embedding, residual and logit multipliers. */
    EMBER_GRAPH_SCALE = 10,
    /* dst = softcap * tanh(src / softcap), elementwise (same width; dst may be src; softcap > 0). Gemma 2's
     * final logit softcap. */
    EMBER_GRAPH_SOFTCAP = 11,
    /* dst = gelu(src) * src2, elementwise (same widths; dst may be src or src2), with GELU's tanh form:
     * gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Gemma's GeGLU. */
    EMBER_GRAPH_GEGLU = 12,
    /* ATTENTION (same src, dst, layer, n_head, n_head_kv, head_dim, scale, and the same preceding KV_STORE)
     * with three options, each off at 0 / -1:
     *  - window > 0: the query at position p sees only the keys at positions j with p - window < j <= p
     *    (the `window` most recent positions, itself included; llama.cpp's "standard" sliding window);
     *  - softcap > 0: each score s = scale * q.k becomes softcap * tanh(s / softcap) before the softmax;
     *  - w >= 0: attention sinks, an F32 tensor [n_head] of one logit per query head, which takes part in
     *    the softmax's normaliser but has no value: out_h = sum_j e^(s_j - m) v_j / (e^(w[h] - m) +
     *    sum_j e^(s_j - m)), m = max(w[h], max_j s_j).
     * With all three off it is ATTENTION exactly. Two more, read from the fields appended last:
     *  - attn_local_chunk > 0 (window then 0): chunked local attention, the query at position p sees only
     *    the keys at positions j with j / attn_local_chunk == p / attn_local_chunk (Llama 4's local layers);
     *  - attn_temp_scale != 0 (attn_temp_floor > 0): attention temperature, the query at p scaled by
     *    1 + attn_temp_scale * ln(floor((p + attn_temp_offset) / attn_temp_floor) + 1) before its scores
     *    (Llama 4's and Mistral 3's long-context tuning), i.e. its scores' scale multiplied by that. */
    EMBER_GRAPH_ATTENTION_EXT = 13,
    /* ROPE (same dst, w factors, n_head, head_dim, n_rot, rope_mode, rope_theta, rope_freq_scale) with
     * YaRN's ramp and an output scale, as llama.cpp's rope computes them. For pair i (0 <= i < n_rot/2):
     *   t_extrap = pos * rope_theta^(-2i/n_rot) / factor_i        (factor_i = w[i], or 1 without w)
     *   t_interp = rope_freq_scale * t_extrap
     *   rope_ext_factor == 0:  angle = t_interp,  mscale = rope_attn_factor
     *   rope_ext_factor != 0:  mix = ramp(i) * rope_ext_factor, angle = t_interp (1 - mix) + t_extrap mix,
     *                          mscale = rope_attn_factor * (1 + 0.1 ln(1 / rope_freq_scale))
     *   ramp(i) = 1 - clamp((i - lo) / max(0.001, hi - lo), 0, 1),
     *   lo = max(0, floor(c(rope_beta_fast))), hi = min(n_rot - 1, ceil(c(rope_beta_slow))),
     *   c(b) = n_rot ln(rope_n_ctx_orig / (2 pi b)) / (2 ln rope_theta)
     * and the pair turns by angle with both outputs multiplied by mscale: x0' = (x0 cos - x1 sin) mscale,
     * x1' = (x0 sin + x1 cos) mscale. Angles in double precision, as ROPE. YaRN (gpt-oss) uses
     * ext_factor 1; LongRoPE (Phi-3) uses ext_factor 0 with its factors as w and its attention factor as
     * rope_attn_factor; with ext_factor 0 and attn_factor 1 it is ROPE exactly. */
    EMBER_GRAPH_ROPE_YARN = 14,
    /* A mixture-of-experts feed-forward block, per token row:
     *   src:  the FFN's input x (width n_in); src2: the router's logits l (width n_expert, a MATMUL before)
     *   w, w2, w3: the experts' gate, up and down matrices, 3-D tensors [n_in, n_ff, n_expert],
     *         [n_in, n_ff, n_expert], [n_ff, n_out, n_expert] (ne[2] = expert; each expert's matrix is
     *         the contiguous ne[0] x ne[1] slice); b, b2, b3: optional F32 biases [n_ff, n_expert],
     *         [n_ff, n_expert], [n_out, n_expert] (-1: none); n_out = width(dst), dst is neither src.
     *   The k = n_expert_used experts e_0..e_{k-1} with the largest logits are chosen (ties: the lower
     *   index first), weighted by
     *     EMBER_GRAPH_MOE_GATE_SOFTMAX_TOPK: g_j = e^(l_{e_j}) / sum_{i<k} e^(l_{e_i}) (softmax over the
     *         chosen; equals the softmax over all renormalised over the chosen: Mixtral, Qwen3-MoE, gpt-oss)
     *     EMBER_GRAPH_MOE_GATE_SOFTMAX: g_j = e^(l_{e_j}) / sum_{all e} e^(l_e) (not renormalised)
     *     EMBER_GRAPH_MOE_GATE_SIGMOID: the k experts with the largest sigmoid(l_e) + s_e are chosen (s: the
     *         F32 [n_expert] tensor sel_bias, or 0 without; ties: the lower index first), weighted by
     *         g_j = sigmoid(l_{e_j}) / max(sum_{i<k} sigmoid(l_{e_i}), 2^-14) (LFM2-MoE)
     *     EMBER_GRAPH_MOE_GATE_SIGMOID_INPUT: the k largest logits (no bias), g_j = sigmoid(l_{e_j}) (not
     *         renormalised), applied to the expert's input instead of its output: dst = sum_j (the
     *         expression below with x replaced by g_j x and g_j itself by 1) (Llama 4)
     *   and dst = sum_j g_j (W3_{e_j} act(W_{e_j} x + b_{e_j}, W2_{e_j} x + b2_{e_j}) + b3_{e_j}), act by
     *   moe_act:
     *     EMBER_GRAPH_ACT_SILU:       silu(a) * u
     *     EMBER_GRAPH_ACT_GELU:       gelu(a) * u (GEGLU's tanh form)
     *     EMBER_GRAPH_ACT_SWIGLU_OAI: a' = min(a, act_limit), u' = clamp(u, -act_limit, act_limit),
     *                                 a' * sigmoid(act_alpha * a') * (u' + 1)   (gpt-oss: 1.702, 7)
     * A backend may batch the rows by expert (a prefill then reads each chosen expert's weights once); the
     * sum over j is in the order of the chosen (largest logit first). */
    EMBER_GRAPH_MOE = 15,

    /* --- Ops of the hybrid families, whose recurrent layers keep a fixed-size state per sequence beside the
     * attention layers' KV rows (Qwen3.5/3.6's Gated DeltaNet). A node that carries state (SSM_CONV,
     * GATED_DELTA) owns `state_size` floats at `state_offset` of its sequence's state (the description's
     * state_floats in all, module_api.h): the batch says per token which state slot its sequence reads and
     * writes. A sequence's tokens in one batch are consecutive and in position order; its first token there
     * reads the state its slot held before the pass (state_src in the batch: -1 for the zero state of a new
     * sequence, or another slot), the rest follow from it, and the slot holds the state after the last. */

    /* dst[r][n_rot + g*head_dim + i] = src[r][g*stride + n + i] for g < n_head, i < head_dim, stride =
     * width(src) / n_head: column n.. of each of n_head equal groups (n_head 1: one column range), written
     * from dst's column n_rot on (the rest of dst untouched). Qwen3.5's attention query and output gate,
     * interleaved per head in one product; Qwen3-Next's q, k, v and z, interleaved per key head. */
    EMBER_GRAPH_COPY_COLS = 16,
    /* dst = src * sigmoid(src2), elementwise; src2 of width(src), or of width 1 (one gate per row). dst may
     * be src. */
    EMBER_GRAPH_SIGMOID_MUL = 17,
    /* A causal depthwise convolution over each sequence's last K inputs, then SiLU: with w an F32 [K, C]
     * (ne[0] = K; C = width(src) = width(dst)), for the sequence's inputs x_t (src rows, in position order,
     * preceded by the carried window of its K - 1 earlier inputs, zeros for a new sequence)
     *   dst_t[c] = silu(sum_{j<K} w[c][j] * x_{t-K+1+j}[c] + b[c]).
     * b: an optional F32 [C] bias (-1: none, the term 0; Mamba-2's conv1d bias). n: the activation,
     * EMBER_GRAPH_SSM_CONV_SILU (0) as above or EMBER_GRAPH_SSM_CONV_LINEAR (1): the sum itself (LFM2's
     * short convolution).
     * State: the last K - 1 inputs, (K - 1) * C floats (state_size). */
    EMBER_GRAPH_SSM_CONV = 18,
    /* The gated delta rule (Gated DeltaNet). src rows hold q (n_head_kv heads of head_dim), k (as many) and v
     * (n_head heads of head_dim) in turn; src2 the raw decay inputs a and src3 the raw write strengths b, one
     * per value head (width n_head); w, w2 F32 [n_head]: a bias dt and a decay rate A (negative). Per token:
     * q and k L2-normalised per head (x / max(|x|, eps)), q scaled by `scale`; value head h pairs with key
     * head h % n_head_kv (n = 0: the key heads tiled) or h / (n_head / n_head_kv) (n = 1: each key head's
     * value heads adjacent); g = exp(softplus(a_h + dt_h) * A_h), beta = sigmoid(b_h); the head's state M
     * (head_dim x head_dim, M[i][j]: key dim i, value dim j) becomes g M, then for each j
     *   d_j = beta (v_j - sum_i M[i][j] k_i),  M[i][j] += k_i d_j,  dst_j = sum_i M[i][j] q_i.
     * dst: n_head heads of head_dim. State: n_head * head_dim^2 floats (state_size), laid out per head with
     * j outer and i inner. */
    EMBER_GRAPH_GATED_DELTA = 19,

    /* --- A program fed by another pass's rows (a multi-token-prediction block reads the main model's
     * final hidden state). */

    /* dst[t] = row t of the batch's input rows (ember_mod_batch.inputs: n_tokens rows of width(dst)
     * floats). dst is per token. */
    EMBER_GRAPH_INPUT_ROWS = 20,

    /* --- Ops of the encoders (the BERT family: post-norm layers with biased LayerNorms, a plain GELU FFN,
     * learned absolute positions). */

    /* dst[r] = (src[r] - mean(src[r])) / sqrt(var(src[r]) + eps) * w + b over the whole row (w, b: optional
     * F32 [width], -1 for none). dst may be src. */
    EMBER_GRAPH_LAYER_NORM = 21,
    /* dst = gelu(src), elementwise, GEGLU's tanh form (dst may be src). */
    EMBER_GRAPH_GELU = 22,
    /* dst[t] += row pos[t] of w (F32 or F16 [width(dst), n_pos]; a position past n_pos is an error): learned
     * absolute position embeddings. */
    EMBER_GRAPH_ADD_POS_ROWS = 23,

    /* Mamba-2's selective state-space scan. src rows hold x (n_head heads of head_dim), then B and C (n_group
     * groups of d_state each: n = d_state, n_head_kv = n_group; head h reads group h / (n_head / n_group));
     * src2 the raw time
     * steps dt, one per head (width n_head); w, w2, b F32 [n_head]: A (negative), D and the dt bias. Per
     * token and head: s = softplus(dt_h + b_h) (x > 20: x), dA = exp(s * A_h); the head's state H
     * (head_dim x d_state, H[i][k]) becomes H[i][k] = H[i][k] * dA + B[k] * x_i * s, and
     *   dst_i = sum_k H[i][k] C[k] + D_h x_i.
     * dst: n_head * head_dim per row. State: n_head * head_dim * d_state floats (state_size), per head,
     * i outer and k inner. */
    EMBER_GRAPH_SSM_SCAN = 24,
    /* dst = src * src2, elementwise (same widths; dst may be src or src2). LFM2's short-convolution gates. */
    EMBER_GRAPH_MUL = 25
};

/* ATTENTION_EXT's attn_mask (node field appended for the encoders): which keys a query sees.
 *  CAUSAL:   positions up to its own (ATTENTION's rule).
 *  SEQUENCE: every position of its sequence stored so far, up to that of the sequence's last token in this
 *            pass (bidirectional: an encoder's or an embedding model's pass over a whole text). A
 *            sequence's tokens are consecutive in the batch (one block table), as for the recurrent ops. */
enum ember_graph_attn_mask { EMBER_GRAPH_MASK_CAUSAL = 0, EMBER_GRAPH_MASK_SEQUENCE = 1 };

/* The op's name ("rms_norm"), for messages; NULL for a number this header does not define (a backend
 * then refuses the model naming the number). */
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
    case EMBER_GRAPH_SCALE: return "scale";
    case EMBER_GRAPH_SOFTCAP: return "softcap";
    case EMBER_GRAPH_GEGLU: return "geglu";
    case EMBER_GRAPH_ATTENTION_EXT: return "attention_ext";
    case EMBER_GRAPH_ROPE_YARN: return "rope_yarn";
    case EMBER_GRAPH_MOE: return "moe";
    case EMBER_GRAPH_COPY_COLS: return "copy_cols";
    case EMBER_GRAPH_SIGMOID_MUL: return "sigmoid_mul";
    case EMBER_GRAPH_SSM_CONV: return "ssm_conv";
    case EMBER_GRAPH_GATED_DELTA: return "gated_delta";
    case EMBER_GRAPH_INPUT_ROWS: return "input_rows";
    case EMBER_GRAPH_LAYER_NORM: return "layer_norm";
    case EMBER_GRAPH_GELU: return "gelu";
    case EMBER_GRAPH_ADD_POS_ROWS: return "add_pos_rows";
    case EMBER_GRAPH_SSM_SCAN: return "ssm_scan";
    case EMBER_GRAPH_MUL: return "mul";
    default: return NULL;
    }
}

enum ember_graph_rope_mode { EMBER_GRAPH_ROPE_NORMAL = 0, EMBER_GRAPH_ROPE_NEOX = 2 };
enum ember_graph_rows { EMBER_GRAPH_ROWS_TOKENS = 0, EMBER_GRAPH_ROWS_LOGITS = 1 };
/* MOE's gating (moe_gating) and activation (moe_act). */
enum ember_graph_moe_gating {
    EMBER_GRAPH_MOE_GATE_SOFTMAX_TOPK = 0, EMBER_GRAPH_MOE_GATE_SOFTMAX = 1, EMBER_GRAPH_MOE_GATE_SIGMOID = 2,
    EMBER_GRAPH_MOE_GATE_SIGMOID_INPUT = 3
};
enum ember_graph_act { EMBER_GRAPH_ACT_SILU = 0, EMBER_GRAPH_ACT_GELU = 1, EMBER_GRAPH_ACT_SWIGLU_OAI = 2 };
/* SSM_CONV's activation (its node's n). */
enum ember_graph_ssm_conv_act { EMBER_GRAPH_SSM_CONV_SILU = 0, EMBER_GRAPH_SSM_CONV_LINEAR = 1 };

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
    uint32_t n;             /* RMS_NORM: values per group; SSM_CONV: activation; SSM_SCAN: d_state */
    uint32_t n_head, n_head_kv, head_dim; /* ROPE (n_head only), ATTENTION */
    uint32_t n_rot, rope_mode;            /* ROPE */
    float eps;                            /* RMS_NORM */
    float rope_theta, rope_freq_scale;    /* ROPE */
    float scale;                          /* ATTENTION, ATTENTION_EXT, SCALE */
    /* Appended for the ops from SCALE on (read by those only; 0 or -1 elsewhere). */
    uint32_t window;                      /* ATTENTION_EXT: sliding window in positions, 0: none */
    float softcap;                        /* ATTENTION_EXT (0: none), SOFTCAP */
    float rope_ext_factor, rope_attn_factor, rope_beta_fast, rope_beta_slow; /* ROPE_YARN */
    uint32_t rope_n_ctx_orig;                                                /* ROPE_YARN */
    int32_t w2, w3, b2, b3;               /* MOE: up and down experts, their biases (-1: none) */
    uint32_t n_expert, n_expert_used;     /* MOE */
    uint32_t moe_gating, moe_act;         /* MOE: an ember_graph_moe_gating, an ember_graph_act */
    float act_alpha, act_limit;           /* MOE with EMBER_GRAPH_ACT_SWIGLU_OAI */
    /* Appended for the ops from COPY_COLS on. */
    int32_t src3;                         /* GATED_DELTA: b (-1 elsewhere) */
    uint32_t state_offset, state_size;    /* SSM_CONV, GATED_DELTA, SSM_SCAN: floats of the sequence's state */
    /* Appended for ATTENTION_EXT's chunked local attention and attention temperature (0: off). */
    uint32_t attn_local_chunk;            /* ATTENTION_EXT */
    float attn_temp_scale, attn_temp_offset; /* ATTENTION_EXT */
    uint32_t attn_temp_floor;             /* ATTENTION_EXT */
    /* Appended for shared KV caches (Gemma 4). */
    uint32_t kv_from;                     /* ATTENTION, ATTENTION_EXT: 1 + the layer whose cache it reads;
                                             0: its own (`layer`) */
    /* Appended for the encoders. */
    uint32_t attn_mask;                   /* ATTENTION_EXT: an ember_graph_attn_mask (0: causal) */
    /* Appended for MOE's sigmoid gating. */
    int32_t sel_bias;                     /* MOE with EMBER_GRAPH_MOE_GATE_SIGMOID: the choice's bias (-1: none) */
} ember_graph_node;

/* The layer whose KV cache an attention node reads (see ATTENTION's kv_from). */
static inline int32_t ember_graph_kv_layer(const ember_graph_node *n) {
    return n->kv_from > 0 ? (int32_t)(n->kv_from - 1) : n->layer;
}

#ifdef __cplusplus
}
#endif

#endif
