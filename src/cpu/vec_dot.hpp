// vec_dot.hpp — private to src/cpu: the per-ISA kernel table behind kernels.hpp.
//
// Every kernel with an AVX2 variant has a scalar twin with the same signature; cpu_features.cpp picks
// one table at first use (or as force_isa says) and the public entry points call through it. Only
// the inner loops live behind the table: threading, chunking and argument checks stay in the
// baseline-compiled files, so the AVX2 files hold nothing that could run before the CPU check.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ember::cpu::detail {

// Activations quantized for the integer paths, token-major. Token t has n_in int8 values at
// qs + t * n_in, and for each of its nb = n_in / 32 blocks a scale d (value = d * q) and the block's
// sum of q at index t * nb + b. The scale stays f32 rather than fp16 (nothing stores these, so there is
// no reason to lose the precision), and the sum lets Q4_0 weights be multiplied as unsigned nibbles
// with the offset of 8 taken out once per block (see vec_dot_avx2.cpp).
struct QuantActs {
    const int8_t *qs = nullptr;
    const float *d = nullptr;
    const float *sum = nullptr;   // integers, exact in float: |sum| <= 32 * 127
    int64_t nb = 0;
    // d again by groups of 16 tokens, for the AMX tiles' epilogues (which then reach a group's 16 tokens
    // from one pointer, not 16): token 16 g + i's block b at (g * nb + b) * 16 + i; tokens past the last
    // are zero. Null below 16 tokens (nothing reads it there).
    const float *d16 = nullptr;
};

// Activations quantized for Q4_K weights, token-major: one scale per super-block of 256 (where QuantActs
// has one per 32), so that a super-block's eight sub-block integers, weighted by their 6-bit scales, sum
// exactly in int32 and get their float scales once per super-block instead of once per 32 (the Q4_K
// kernels' float work, which bounded their prefill, drops eightfold; the AMX tiles fold the scales into
// the weights and take 64 bytes per product). The price is precision: each x is off by up to half the
// step of its 256-element super-block's largest value rather than its 32-element block's. Every level's
// Q4_K kernel computes, for each super-block s in order (docs/architecture.md, "Q4_K activations"):
//   isum = sum_j sc_j * (sum_l code_(32j+l) * q_(256s+32j+l)),  msum = sum_j m_j * sum_(8s+j)   (int32)
//   acc = fma(float(isum), d * d_s, acc);  acc = fma(-float(msum), dmin * d_s, acc)
// with acc from 0, then y = acc + bias: the AVX2, AVX-512 and AMX kernels give the same bits.
struct QuantActsK {
    const int8_t *qs = nullptr;    // token t's n_in values at qs + t * n_in: x ~= d * q
    const float *d = nullptr;      // token t, super-block s at t * nsb + s: max |x| / 127
    const int16_t *sum = nullptr;  // token t, 32-element block b at t * nb + b: the sum of its q
    int64_t nsb = 0, nb = 0;       // n_in / 256, n_in / 32
    // The same by groups of 16 tokens, for the AMX tiles' epilogues (null below 16 tokens; padding
    // tokens zero): token 16 g + i, super-block s: d16[(g * nsb + s) * 16 + i], its 8 block sums at
    // sum16[((g * nsb + s) * 16 + i) * 8 + j].
    const float *d16 = nullptr;
    const int16_t *sum16 = nullptr;
};

