// kernels.hpp — the CPU backend's compute kernels.
//
// Conventions: activations are f32, row-major, one row per token. A weight matrix W has n_out rows of
// n_in elements (GGUF ne[0] = n_in, ne[1] = n_out), stored in its GGUF type and used as stored:
// quantized weights (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4)
// are multiplied against activations quantized to 8 bits per block of 32 on the fly (integer dot
// products), F16/BF16/F32 against f32 activations.
// Each kernel picks its ISA variant once, at first use (AMX for prefill, else AVX-512 with VNNI, else
// AVX2+FMA+F16C where the CPU has them, scalar otherwise); tests/test_cpu_kernels.cpp checks every variant against a double-precision reference.
#pragma once

#include "backend/graph.h"
#include "core/dtype.hpp"
#include "cpu/threadpool.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ember::cpu {

struct WeightView {
    DType type = DType::F32;
    int64_t n_in = 0;       // elements per row (GGUF ne[0])
    int64_t n_out = 0;      // rows (GGUF ne[1])
    const void *data = nullptr;
    size_t row_bytes = 0;   // dtype_row_bytes(type, n_in)
    // Q4_K, Q6_K, Q4_0 and Q8_0 only: the rows are interleaved 16 at a time (rows16.hpp), as the model's
    // loader left them in the CPU's private copy of the weights. Only matmul reads such a weight.
    bool rows16 = false;
};

// Reusable scratch memory for kernels (quantized activations); grows on demand, never shrinks.
struct Scratch {
    std::vector<uint8_t> bytes;
    void *get(size_t n) { if (bytes.size() < n) bytes.resize(n); return bytes.data(); }
};

// --- conversions -----------------------------------------------------------------------------------
// n must be a multiple of the type's block size.
void dequantize_row(DType type, const void *src, float *dst, int64_t n);
void quantize_row_q8_0(const float *src, BlockQ8_0 *dst, int64_t n);
// Reference quantizer for Q4_0 (tests and the synthetic-model writer).
void quantize_row_q4_0(const float *src, BlockQ4_0 *dst, int64_t n);
// Reference quantizer for any quantized weight type (every one listed at the top of this file):
// round to nearest within scales chosen from each block's range, no search for better scales. dst
// gets n / block_size blocks; n must be a multiple of the type's block size.
void quantize_row(DType type, const float *src, void *dst, int64_t n);

// out[t][:] = dequantized row ids[t] of W (the embedding lookup). ids are checked by the caller.
void get_rows(const WeightView &w, const int32_t *ids, int64_t n_ids, float *out);

// --- matrix products -------------------------------------------------------------------------------
// Y[t][o] = sum_i W[o][i] * X[t][i] + (bias ? bias[o] : 0), for t < n_tokens, o < n_out.
// X has n_tokens rows of w.n_in floats; Y has n_tokens rows of w.n_out floats.
// precise (EMBER_PRECISION_HIGH, quantized weights only): the activations carry ~15 bits instead of 8
// (matmul.cpp, matmul_precise, says how); float weights are unaffected.
void matmul(ThreadPool &pool, Scratch &scratch, const WeightView &w, const float *x, int64_t n_tokens,
            float *y, const float *bias, bool precise = false);

// Scratch bytes matmul needs for n_tokens rows of n_in inputs (the most it grows to).
size_t matmul_scratch_bytes(int64_t n_in, int64_t n_tokens);

// Several weights that read the same input (Q/K/V, gate/up) in one parallel pass: the input is
// quantized once and one dispatch covers all outputs. n_w <= 4.
void matmul_multi(ThreadPool &pool, Scratch &scratch, const WeightView *const *w, int n_w,
                  const float *x, int64_t n_tokens, float *const *y, const float *const *bias, bool precise = false);

// --- elementwise and normalisation -----------------------------------------------------------------
// out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w   (out may equal x; w may be null: no weight)
void rms_norm(const float *x, const float *w, float *out, int64_t n_rows, int64_t dim, float eps);
// out = silu(gate) * up, n elements (out may alias either input)
void swiglu(const float *gate, const float *up, float *out, int64_t n);
// x += y
void add_inplace(float *x, const float *y, int64_t n);
// out = x * s; out = cap * tanh(x / cap); out = gelu(gate) * up (tanh form). n elements, out may alias.
void scale(const float *x, float s, float *out, int64_t n);
void softcap(const float *x, float cap, float *out, int64_t n);
void geglu(const float *gate, const float *up, float *out, int64_t n);
// out[r] = (x[r] - mean) / sqrt(var + eps) * w + b over rows of dim (w, b may be null; out may equal x).
void layer_norm(const float *x, const float *w, const float *b, float *out, int64_t n_rows, int64_t dim, float eps);
// out = gelu(x), the tanh form (out may alias x).
void gelu(const float *x, float *out, int64_t n);
// out = a * b, n elements (out may alias either input)
void mul(const float *a, const float *b, float *out, int64_t n);

// --- rotary position embedding ---------------------------------------------------------------------
struct RopeParams {
    int n_rot = 0;                   // rotated dims per head (even, <= head_dim); the rest pass through
    bool neox = false;               // false: rotate pairs (2i, 2i+1); true: (i, i + n_rot/2) (graph.h: NEOX)
    float theta_base = 10000.0f;
    float freq_scale = 1.0f;         // linear scaling: angle *= freq_scale
    const float *freq_factors = nullptr;  // optional n_rot/2 divisors of each frequency
    // YaRN and LongRoPE (graph.h's ROPE_YARN): the ramp between interpolated and extrapolated angles
    // (ext_factor 0: none) and the scale of the rotated values (attn_factor, times YaRN's own term).
    float ext_factor = 0.0f, attn_factor = 1.0f, beta_fast = 32.0f, beta_slow = 1.0f;
    uint32_t n_ctx_orig = 0;
};
// x has n_tokens rows of n_heads * head_dim floats; token t is at position pos[t]. In place.
// angle(t, i) = pos[t] * freq_scale * theta_base^(-2i/n_rot) / freq_factors[i]
void rope(float *x, int64_t n_tokens, int n_heads, int head_dim, const int32_t *pos, const RopeParams &p);

