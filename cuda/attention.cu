// attention.cu — paged causal attention, flash-decoding style (split-K over the keys, then a combine).
//
// One warp per (token, head, split): each lane holds head_dim/32 (rounded up) of the query's and the
// accumulator's dimensions; per key the dot product is reduced across the warp and folded into an
// online softmax (running max m, sum l, unnormalised acc), as in FlashAttention. The partials of a
// (token, head) are merged by k_attn_combine (attn_math.hpp's combine_partials, tested on the CPU).
// k_attn_tiled (the default for head_dim <= 128) shares K/V tiles in shared memory between the heads of
// a GQA group and, for a prompt chunk, between up to 16 tokens; k_attn_split (one warp per query) is the
// simple form, kept for larger heads and as a reference ($EMBER_CUDA_ATTN=warp). Neither uses the
// tensor cores yet (mma.sync for Q K^T and P V is future work).
//
// ATTENTION_EXT's options (AttnExt, family_kernels.hpp) are arguments of the same kernels: a sliding
// window moves each query's first key (the splits cover the window), a softcap bends each score before
// the softmax, and sinks join the normaliser in k_attn_combine. Both kernels read a query's keys up to
// last[t] (AttnArgs): its own position (causal), or its sequence's last in the pass (the bidirectional
// mask); a window then counts back from there, as on the CPU.
#include "attn_math.hpp"
#include "backend/attn_options.hpp"
#include "cu_check.hpp"
#include "cu_util.cuh"
#include "family_kernels.hpp"
#include "kernels.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace ember::cu {

