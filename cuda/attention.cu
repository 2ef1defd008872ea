// attention.cu — paged causal attention, flash-decoding style (split-K over the keys, then a combine).
//
// One warp per (token, head, split): each lane holds head_dim/32 (rounded up) of the query's and the
// accumulator's dimensions; per key the dot product is reduced across the warp and folded into an
// online softmax (running max m, sum l, unnormalised acc), as in FlashAttention. The partials of a
// (token, head) are merged by k_attn_combine (attn_math.hpp's combine_partials, tested on the CPU). A
// prefill pass runs the same kernel with one split per query (enough warps to fill the device); a
// tiled FlashAttention-2 prefill kernel that shares K/V tiles between queries is future work.
#include "attn_math.hpp"
#include "cu_check.hpp"
#include "cu_util.cuh"
#include "kernels.hpp"

namespace ember::cu {

namespace {

template <bool Q8>
__device__ __forceinline__ float kv_at(const uint8_t *row, int e) {
    if constexpr (Q8) {
        const float d = half_bits_to_float(*reinterpret_cast<const uint16_t *>(row + q8_scale_offset(e)));
        return d * static_cast<float>(static_cast<int8_t>(row[q8_code_offset(e)]));
    } else {
        return half_bits_to_float(reinterpret_cast<const uint16_t *>(row)[e]);
    }
}

template <int DPL, bool Q8>
__global__ void k_attn_split(AttnArgs a) {
    const int th = blockIdx.x, split = blockIdx.y, lane = threadIdx.x;
    const int t = th / a.n_head, h = th % a.n_head;
    const int hd = a.head_dim;
    const int head_off = (h / (a.n_head / a.n_head_kv)) * hd;
    const int32_t n_keys = a.pos[t] + 1;
    const KeyRange r = split_range(n_keys, a.n_splits, split);
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
            if (d < hd) part += q[j] * kv_at<Q8>(kr, head_off + d);
        }
        const float s = warp_sum(part) * a.scale;
        const float mn = fmaxf(m, s);
        const float corr = expf(m - mn), w = expf(s - mn);
        l = l * corr + w;
#pragma unroll
        for (int j = 0; j < DPL; ++j) {
            const int d = lane + 32 * j;
            acc[j] = acc[j] * corr + (d < hd ? w * kv_at<Q8>(vr, head_off + d) : 0.0f);
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

struct DevExp {
    __device__ float operator()(float x) const { return expf(x); }
};

__global__ void k_attn_combine(AttnArgs a) {
    const int th = blockIdx.x, hd = a.head_dim;
    const float *part = a.partials + static_cast<int64_t>(th) * a.n_splits * (hd + 2);
    float *out = a.out + static_cast<int64_t>(th) * hd;
    if (!combine_partials(part, a.n_splits, hd + 2, hd, out, DevExp{}, threadIdx.x, 32))
        for (int d = threadIdx.x; d < hd; d += 32) out[d] = 0.0f;  // no key (cannot happen: pos >= 0)
}

template <bool Q8>
void launch_split(const AttnArgs &a, cudaStream_t s) {
    const dim3 grid(static_cast<unsigned>(a.n_tokens * a.n_head), static_cast<unsigned>(a.n_splits));
    if (a.head_dim <= 32) k_attn_split<1, Q8><<<grid, 32, 0, s>>>(a);
    else if (a.head_dim <= 64) k_attn_split<2, Q8><<<grid, 32, 0, s>>>(a);
    else if (a.head_dim <= 128) k_attn_split<4, Q8><<<grid, 32, 0, s>>>(a);
    else k_attn_split<8, Q8><<<grid, 32, 0, s>>>(a);
}

} // namespace

void attention(const AttnArgs &a, cudaStream_t s) {
    if (a.head_dim > kMaxHeadDim) fail(EMBER_ERR_UNSUPPORTED, "cuda attention: head_dim %d > %d", a.head_dim, kMaxHeadDim);
    if (a.kv_type == kQ8_0) launch_split<true>(a, s);
    else launch_split<false>(a, s);
    k_attn_combine<<<static_cast<unsigned>(a.n_tokens * a.n_head), 32, 0, s>>>(a);
}

} // namespace ember::cu