// One weight's share of a matmul: rows [r0, r1) of W against all n_tokens activation rows.
struct MatmulJob {
    const uint8_t *w = nullptr;  // row 0 of the weight
    size_t row_bytes = 0;
    int64_t n_in = 0;
    int64_t n_tokens = 0;
    const float *x = nullptr;    // f32 activations (F32/F16/BF16 weights), row stride n_in
    QuantActs xq;                // quantized activations (quantized weights but Q4_K)
    QuantActsK xk;               // the same for Q4_K weights
    float *y = nullptr;          // output, row stride y_stride (= n_out)
    int64_t y_stride = 0;
    const float *bias = nullptr;
    // Q4_K, Q6_K, Q4_0 or Q8_0 interleaved 16 rows at a time (rows16.hpp): rows [0, n_rows16) are in full
    // groups, the rest in the file's layout. 0: the file's layout (every other weight).
    int64_t n_rows16 = 0;
    // Set by a kernel that could not get the memory it needs (rows16's copy back): it leaves its rows
    // unwritten and the product's caller throws EMBER_ERR_OUT_OF_MEMORY. Required with n_rows16 > 0.
    std::atomic<bool> *failed = nullptr;
};
using MatmulRowsFn = void (*)(const MatmulJob &job, int64_t r0, int64_t r1);

// The float kinds first: every kind from kWQ8_0 on takes the quantized activations (matmul.cpp relies on
// the order).
enum WeightKind : int {
    kWF32 = 0, kWF16, kWBF16, kWQ8_0, kWQ4_0, kWQ4_1, kWQ5_0, kWQ5_1, kWQ4_K, kWQ5_K, kWQ6_K,
    kWQ2_K, kWQ3_K, kWIQ4_NL, kWIQ4_XS, kWMXFP4, kWeightKinds
};

// One (token, head) pair of attention over a paged cache: positions 0..n_keys-1, position j in row
// j % block_size of block table[j / block_size]. Row n of the cache starts kv_stride bytes after row
// n - 1, across block boundaries too. For an F16 cache k and v point at this head's slice of row 0 of
// block 0; for a Q8_0 or Q4_0 cache (rows of 32-element blocks, which may straddle heads) at the start
// of that row, and the head's elements begin at element head_off of each row.
struct AttnHead {
    const float *q = nullptr;
    const uint8_t *k = nullptr;
    const uint8_t *v = nullptr;
    size_t kv_stride = 0;
    int head_off = 0;
    const int32_t *table = nullptr;
    uint32_t block_size = 0;
    int64_t n_keys = 0;      // keys first_key .. n_keys - 1 (positions)
    int head_dim = 0;
    float scale = 0;
    float *out = nullptr;
    int64_t first_key = 0;   // > 0 under a sliding window
    float softcap = 0;       // > 0: scores are capped (graph.h's ATTENTION_EXT)
    bool has_sink = false;   // a sink logit joins the softmax's normaliser
    float sink = 0;
};

// A tile's scores after the cap: s = cap * tanh(s / cap). Rare, so plain tanh.
static inline void attn_softcap(float *s, int n, float cap) {
    for (int j = 0; j < n; ++j) s[j] = cap * __builtin_tanhf(s[j] / cap);
}

// 1 / (the softmax's normaliser), given the running max m and sum l of an online softmax, with the sink
// (if any) joined in; *corr gets the factor the accumulator needs first (e^(m - max(m, sink))).
static inline float attn_finish(const AttnHead &a, float m, float l, float *corr) {
    *corr = 1.0f;
    if (a.has_sink) {
        const float mf = m > a.sink ? m : a.sink;
        *corr = __builtin_expf(m - mf);
        l = l * *corr + __builtin_expf(a.sink - mf);
    }
    return l > 0 ? *corr / l : 0.0f;
}

struct DeltaHead;   // recurrent_loops.hpp
struct ConvChunk;
void gated_delta_head_scalar(const DeltaHead &job);   // recurrent.cpp
void gated_delta_head_avx2(const DeltaHead &job);     // recurrent_avx2.cpp
void gated_delta_head_avx512(const DeltaHead &job);   // recurrent_avx512.cpp: the AVX2 variant's bits
void ssm_conv_chunk_scalar(const ConvChunk &job);
void ssm_conv_chunk_avx2(const ConvChunk &job);