namespace {

// Element e of a cache row of type KV (kF16, kQ8_0 or kQ4_0; attn_math.hpp's offsets).
template <uint32_t KV>
__device__ __forceinline__ float kv_at(const uint8_t *row, int e) {
    if constexpr (KV == kQ8_0) {
        const float d = half_bits_to_float(*reinterpret_cast<const uint16_t *>(row + q8_scale_offset(e)));
        return d * static_cast<float>(static_cast<int8_t>(row[q8_code_offset(e)]));
    } else if constexpr (KV == kQ4_0) {
        const float d = half_bits_to_float(*reinterpret_cast<const uint16_t *>(row + q4_scale_offset(e)));
        return d * static_cast<float>(q4_code(row, e) - 8);
    } else {
        return half_bits_to_float(reinterpret_cast<const uint16_t *>(row)[e]);
    }
}

// A score after ATTENTION_EXT's softcap (cap 0: none); tanhf's argument clamped as elementwise.cu's.
__device__ __forceinline__ float capped(float s, float cap) {
    return cap > 0.0f ? cap * tanhf(fminf(fmaxf(s / cap, -10.0f), 10.0f)) : s;
}

template <int DPL, uint32_t KV>
__global__ void k_attn_split(AttnArgs a, AttnExt x) {
    const int th = blockIdx.x, split = blockIdx.y, lane = threadIdx.x;
    const int t = th / a.n_head, h = th % a.n_head;
    const int hd = a.head_dim;
    const int head_off = (h / (a.n_head / a.n_head_kv)) * hd;
    const int32_t n_keys = a.last[t] + 1;
    const KeyRange r = split_keys_range(attn_first_key(a.last[t], x.window, x.local_chunk), n_keys, a.split_keys, split, false);
    const float scale = a.scale * attn_temperature(x.temp_scale, x.temp_offset, static_cast<uint32_t>(x.temp_floor), a.pos[t]);
    const int32_t *table = a.tables + a.tab_off[t];
    const float *qr = a.q + (static_cast<int64_t>(t) * a.n_head + h) * hd;
    float q[DPL], acc[DPL];
#pragma unroll
    for (int j = 0; j < DPL; ++j) {
        const int d = lane + 32 * j;
        q[j] = d < hd ? qr[d] : 0.0f;
        acc[j] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    for (int32_t p = r.begin; p < r.end; ++p) {
        const int64_t row = cache_row(table, p, a.block_size);
        const uint8_t *kr = a.k + row * a.row_bytes, *vr = a.v + row * a.row_bytes;
        float part = 0.0f;
#pragma unroll
        for (int j = 0; j < DPL; ++j) {
            const int d = lane + 32 * j;
            if (d < hd) part += q[j] * kv_at<KV>(kr, head_off + d);
        }
        const float s = capped(warp_sum(part) * scale, x.softcap);
        const float mn = fmaxf(m, s);
        const float corr = expf(m - mn), w = expf(s - mn);
        l = l * corr + w;
#pragma unroll
        for (int j = 0; j < DPL; ++j) {
            const int d = lane + 32 * j;
            acc[j] = acc[j] * corr + (d < hd ? w * kv_at<KV>(vr, head_off + d) : 0.0f);
        }
        m = mn;
    }
    float *out = a.partials + (static_cast<int64_t>(th) * a.n_splits + split) * (hd + 2);
    if (lane == 0) out[0] = m, out[1] = l;
#pragma unroll
    for (int j = 0; j < DPL; ++j) {
        const int d = lane + 32 * j;
        if (d < hd) out[2 + d] = acc[j];
    }
}

// The tiled kernel: block (tile of q_tile tokens sharing one table, KV head, split); one warp per
// (token of the tile, head of the GQA group). Per 32-key tile the block loads K and V once into shared
// memory (as f32, rows padded to head_dim + 1 floats against bank conflicts); each lane scores one key
// (its own dot product over the query in shared memory), the warp takes the tile's maximum and sum
// (one rescale per tile, FlashAttention-2 style), and every lane accumulates its dimensions over the
// tile's 32 weights, broadcast by shuffles. Keys past a token's position (or before its window) are
// masked, and a tile no key of which a token sees leaves that token's state untouched: with tiles at
// absolute multiples of 32, a token's result is the same bits whichever tokens share its block.
// The tokens of a tile share one block table, long enough for the tile's last position (tab_off[t0]).
template <uint32_t KV>
__global__ void k_attn_tiled(AttnArgs a, AttnExt x) {
    extern __shared__ float sm[];
    const int hd = a.head_dim, ld = hd + 1;
    const int group = a.n_head / a.n_head_kv;
    float *Ks = sm, *Vs = Ks + 32 * ld, *Qs = Vs + 32 * ld;
    const int tile = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z;
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, nthreads = blockDim.x;
    const int t0 = tile * a.q_tile;
    const int t = t0 + w / group, h = kvh * group + w % group;
    const bool valid = t < a.n_tokens;
    float *q = Qs + w * hd;
    for (int d = lane; d < hd; d += 32) q[d] = valid ? a.q[(static_cast<int64_t>(t) * a.n_head + h) * hd + d] : 0.0f;
    // The tile's keys: from the earliest first key of its tokens (a window's) to the latest position.
    int32_t tile_keys = 0, tile_first = INT32_MAX;
    for (int i = 0; i < a.q_tile && t0 + i < a.n_tokens; ++i) {
        tile_keys = max(tile_keys, a.last[t0 + i] + 1);
        tile_first = min(tile_first, attn_first_key(a.last[t0 + i], x.window, x.local_chunk));
    }
    const int32_t my_keys = valid ? a.last[t] + 1 : 0;
    const int32_t my_first = valid ? attn_first_key(a.last[t], x.window, x.local_chunk) : 0;
    const float scale =
        valid ? a.scale * attn_temperature(x.temp_scale, x.temp_offset, static_cast<uint32_t>(x.temp_floor), a.pos[t]) : a.scale;
    const int32_t *table = a.tables + a.tab_off[t0];
    const KeyRange r = split_keys_range(tile_first, tile_keys, a.split_keys, split, true);
    const int head_off = kvh * hd;
    float m = -INFINITY, l = 0.0f, acc[kMaxHeadDim / 32 / 2];  // head_dim <= 128: 4 dims per lane
#pragma unroll
    for (int j = 0; j < kMaxHeadDim / 64; ++j) acc[j] = 0.0f;
    for (int32_t k0 = r.begin; k0 < r.end; k0 += 32) {
        __syncthreads();  // the previous tile is consumed (and, the first time, q is written)
        for (int idx = threadIdx.x; idx < 32 * hd; idx += nthreads) {
            const int j = idx / hd, d = idx % hd;
            const int32_t p = k0 + j;
            float kv = 0.0f, vv = 0.0f;
            // Keys before the tile's first (the 32-key grid starts earlier) may lie in a sliding window's
            // released block (table entry -1): such rows are never read, only masked.
            if (p < r.end && p >= tile_first) {
                const int64_t row = cache_row(table, p, a.block_size);
                kv = kv_at<KV>(a.k + row * a.row_bytes, head_off + d);
                vv = kv_at<KV>(a.v + row * a.row_bytes, head_off + d);
            }
            Ks[j * ld + d] = kv;
            Vs[j * ld + d] = vv;
        }
        __syncthreads();
        if (!valid) continue;  // warp-uniform
        const int32_t p = k0 + lane;
        float s = -INFINITY;
        if (p < r.end && p < my_keys && p >= my_first) {
            float dot = 0.0f;
            for (int d = 0; d < hd; ++d) dot += q[d] * Ks[lane * ld + d];
            s = capped(dot * scale, x.softcap);
        }
        const float mt = warp_max(s);
        if (mt == -INFINITY) continue;  // no key of this tile is visible to this query (warp-uniform)
        const float mn = fmaxf(m, mt), corr = expf(m - mn);
        const float pj = s == -INFINITY ? 0.0f : expf(s - mn);
        l = l * corr + warp_sum(pj);
#pragma unroll
        for (int j = 0; j < kMaxHeadDim / 64; ++j) acc[j] *= corr;
        for (int j = 0; j < 32; ++j) {
            const float pb = __shfl_sync(0xffffffffu, pj, j);
            if (pb == 0.0f) continue;  // warp-uniform
#pragma unroll
            for (int jj = 0; jj < kMaxHeadDim / 64; ++jj) {
                const int d = lane + 32 * jj;
                if (d < hd) acc[jj] += pb * Vs[j * ld + d];
            }
        }
        m = mn;
    }
    if (!valid) return;
    float *out = a.partials + ((static_cast<int64_t>(t) * a.n_head + h) * a.n_splits + split) * (hd + 2);
    if (lane == 0) out[0] = m, out[1] = l;
#pragma unroll
    for (int j = 0; j < kMaxHeadDim / 64; ++j) {
        const int d = lane + 32 * j;
        if (d < hd) out[2 + d] = acc[j];
    }
}

size_t tiled_smem(const AttnArgs &a) {
    const int warps = a.q_tile * (a.n_head / a.n_head_kv);
    return (2 * 32 * static_cast<size_t>(a.head_dim + 1) + static_cast<size_t>(warps) * a.head_dim) * sizeof(float);
}

bool use_tiled(const AttnArgs &a) {
    static const bool warp_only = [] {
        const char *e = std::getenv("EMBER_CUDA_ATTN");
        return e && std::strcmp(e, "warp") == 0;
    }();
    const int warps = a.q_tile * (a.n_head / a.n_head_kv);
    return !warp_only && a.head_dim <= kMaxHeadDim / 2 && warps <= 32 && tiled_smem(a) <= 48 * 1024;
}

struct DevExp {
    __device__ float operator()(float x) const { return expf(x); }
};

// A thread per dimension (blockDim.x >= 32). The splits past the token's own position hold no key (l = 0,
// which the sums skip): they are not read, so a short sequence in a long context costs what it needs.
__global__ void k_attn_combine(AttnArgs a, AttnExt x) {
    const int th = blockIdx.x, hd = a.head_dim;
    const int n = min(a.n_splits, splits_for(a.last[th / a.n_head] + 1, a.split_keys));
    const float *part = a.partials + static_cast<int64_t>(th) * a.n_splits * (hd + 2);
    float *out = a.out + static_cast<int64_t>(th) * hd;
    const float *sink = x.sinks ? x.sinks + th % a.n_head : nullptr;
    const int step = static_cast<int>(blockDim.x);
    if (!combine_partials(part, n, hd + 2, hd, out, DevExp{}, static_cast<int>(threadIdx.x), step, sink))
        for (int d = threadIdx.x; d < hd; d += step) out[d] = 0.0f;  // no key (cannot happen: pos >= 0)
}

template <uint32_t KV>
void launch_split(const AttnArgs &a, const AttnExt &x, cudaStream_t s) {
    const dim3 grid(static_cast<unsigned>(a.n_tokens * a.n_head), static_cast<unsigned>(a.n_splits));
    if (a.head_dim <= 32) k_attn_split<1, KV><<<grid, 32, 0, s>>>(a, x);
    else if (a.head_dim <= 64) k_attn_split<2, KV><<<grid, 32, 0, s>>>(a, x);
    else if (a.head_dim <= 128) k_attn_split<4, KV><<<grid, 32, 0, s>>>(a, x);
    else k_attn_split<8, KV><<<grid, 32, 0, s>>>(a, x);
}

} // namespace

int attention_q_tile(int n_head, int n_head_kv, bool one_table) {
    const int group = n_head / n_head_kv;
    return one_table && group < 16 ? 16 / group : 1;
}

void attention_ext(const AttnArgs &a, const AttnExt &x, cudaStream_t s, int group) {
    if (group > 0 && a.n_tokens > group) {
        const size_t width = static_cast<size_t>(a.n_head) * a.head_dim;
        for (int t0 = 0; t0 < a.n_tokens; t0 += group) {
            AttnArgs g = a;
            g.n_tokens = a.n_tokens - t0 < group ? a.n_tokens - t0 : group;
            g.q = a.q + t0 * width, g.out = a.out + t0 * width, g.pos = a.pos + t0, g.tab_off = a.tab_off + t0;
            if (a.last) g.last = a.last + t0;
            attention_ext(g, x, s);
        }
        return;
    }
    if (a.head_dim > kMaxHeadDim) fail(EMBER_ERR_UNSUPPORTED, "cuda attention: head_dim %d > %d", a.head_dim, kMaxHeadDim);
    if (!a.last) {  // the causal mask: each query's keys end at its own position
        AttnArgs causal = a;
        causal.last = a.pos;
        return attention_ext(causal, x, s);
    }
    if (a.q_tile > a.n_tokens && use_tiled(a)) {  // a decode step: no idle warps for tokens it lacks (same bits)
        AttnArgs one = a;
        one.q_tile = a.n_tokens;
        return attention_ext(one, x, s);
    }
    if (use_tiled(a)) {
        const dim3 grid(static_cast<unsigned>((a.n_tokens + a.q_tile - 1) / a.q_tile), static_cast<unsigned>(a.n_head_kv),
                        static_cast<unsigned>(a.n_splits));
        const unsigned threads = static_cast<unsigned>(32 * a.q_tile * (a.n_head / a.n_head_kv));
        if (a.kv_type == kQ8_0) k_attn_tiled<kQ8_0><<<grid, threads, tiled_smem(a), s>>>(a, x);
        else if (a.kv_type == kQ4_0) k_attn_tiled<kQ4_0><<<grid, threads, tiled_smem(a), s>>>(a, x);
        else k_attn_tiled<kF16><<<grid, threads, tiled_smem(a), s>>>(a, x);
    } else if (a.kv_type == kQ8_0) {
        launch_split<kQ8_0>(a, x, s);
    } else if (a.kv_type == kQ4_0) {
        launch_split<kQ4_0>(a, x, s);
    } else {
        launch_split<kF16>(a, x, s);
    }
    const unsigned combine_threads = static_cast<unsigned>(std::min(256, (a.head_dim + 31) / 32 * 32));
    k_attn_combine<<<static_cast<unsigned>(a.n_tokens * a.n_head), combine_threads, 0, s>>>(a, x);
}

void attention(const AttnArgs &a, cudaStream_t s) { attention_ext(a, AttnExt{}, s); }

} // namespace ember::cu
