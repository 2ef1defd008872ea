// kernels.hpp — the CUDA kernels' launchers (defined in the *.cu files), called from host code.
//
// Conventions: activations are f32 row-major, one row per token, as on the CPU. Weights are resident
// in the layout of weights.hpp (Q8_0 and Q4_0 in the tensor cores' tiles, tile_layout.hpp). Every launcher enqueues on `s` and never synchronizes.
#pragma once

#include "attn_math.hpp"
#include "types.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace ember::cu {

void quantize_acts(const float *x, int64_t rows, int64_t n_in, ActQ8 out, cudaStream_t s);

// y[t][o] = (accumulate ? y[t][o] : 0) + (W[o]·x[t] + bias[o]) for t < n_tokens. Q8_0 and Q4_0 W read
// `xq` (quantize_acts of x) and go to mma_product; the others read `x`: one warp per output row reading
// the weight once for up to 32 tokens (more tokens loop).
void gemv(const DevWeight &w, const float *x, const ActQ8 &xq, int64_t n_tokens, float *y, const float *bias,
          bool accumulate, cudaStream_t s);
// The same for Q8_0 and Q4_0 W on the tensor cores (matmul_mma.cu), any number of tokens; each token's
// outputs the same bits whatever n_tokens is (tile_layout.hpp's order of sums).
void mma_product(const DevWeight &w, const ActQ8 &xq, int64_t n_tokens, float *y, const float *bias, bool accumulate,
                 cudaStream_t s);

// Dequantizes rows [r0, r0 + n) of W into dst (f16 when half_out, else f32), row-major.
void dequantize_rows(const DevWeight &w, int64_t r0, int64_t n, void *dst, bool half_out, cudaStream_t s);
void f32_to_f16(const float *x, uint16_t *y, int64_t n, cudaStream_t s);
// y[t][o] += bias[o]
void add_bias(float *y, const float *bias, int64_t n_tokens, int64_t n_out, cudaStream_t s);

// Rows ids[t] of W (any weight type above), dequantized, into y (n_tokens rows of n_in).
void get_rows(const DevWeight &w, const int32_t *ids, int64_t n_tokens, float *y, cudaStream_t s);
// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w over n_rows rows of dim (w: [dim], or null for none). y may be x.
void rms_norm(const float *x, const float *w, float *y, int64_t n_rows, int64_t dim, float eps, cudaStream_t s);
// out = silu(gate) * up (out may be gate or up)
void swiglu(const float *gate, const float *up, float *out, int64_t n, cudaStream_t s);
// y += x
void add_inplace(float *y, const float *x, int64_t n, cudaStream_t s);

// The rope angles of each token, cos and sin as f32 [n_tokens][n_rot/2] (formed in double, as the CPU).
void rope_angles(const int32_t *pos, int64_t n_tokens, int n_rot, float theta, float freq_scale,
                 const float *freq_factors, float *cs, float *sn, cudaStream_t s);
// In place on n_tokens rows of n_heads * head_dim.
void rope_apply(float *x, int64_t n_tokens, int n_heads, int head_dim, int n_rot, bool neox, const float *cs,
                const float *sn, cudaStream_t s);

// Writes each token's row (n values) into the cache row slots[t] of `cache` (F16, Q8_0 or Q4_0 rows, the CPU's
// bytes: kv_format.cpp).
void kv_store(const float *x, const int32_t *slots, int64_t n_tokens, int64_t n, uint32_t kv_type, uint8_t *cache,
              size_t row_bytes, cudaStream_t s);

// Paged causal attention, flash-decoding style: each (token, head) is split into n_splits key ranges
// of split_keys positions,
// each reduced with an online softmax into a partial (m, l, acc[head_dim]), then combined. The tiled
// kernel (head_dim <= 128) shares each 32-key K/V tile, loaded once into shared memory, between the
// heads of a GQA group and the q_tile tokens of a block; $EMBER_CUDA_ATTN=warp selects the simpler
// warp-per-query kernel (also used for larger heads). Query t sees
// positions 0..last[t] (pos[t] when last is null: causal) of the sequence whose block table starts at
// tables + tab_off[t]; last[t] past pos[t] is attention both ways (graph.h's SEQUENCE mask).
struct AttnArgs {
    const float *q = nullptr;     // [n_tokens][n_head * head_dim]
    const uint8_t *k = nullptr, *v = nullptr;  // this layer's caches (row 0 of block 0)
    uint32_t kv_type = 1;
    size_t row_bytes = 0;
    uint32_t block_size = 0;
    const int32_t *pos = nullptr, *tab_off = nullptr, *tables = nullptr;
    const int32_t *last = nullptr;  // the last key position of each query (null: pos, the causal mask)
    int n_tokens = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
    float scale = 0;
    // Splits of split_keys absolute positions each (attn_math.hpp: batch-invariant), n_splits of them:
    // enough for the longest sequence the partials are for.
    int n_splits = 1, split_keys = kAttnSplitKeys;
    // Tokens per tile of the tiled kernel: consecutive tokens that share one block table (a prompt
    // chunk of one sequence) are served by one thread block; 1 when the batch mixes sequences.
    int q_tile = 1;
    float *partials = nullptr;    // [n_tokens * n_head * n_splits][head_dim + 2]
    float *out = nullptr;         // like q
};
// Tokens per tile for a batch: max(1, 16 / group) when every token shares one table, else 1.
int attention_q_tile(int n_head, int n_head_kv, bool one_table);
void attention(const AttnArgs &a, cudaStream_t s);

// Copies `n` rows of row_bytes at src_rows[i] of a cache to dst (contiguous), or back (also the logits
// rows of a pass: GATHER_LOGITS).
void gather_rows(const uint8_t *cache, const int32_t *rows, int64_t n, size_t row_bytes, uint8_t *dst, cudaStream_t s);
void scatter_rows(uint8_t *cache, const int32_t *rows, int64_t n, size_t row_bytes, const uint8_t *src, cudaStream_t s);

// A kernel of this module's image can run on the current device (false: no image for its architecture).
bool image_runs_here(cudaError_t *err);

} // namespace ember::cu