struct KernelTable {
    const char *name;
    MatmulRowsFn matmul[kWeightKinds];
    // Quantizes one row of n (multiple of 32) floats into qs, d[n/32], sum[n/32] (QuantActs layout).
    void (*quantize_acts)(const float *x, int64_t n, int8_t *qs, float *d, float *sum);
    // Quantizes one row of n (multiple of 256) floats into qs, d[n/256], sum[n/32] (QuantActsK layout).
    void (*quantize_acts_k)(const float *x, int64_t n, int8_t *qs, float *d, int16_t *sum);
    void (*attend_head)(const AttnHead &a);          // F16 cache
    void (*attend_head_q8_0)(const AttnHead &a);     // Q8_0 cache (head_dim a multiple of 8)
    void (*attend_head_q4_0)(const AttnHead &a);     // Q4_0 cache (head_dim a multiple of 8)
    void (*swiglu)(const float *gate, const float *up, float *out, int64_t n);
    void (*f32_to_f16)(const float *src, uint16_t *dst, int64_t n);
    // n (<= kMaxAttnGroup) query heads that read the same KV head, of n_tok tokens of one sequence
    // (a[t * n + g]: head g of token t; the same block table and first_key, so the same tiles;
    // n * n_tok <= kMaxAttnBlockHeads and n * n_tok * head_dim <= kAttnBlockFloats), head_dim a
    // multiple of 8, with attend_head's bits for each; null where the level has none (attention() then
    // calls attend_head per head).
    void (*attend_heads)(const AttnHead *a, int n, int n_tok);       // F16 cache
    void (*attend_heads_q8_0)(const AttnHead *a, int n, int n_tok);  // Q8_0 cache
    void (*attend_heads_q4_0)(const AttnHead *a, int n, int n_tok);  // Q4_0 cache
    // Weights interleaved 16 rows at a time (rows16.hpp), by rows16_kind (Q4_K, Q6_K, Q4_0, Q8_0), and
    // whether this level reads them with tiles of its own (the loader then interleaves them; else they
    // go through rows copied back to the file's layout).
    MatmulRowsFn matmul_rows16[4];
    bool rows16_native;
    // The recurrent layers' loops (recurrent_loops.hpp): the same bits at every level.
    void (*gated_delta_head)(const DeltaHead &job);
    void (*ssm_conv_chunk)(const ConvChunk &job);
    // out = gelu(x) (tanh form), times up where up is not null (gelu_lanes.hpp: the same bits at every level).
    void (*gelu)(const float *x, const float *up, float *out, int64_t n);
};

// The table in use (never null).
const KernelTable &kernels();

// Scalar variants (vec_dot_scalar.cpp, attention.cpp, elementwise.cpp).
void matmul_rows_f32_scalar(const MatmulJob &, int64_t, int64_t);
void matmul_rows_f16_scalar(const MatmulJob &, int64_t, int64_t);
void matmul_rows_bf16_scalar(const MatmulJob &, int64_t, int64_t);
void matmul_rows_q8_0_scalar(const MatmulJob &, int64_t, int64_t);
void matmul_rows_q4_0_scalar(const MatmulJob &, int64_t, int64_t);
void matmul_rows_q4_1_scalar(const MatmulJob &, int64_t, int64_t);
void matmul_rows_q5_0_scalar(const MatmulJob &, int64_t, int64_t);
void matmul_rows_q5_1_scalar(const MatmulJob &, int64_t, int64_t);
void matmul_rows_q4_k_scalar(const MatmulJob &, int64_t, int64_t);  // vec_dot_k_scalar.cpp
void matmul_rows_q5_k_scalar(const MatmulJob &, int64_t, int64_t);
void matmul_rows_q6_k_scalar(const MatmulJob &, int64_t, int64_t);
void matmul_rows_q2_k_scalar(const MatmulJob &, int64_t, int64_t);  // vec_dot_b32_scalar.cpp
void matmul_rows_q3_k_scalar(const MatmulJob &, int64_t, int64_t);
void matmul_rows_iq4_nl_scalar(const MatmulJob &, int64_t, int64_t);
void matmul_rows_iq4_xs_scalar(const MatmulJob &, int64_t, int64_t);
void matmul_rows_mxfp4_scalar(const MatmulJob &, int64_t, int64_t);
void quantize_acts_scalar(const float *x, int64_t n, int8_t *qs, float *d, float *sum);
void quantize_acts_k_scalar(const float *x, int64_t n, int8_t *qs, float *d, int16_t *sum);
void attend_head_scalar(const AttnHead &a);
void attend_head_q8_0_scalar(const AttnHead &a);
void attend_head_q4_0_scalar(const AttnHead &a);
void swiglu_scalar(const float *gate, const float *up, float *out, int64_t n);
void gelu_lanes8(const float *x, const float *up, float *out, int64_t n);  // elementwise.cpp, every level below AVX-512
void f32_to_f16_scalar(const float *src, uint16_t *dst, int64_t n);