// --- attention ---------------------------------------------------------------------------------------
struct AttnParams {
    int n_head = 0;
    int n_head_kv = 0;   // divides n_head (grouped-query attention: head h reads kv head h / (n_head / n_head_kv))
    int head_dim = 0;
    float scale = 0;     // usually 1 / sqrt(head_dim)
    uint32_t window = 0;           // > 0: a query at p sees positions p - window + 1 .. p only
    float softcap = 0;             // > 0: scores become softcap * tanh(score / softcap)
    const float *sinks = nullptr;  // [n_head] sink logits (graph.h's ATTENTION_EXT), or none
    uint32_t local_chunk = 0;      // > 0: a query at p sees the positions of its chunk p / local_chunk only
    float temp_scale = 0, temp_offset = 0;   // != 0: graph.h's attention temperature, per query position
    uint32_t temp_floor = 0;
    // graph.h's EMBER_GRAPH_MASK_SEQUENCE: a query sees its sequence's keys up to the position of that
    // sequence's last token in the pass (its tokens consecutive, one block table), not only up to its own.
    bool bidirectional = false;
};
// One layer's paged K/V cache: block b, row r (position r within that block) of K starts at
// k + (b * block_size + r) * row_bytes; V likewise. A row holds n_head_kv * head_dim values of `type`:
// F16, or Q8_0 or Q4_0 (blocks of 32 values with one f16 scale, GGUF's layouts; a block may straddle
// two heads, and head_dim must be a multiple of 8).
struct PagedKv {
    const uint8_t *k = nullptr;
    const uint8_t *v = nullptr;
    DType type = DType::F16;
    size_t row_bytes = 0;
    uint32_t block_size = 0;
};
// Causal attention over a paged cache, flash style: keys are visited block by block with an online
// softmax, so no score matrix is ever materialised. q: n_tokens rows of n_head * head_dim. Query t sees
// positions 0..q_pos[t] of its own sequence, whose block table is q_table[t] (position j is in block
// q_table[t][j / block_size], row j % block_size); tokens of different sequences can share one call.
// out like q.
void attention(ThreadPool &pool, const float *q, const int32_t *q_pos, const int32_t *const *q_table,
               int64_t n_tokens, const PagedKv &kv, float *out, const AttnParams &p);

// --- mixture of experts (graph.h's MOE) --------------------------------------------------------------
struct MoeParams {
    // One expert's matrix of each 3-D expert tensor (n_out: ne[1]); data points at expert 0, expert e
    // follows at e * n_out * row_bytes.
    WeightView gate, up, down;
    const float *gate_b = nullptr, *up_b = nullptr, *down_b = nullptr;  // [n_expert][n_out of each], or none
    int n_expert = 0, n_used = 0;
    uint32_t gating = 0, act = 0;   // graph.h's ember_graph_moe_gating, ember_graph_act
    const float *sel_bias = nullptr; // EMBER_GRAPH_MOE_GATE_SIGMOID's choice bias [n_expert], or none
    float alpha = 0, limit = 0;     // EMBER_GRAPH_ACT_SWIGLU_OAI
    bool precise = false;           // the experts' products as matmul's `precise`
};
// The choice of experts: sel[t * n_used + j] the j-th chosen expert of token t (largest logit first),
// weight[...] its gate weight.
void moe_route(const MoeParams &p, const float *logits, int64_t n_tokens, int32_t *sel, float *weight);
// y (n_tokens rows of down.n_out) = the MOE block of x (rows of gate.n_in) with router logits (rows of
// n_expert), the experts' products batched by expert. work: grown as needed, reusable across calls.
void moe(ThreadPool &pool, Scratch &scratch, const MoeParams &p, const float *x, const float *logits, int64_t n_tokens,
         float *y, std::vector<float> &work);

// Converts n_rows contiguous rows of n floats to f16 (round to nearest even) into dst, e.g. a KV cache
// row range (the caller offsets dst to its first row).
void store_f16(const float *src, uint16_t *dst, int64_t n_rows, int64_t n);
// One row of n floats into a KV cache row of `type` (F16, or Q8_0 or Q4_0 with n a multiple of 32).
void store_kv_row(DType type, const float *src, uint8_t *dst, int64_t n);

// The kernels' ISA levels, lowest first. Avx512 needs AVX-512 F, BW, VL, DQ and VNNI (and AVX2); Amx
// needs AMX-TILE and AMX-INT8 on top, and the OS's permission for the process.
enum class Isa : int { Scalar = 0, Avx2 = 1, Avx512 = 2, Amx = 3 };
// Which ISA variant the kernels use on this CPU ("amx", "avx512", "avx2" or "scalar").
const char *isa_name();
// Why `level` cannot be used here (the CPU lacks it, or EMBER_CPU_ISA caps below it), or nullptr.
const char *isa_unavailable(Isa level);
// Tests and benchmarks: use the kernels of `level` from now on, process-wide; false (and no change)
// where isa_unavailable says it cannot run.
bool force_isa(Isa level);
// Tests: force the scalar variants (true) or the best available (false).
void force_scalar(bool on);

} // namespace ember::cpu