// AVX2+FMA+F16C variants (*_avx2.cpp); call only when the CPU has them.
void matmul_rows_f32_avx2(const MatmulJob &, int64_t, int64_t);
void matmul_rows_f16_avx2(const MatmulJob &, int64_t, int64_t);
void matmul_rows_bf16_avx2(const MatmulJob &, int64_t, int64_t);
void matmul_rows_q8_0_avx2(const MatmulJob &, int64_t, int64_t);
void matmul_rows_q4_0_avx2(const MatmulJob &, int64_t, int64_t);
void matmul_rows_q4_1_avx2(const MatmulJob &, int64_t, int64_t);
void matmul_rows_q5_0_avx2(const MatmulJob &, int64_t, int64_t);
void matmul_rows_q5_1_avx2(const MatmulJob &, int64_t, int64_t);
void matmul_rows_q4_k_avx2(const MatmulJob &, int64_t, int64_t);  // vec_dot_k_avx2.cpp
void matmul_rows_q5_k_avx2(const MatmulJob &, int64_t, int64_t);
void matmul_rows_q6_k_avx2(const MatmulJob &, int64_t, int64_t);
void matmul_rows_q2_k_avx2(const MatmulJob &, int64_t, int64_t);  // vec_dot_b32_avx2.cpp
void matmul_rows_q3_k_avx2(const MatmulJob &, int64_t, int64_t);
void matmul_rows_iq4_nl_avx2(const MatmulJob &, int64_t, int64_t);
void matmul_rows_iq4_xs_avx2(const MatmulJob &, int64_t, int64_t);
void matmul_rows_mxfp4_avx2(const MatmulJob &, int64_t, int64_t);
void quantize_acts_avx2(const float *x, int64_t n, int8_t *qs, float *d, float *sum);
void quantize_acts_k_avx2(const float *x, int64_t n, int8_t *qs, float *d, int16_t *sum);
// The prefill GEMM on 8-row panels repacked on the fly (matmul_panel_avx2.cpp); the row kernels above
// hand over to it when a matmul has more tokens than one tile pass (kTokTile).
void matmul_panels_q4_0_avx2(const MatmulJob &, int64_t, int64_t);
void matmul_panels_q8_0_avx2(const MatmulJob &, int64_t, int64_t);
void matmul_panels_q4_k_avx2(const MatmulJob &, int64_t, int64_t);
void matmul_panels_q6_k_avx2(const MatmulJob &, int64_t, int64_t);
void matmul_panels_q3_k_avx2(const MatmulJob &, int64_t, int64_t);
void matmul_panels_mxfp4_avx2(const MatmulJob &, int64_t, int64_t);
void attend_head_avx2(const AttnHead &a);
void attend_head_q8_0_avx2(const AttnHead &a);
void attend_head_q4_0_avx2(const AttnHead &a);
void attend_heads_avx2(const AttnHead *a, int n, int n_tok);
void attend_heads_q8_0_avx2(const AttnHead *a, int n, int n_tok);
void attend_heads_q4_0_avx2(const AttnHead *a, int n, int n_tok);
void swiglu_avx2(const float *gate, const float *up, float *out, int64_t n);
void f32_to_f16_avx2(const float *src, uint16_t *dst, int64_t n);

// AVX-512 (F, BW, VL, DQ) + VNNI variants (*_avx512.cpp); call only when the CPU has them. The level's
// table is the AVX2 one with these in place: prefill of Q4_0, Q8_0, Q4_K and Q6_K on 16-row panels with
// VPDPBUSD (matmul_panel_avx512.cpp; Q2_K, Q3_K, IQ4_NL, IQ4_XS and MXFP4 through Q6_K's panel), Q8_0's
// row tiles and Q4_0's decode tile with VPDPBUSD (vec_dot_avx512.cpp), Q4_K's and Q6_K's decode tiles with
// VPDPBUSD (vec_dot_k_avx512.cpp), the table formats' row tiles with
// VPDPBUSD (vec_dot_b32_avx512.cpp). Each gives the bits of its AVX2 twin, so the two levels agree
// exactly.
void matmul_rows_q8_0_avx512(const MatmulJob &, int64_t, int64_t);
void matmul_rows_q4_0_avx512(const MatmulJob &, int64_t, int64_t);
void matmul_rows_q4_k_avx512(const MatmulJob &, int64_t, int64_t);
void matmul_rows_q6_k_avx512(const MatmulJob &, int64_t, int64_t);
void matmul_rows_q4_0_decode_avx512(const MatmulJob &, int64_t, int64_t);  // one token only
void matmul_rows_q4_k_decode_avx512(const MatmulJob &, int64_t, int64_t);  // one token only (vec_dot_k_avx512.cpp)
void matmul_rows_q6_k_decode_avx512(const MatmulJob &, int64_t, int64_t);  // one token only (vec_dot_k_avx512.cpp)
void matmul_rows_iq4_nl_avx512(const MatmulJob &, int64_t, int64_t);  // vec_dot_b32_avx512.cpp
void matmul_rows_iq4_xs_avx512(const MatmulJob &, int64_t, int64_t);
void matmul_rows_mxfp4_avx512(const MatmulJob &, int64_t, int64_t);
void matmul_rows_q3_k_avx512(const MatmulJob &, int64_t, int64_t);
void matmul_rows_q2_k_avx512(const MatmulJob &, int64_t, int64_t);
// Activations quantized 16 blocks at a time, the scalar and AVX2 kernels' bits (quant_acts_avx512.cpp).
void quantize_acts_avx512(const float *x, int64_t n, int8_t *qs, float *d, float *sum);
void quantize_acts_k_avx512(const float *x, int64_t n, int8_t *qs, float *d, int16_t *sum);
// attend_heads on 512-bit vectors with the AVX2 kernels' bits (attention_avx512.cpp).
void attend_heads_avx512(const AttnHead *a, int n, int n_tok);
void attend_heads_q8_0_avx512(const AttnHead *a, int n, int n_tok);
void attend_heads_q4_0_avx512(const AttnHead *a, int n, int n_tok);
void matmul_panels_q8_0_avx512(const MatmulJob &, int64_t, int64_t);  // matmul_panel_avx512.cpp
void matmul_panels_q2_k_avx512(const MatmulJob &, int64_t, int64_t);
void matmul_panels_q3_k_avx512(const MatmulJob &, int64_t, int64_t);
void matmul_panels_iq4_nl_avx512(const MatmulJob &, int64_t, int64_t);
void matmul_panels_iq4_xs_avx512(const MatmulJob &, int64_t, int64_t);
void matmul_panels_mxfp4_avx512(const MatmulJob &, int64_t, int64_t);
// Float weights for 8 tokens or more on 512-bit registers holding two rows each, the AVX2 tiles' bits
// (matmul_float_avx512.cpp); fewer tokens go to the AVX2 tiles.
void matmul_rows_f32_avx512(const MatmulJob &, int64_t, int64_t);
void matmul_rows_f16_avx512(const MatmulJob &, int64_t, int64_t);
void matmul_rows_bf16_avx512(const MatmulJob &, int64_t, int64_t);
// swiglu on 16 lanes, the AVX2 kernel's bits (elementwise_avx512.cpp).
void swiglu_avx512(const float *gate, const float *up, float *out, int64_t n);
void gelu_avx512(const float *x, const float *up, float *out, int64_t n);  // gelu_lanes8's bits on 16 lanes

// AMX (AMX-TILE, AMX-INT8) variants (matmul_panel_amx.cpp, built where the compiler has AMX); call only
// when cpu_features.cpp allows the level. Its table is the AVX-512 one with these in place: prefill of
// Q4_0, Q8_0, Q4_K and Q6_K with the tile unit (16 tokens x 16 rows per product), the AVX-512 kernels for
// small batches and decode. Same bits as the AVX-512 level.
void matmul_rows_q8_0_amx(const MatmulJob &, int64_t, int64_t);
void matmul_rows_q4_0_amx(const MatmulJob &, int64_t, int64_t);
void matmul_rows_q4_k_amx(const MatmulJob &, int64_t, int64_t);
void matmul_rows_q6_k_amx(const MatmulJob &, int64_t, int64_t);

// Within one variant an output element is always summed in the same order, whatever tile, row chunk
// or thread computes it, so results do not depend on the thread count (tests/test_cpu_kernels.cpp
// checks 1, 2 and 3 threads for bit-identical output).
constexpr int kTokTile = 4;      // AVX2: token rows that share one pass over a weight row tile
constexpr int kAttnTile = 32;    // positions per online-softmax step, whatever the cache block size
constexpr int kMaxHeadDim = 512; // attention keeps one head's accumulator (up to 512 values) on the stack
constexpr int kMaxAttnGroup = 8; // query heads one attend_heads call serves
// attend_heads serves a block of tokens' heads together (their K and V tiles widened once for all):
// at most this many (token, head) pairs, whose accumulators take at most kAttnBlockFloats floats.
constexpr int kMaxAttnBlockHeads = 64;
constexpr int kAttnBlockFloats = 4096;

// The rows of one attention tile (positions j0 .. j0 + n - 1 of an AttnHead) as runs of consecutive
// rows: run r covers the tile's keys start[r] .. start[r + 1] - 1, whose rows begin off[r] bytes
// after a.k (and a.v), kv_stride apart. A run is a block's share of the tile, or several blocks that
// follow each other in the pool; along a run the kernels step a pointer as over a contiguous cache.
struct AttnRuns {
    int n = 0;
    int start[kAttnTile + 1];
    size_t off[kAttnTile];
};

// One table look-up per block the tile touches, none past the block of its last position (the table
// may end there). static, not just inline: the AVX2 file calls it too, and a shared COMDAT copy could
// be one compiled with -mavx2 (see simd_avx2.hpp).
static inline void attn_tile_runs(const AttnHead &a, int64_t j0, int n, AttnRuns &runs) {
    // Positions fit in 32 bits (they come from int32 q_pos), and a 32-bit divide is the cheaper one.
    const uint32_t bs = a.block_size;
    uint32_t b = static_cast<uint32_t>(j0) / bs;
    uint32_t r = static_cast<uint32_t>(j0) - b * bs;
    runs.n = 0;
    for (int j = 0; j < n; r = 0, ++b) {
        const size_t o = (static_cast<size_t>(a.table[b]) * bs + r) * a.kv_stride;
        const int last = runs.n - 1;
        if (last < 0 || o != runs.off[last] + static_cast<size_t>(j - runs.start[last]) * a.kv_stride) {
            runs.start[runs.n] = j;
            runs.off[runs.n] = o;
            ++runs.n;
        }
        j += bs - r < static_cast<uint32_t>(n - j) ? static_cast<int>(bs - r) : n - j;
    }
    runs.start[runs.n] = n;
}

// AVX2 prefill: weight rows are walked in blocks of about this many bytes, and every token group
// passes over a block before the next, so the block is read from memory once and then from L2
// (512 KiB per core on Zen 3; half of it leaves room for the activations).
constexpr size_t kRowBlockBytes = 128 * 1024;

} // namespace ember::cpu::detail
