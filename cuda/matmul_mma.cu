// matmul_mma.cu — Q8_0, Q4_0, Q4_K and Q6_K products on the tensor cores: per 16 weight rows, 32 codes
// and 8 tokens one mma.sync m16n8k32 (int8 in, exact int32 out: a block's integer dot product for 128
// outputs; Q6_K two m16n8k16, one per scale), then per output one FMA with the two blocks' scales (Q4_K:
// a second with its minimum and the activations' code sum; Q6_K: one per half). Weights in tiles
// (tile_layout.hpp), activations quantized per 32 like the CPU's (quantize_acts).
//
// Two kernels, one order of sums (tile_layout.hpp's segments), so a token's outputs are the same bits
// whichever runs it:
// - k_mma_split (up to 32 tokens: decode, speculative and batched steps): a thread block per 16 rows,
//   its 8 warps one segment each, the segments' partials added in shared memory: eight warps per 16 rows
//   to keep weight loads in flight (on an H100 Q8_0 streams at 72 % of the copy bandwidth, Q4_0 at
//   48–58 %, Q4_K at 22–29 %: docs/benchmarks.md).
// - k_mma_tiles (more tokens: prefill): a thread block per 128 rows x 64 tokens, each warp 16 rows x 64
//   tokens over every block in order, adding each segment's sum as it completes. The activation codes
//   of 4 blocks go through shared memory (double-buffered), shared by the 8 warps.
#include "cu_util.cuh"
#include "kernels.hpp"
#include "tile_layout.hpp"

namespace ember::cu {

namespace {

constexpr int kWarps = 8;        // per thread block, both kernels (= kMmaSegments for the split kernel)
constexpr int kTileTokens = 64;  // tokens per thread block of k_mma_tiles (8 n-tiles of 8)
constexpr int kStage = 4;        // blocks of 32 per shared-memory stage of k_mma_tiles (divides 8: a
                                 // stage's blocks lie in one K-quant unit)
constexpr int kRowBytes = 32;    // a token's 32 codes per stage block, words in the order 0 4 1 5 2 6 3 7:
                                 // lane (g, c) reads words c and 4 + c (B's b0, b1) with one 8-byte load,
                                 // and a half-warp's 16 loads hit 32 distinct banks
static_assert(kWarps == kMmaSegments, "k_mma_split gives each segment a warp");

// The products' int32 sums arrive as floats: the accumulator starts at the bits of 1.5 * 2^23, so the
// sum's bits are those of the float 1.5 * 2^23 + isum exactly (|isum| < 2^22: a block's sum is at most
// 32 * 127 * 127 in magnitude), and one subtraction gives float(isum), exact, where a conversion
// instruction would run at a quarter of the FP32 rate. The asm is not volatile: its result depends on
// its operands alone, so the compiler may move loads across it.
constexpr uint32_t kSumBias = 0x4B400000u;
constexpr float kSumBiasValue = 12582912.0f;
struct Sums {
    float v[4];
};
__device__ __forceinline__ Sums unbias(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3) {
    return {{__uint_as_float(c0) - kSumBiasValue, __uint_as_float(c1) - kSumBiasValue, __uint_as_float(c2) - kSumBiasValue,
             __uint_as_float(c3) - kSumBiasValue}};
}
__device__ __forceinline__ Sums mma_s8(const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    uint32_t c0 = kSumBias, c1 = kSumBias, c2 = kSumBias, c3 = kSumBias;
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+r"(c0), "+r"(c1), "+r"(c2), "+r"(c3)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    __trap();  // device.cpp refuses devices below 8.0
#endif
    return unbias(c0, c1, c2, c3);
}
__device__ __forceinline__ Sums mma_s8_k16(uint32_t a0, uint32_t a1, uint32_t b0) {
    uint32_t c0 = kSumBias, c1 = kSumBias, c2 = kSumBias, c3 = kSumBias;
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
        : "+r"(c0), "+r"(c1), "+r"(c2), "+r"(c3)
        : "r"(a0), "r"(a1), "r"(b0));
#else
    __trap();
#endif
    return unbias(c0, c1, c2, c3);
}

// One block's tile as lane L holds it: its fragment and, for its rows g and g + 8, the scales d0, d1 (Q4_K:
// d times the block's 6-bit scale; Q6_K: d times the first half's scale) and m0, m1 (Q4_K: dmin times the
// 6-bit min; Q6_K: d times the second half's scale).
struct WFrag {
    uint32_t a[4];
    float d0, d1, m0, m1;
};
// Q4_K: a row's head (the file's first 16 bytes: d, dmin, then the packed 6-bit scales and mins that
// kq_scale_min reads), and from it block j's d * scale and dmin * min, with shifts on the head's words so
// that j may vary at run time without a local array.
__device__ __forceinline__ uint4 q4k_head(const uint8_t *unit, int rr) { return __ldg(reinterpret_cast<const uint4 *>(unit) + rr); }
__device__ __forceinline__ void q4k_scale(uint4 h, int j, float &d, float &m) {  // h.y: bytes 0..3 of the 12, h.z 4..7, h.w 8..11
    const int sh = 8 * (j % 4);
    uint32_t sc, mn;
    if (j < 4) {
        sc = (h.y >> sh) & 63u, mn = (h.z >> sh) & 63u;
    } else {
        sc = ((h.w >> sh) & 15u) | ((h.y >> (sh + 6)) & 3u) << 4;
        mn = ((h.w >> (sh + 4)) & 15u) | ((h.z >> (sh + 6)) & 3u) << 4;
    }
    d = __fmul_rn(half_bits_to_float(static_cast<uint16_t>(h.x & 0xffffu)), static_cast<float>(sc));
    m = __fmul_rn(half_bits_to_float(static_cast<uint16_t>(h.x >> 16)), static_cast<float>(mn));
}
// The heads of lane L's rows g and g + 8 in block b's unit (Q4_K).
struct Heads {
    uint4 g, g8;
};
__device__ __forceinline__ Heads q4k_heads(const uint8_t *codes, int64_t group, int64_t nb, int64_t b, int lane) {
    const uint8_t *unit = codes + unit_start(kQ4_K, group, nb, b);
    return {q4k_head(unit, lane / 4), q4k_head(unit, lane / 4 + 8)};
}
// Q4_K reads its rows' heads from `heads` where given (a caller that loaded them once for several blocks
// of one unit), else loads them.
template <uint32_t T>
__device__ __forceinline__ WFrag load_tile(const uint8_t *codes, const uint16_t *scales, int64_t group, int64_t nb, int64_t b,
                                           int lane, const Heads *heads = nullptr) {
    WFrag f;
    uint32_t w[4];
    const uint8_t *tile = codes + tile_start(T, group, nb, b);
    if constexpr (byte_codes(T)) {
        const uint4 v = __ldg(reinterpret_cast<const uint4 *>(tile) + lane);
        w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
    } else {
        const uint2 v = __ldg(reinterpret_cast<const uint2 *>(tile) + lane);
        w[0] = v.x, w[1] = v.y;
    }
    tile_a_frag(T, w, f.a);
    if constexpr (T == kQ4_K) {
        const Heads h = heads ? *heads : q4k_heads(codes, group, nb, b, lane);
        q4k_scale(h.g, static_cast<int>(b % 8), f.d0, f.m0);
        q4k_scale(h.g8, static_cast<int>(b % 8), f.d1, f.m1);
    } else if constexpr (T == kQ6_K) {  // the unit's d's, then 16 int8 scales per row: the block's two
        const uint8_t *unit = codes + unit_start(T, group, nb, b);
        const int g = lane / 4, j = static_cast<int>(b % 8);
        const float dg = half_bits_to_float(__ldg(reinterpret_cast<const uint16_t *>(unit) + g));
        const float dh = half_bits_to_float(__ldg(reinterpret_cast<const uint16_t *>(unit) + g + 8));
        const uint16_t sg = __ldg(reinterpret_cast<const uint16_t *>(unit + 2 * kTileRows + 16 * g + 2 * j));
        const uint16_t sh = __ldg(reinterpret_cast<const uint16_t *>(unit + 2 * kTileRows + 16 * (g + 8) + 2 * j));
        f.d0 = __fmul_rn(dg, static_cast<float>(static_cast<int8_t>(sg & 0xff)));
        f.m0 = __fmul_rn(dg, static_cast<float>(static_cast<int8_t>(sg >> 8)));
        f.d1 = __fmul_rn(dh, static_cast<float>(static_cast<int8_t>(sh & 0xff)));
        f.m1 = __fmul_rn(dh, static_cast<float>(static_cast<int8_t>(sh >> 8)));
    } else {
        const uint32_t s = __ldg(reinterpret_cast<const uint32_t *>(scales + (group * nb + b) * kTileRows) + lane / 4);
        f.d0 = half_bits_to_float(static_cast<uint16_t>(s & 0xffffu)), f.d1 = half_bits_to_float(static_cast<uint16_t>(s >> 16));
        f.m0 = f.m1 = 0.0f;
    }
    return f;
}

// One block of one n-tile: p (rows g, g, g+8, g+8 x tokens 2c, 2c+1, 2c, 2c+1) += isum * (d_w * d_x), then
// for Q4_K -= sum_x * (m_w * d_x), for Q6_K per half: the one rounding order both kernels use. b0, b1:
// the activation codes this lane feeds B; x0 / x1: its C tokens' {d, code sum}.
// p += v * (s_row * d_token) for the lane's four outputs: rows g, g, g+8, g+8 (scales s0, s1) by tokens
// x0, x1, x0, x1.
__device__ __forceinline__ void fold4(float (&p)[4], const Sums &v, float s0, float s1, float2 x0, float2 x1) {
    p[0] = __fmaf_rn(v.v[0], __fmul_rn(s0, x0.x), p[0]);
    p[1] = __fmaf_rn(v.v[1], __fmul_rn(s0, x1.x), p[1]);
    p[2] = __fmaf_rn(v.v[2], __fmul_rn(s1, x0.x), p[2]);
    p[3] = __fmaf_rn(v.v[3], __fmul_rn(s1, x1.x), p[3]);
}
template <uint32_t T>
__device__ __forceinline__ void block_product(float (&p)[4], const WFrag &f, uint32_t b0, uint32_t b1, float2 x0, float2 x1) {
    if constexpr (T == kQ6_K) {  // a product per 16 codes, each with its scale
        fold4(p, mma_s8_k16(f.a[0], f.a[1], b0), f.d0, f.d1, x0, x1);
        fold4(p, mma_s8_k16(f.a[2], f.a[3], b1), f.m0, f.m1, x0, x1);
        return;
    }
    fold4(p, mma_s8(f.a, b0, b1), f.d0, f.d1, x0, x1);
    if constexpr (T == kQ4_K)  // the minimums through the activations' code sums ((-m) d_x = -(m d_x) exactly)
        fold4(p, Sums{{x0.y, x1.y, x0.y, x1.y}}, -f.m0, -f.m1, x0, x1);
}

// Writes output i of a lane's n-tile: y[token][row] = (accumulate ? y : 0) + (v + bias[row]).
__device__ __forceinline__ void store_out(float v, int64_t row0, int64_t tok0, int i, int lane, int64_t n_out, int n_tok,
                                          float *y, const float *bias, bool accumulate) {
    const int64_t row = row0 + lane / 4 + (i >= 2 ? 8 : 0), tok = tok0 + 2 * (lane % 4) + (i & 1);
    if (row >= n_out || tok >= n_tok) return;
    const float r = v + (bias ? bias[row] : 0.0f);
    float *dst = y + tok * n_out + row;
    *dst = accumulate ? *dst + r : r;
}

// Up to 8 NT tokens: grid = row groups, block = kWarps warps, warp w = segment w.
template <uint32_t T, int NT>
__global__ void __launch_bounds__(32 * kWarps, 1) k_mma_split(const uint8_t *codes, const uint16_t *scales, int64_t nb,
                                                           int64_t n_out, const int8_t *xq, const float2 *xs, int n_tok,
                                                           float *y, const float *bias, bool accumulate) {
    __shared__ float part[kWarps][NT * 4][32];
    // Blocks whose loads (weights, and the activations this lane feeds B and scales C with) are issued
    // together before any is used: 2 KB of weights per warp in flight for one token; Q4_K 1 KB, its heads
    // taking registers too (8 blocks measured faster in an earlier, simpler loop on the H100: to revisit).
    constexpr int kAhead = (byte_codes(T) || T == kQ4_K ? 4 : 8) / (NT > 2 ? 2 : 1);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
    const int64_t group = blockIdx.x, n_in = nb * 32;
    const int64_t S = seg_blocks(nb), n_seg = (nb + S - 1) / S;
    const int64_t first = warp * S, end = first + S < nb ? first + S : nb;
    float p[NT][4] = {};
    struct Acts {
        uint32_t b0, b1;
        float2 x0, x1;
    };
    auto load_acts = [&](int64_t b, int nt) {
        const int tb = nt * 8 + g, t0 = nt * 8 + 2 * c;  // the token this lane feeds B; its C tokens
        Acts v{0, 0, make_float2(0.0f, 0.0f), make_float2(0.0f, 0.0f)};
        if (tb < n_tok) {
            const uint32_t *xb = reinterpret_cast<const uint32_t *>(xq + tb * n_in + b * 32);
            v.b0 = __ldg(xb + c), v.b1 = __ldg(xb + 4 + c);
        }
        if (t0 < n_tok) v.x0 = __ldg(xs + t0 * nb + b);
        if (t0 + 1 < n_tok) v.x1 = __ldg(xs + (t0 + 1) * nb + b);
        return v;
    };
    int64_t b = first;
    for (; b + kAhead <= end; b += kAhead) {
        WFrag f[kAhead];
        Acts x[kAhead][NT];
#pragma unroll
        for (int u = 0; u < kAhead; ++u) {
            f[u] = load_tile<T>(codes, scales, group, nb, b + u, lane);
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) x[u][nt] = load_acts(b + u, nt);
        }
#pragma unroll
        for (int u = 0; u < kAhead; ++u)
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) block_product<T>(p[nt], f[u], x[u][nt].b0, x[u][nt].b1, x[u][nt].x0, x[u][nt].x1);
    }
    for (; b < end; ++b) {
        const WFrag f = load_tile<T>(codes, scales, group, nb, b, lane);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            const Acts x = load_acts(b, nt);
            block_product<T>(p[nt], f, x.b0, x.b1, x.x0, x.x1);
        }
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) part[warp][nt * 4 + i][lane] = p[nt][i];
    __syncthreads();
    if (warp != 0) return;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            float v = part[0][nt * 4 + i][lane];
            for (int s = 1; s < n_seg; ++s) v = v + part[s][nt * 4 + i][lane];
            store_out(v, group * kTileRows, nt * 8, i, lane, n_out, n_tok, y, bias, accumulate);
        }
}

// More tokens: grid = (token tiles of 64, row tiles of 128), block = kWarps warps, warp w = row group w
// of the tile, all 8 n-tiles.
template <uint32_t T>
__global__ void __launch_bounds__(32 * kWarps, 2) k_mma_tiles(const uint8_t *codes, const uint16_t *scales, int64_t nb,
                                                           int64_t n_out, const int8_t *xq, const float2 *xs, int n_tok,
                                                           float *y, const float *bias, bool accumulate) {
    __shared__ __align__(16) uint8_t sx[2][kStage][kTileTokens][kRowBytes];
    __shared__ __align__(16) float2 sd[2][kStage][kTileTokens];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
    const int64_t tok0 = static_cast<int64_t>(blockIdx.x) * kTileTokens, group = static_cast<int64_t>(blockIdx.y) * kWarps + warp;
    const bool live = group * kTileRows < n_out;  // a warp past the last rows still loads and syncs
    const int64_t n_in = nb * 32, S = seg_blocks(nb);
    // The stage loader: thread t takes token t / 4's 32 codes of stage block t % 4 (and its {d, sum}).
    const int lt = threadIdx.x / kStage, lj = threadIdx.x % kStage;
    int4 r0, r1;
    float2 rs;
    auto fetch = [&](int64_t sb) {
        const int64_t b = sb + lj, tok = tok0 + lt;
        if (b < nb && tok < n_tok) {
            const int4 *src = reinterpret_cast<const int4 *>(xq + tok * n_in + b * 32);
            r0 = __ldg(src), r1 = __ldg(src + 1), rs = __ldg(xs + tok * nb + b);
        } else {
            r0 = r1 = make_int4(0, 0, 0, 0), rs = make_float2(0.0f, 0.0f);
        }
    };
    auto put = [&](int buf) {
        int4 *dst = reinterpret_cast<int4 *>(sx[buf][lj][lt]);
        dst[0] = make_int4(r0.x, r1.x, r0.y, r1.y), dst[1] = make_int4(r0.z, r1.z, r0.w, r1.w);
        sd[buf][lj][lt] = rs;
    };
    float p[8][4] = {}, tot[8][4] = {};
    bool first_seg = true;
    fetch(0);
    put(0);
    __syncthreads();
    int buf = 0;
    for (int64_t sb = 0; sb < nb; sb += kStage, buf ^= 1) {
        const bool more = sb + kStage < nb;
        if (more) fetch(sb + kStage);  // in flight while this stage computes
        if (live) {
            WFrag f[kStage];
            Heads heads;  // Q4_K: the stage's blocks share a unit (kStage divides 8), so its heads load once
            if constexpr (T == kQ4_K) heads = q4k_heads(codes, group, nb, sb, lane);
#pragma unroll
            for (int j = 0; j < kStage; ++j)
                if (sb + j < nb) f[j] = load_tile<T>(codes, scales, group, nb, sb + j, lane, &heads);
#pragma unroll
            for (int j = 0; j < kStage; ++j) {
                const int64_t b = sb + j;
                if (b >= nb) break;
#pragma unroll
                for (int nt = 0; nt < 8; ++nt) {
                    const uint2 xb = reinterpret_cast<const uint2 *>(sx[buf][j][nt * 8 + g])[c];
                    const float4 xd = *reinterpret_cast<const float4 *>(&sd[buf][j][nt * 8 + 2 * c]);  // tokens 2c, 2c+1
                    block_product<T>(p[nt], f[j], xb.x, xb.y, make_float2(xd.x, xd.y), make_float2(xd.z, xd.w));
                }
                if ((b + 1) % S == 0 || b + 1 == nb) {  // a segment ends: add it, left to right
#pragma unroll
                    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
                        for (int i = 0; i < 4; ++i) {
                            tot[nt][i] = first_seg ? p[nt][i] : tot[nt][i] + p[nt][i];
                            p[nt][i] = 0.0f;
                        }
                    first_seg = false;
                }
            }
        }
        if (more) put(buf ^ 1);
        __syncthreads();
    }
    if (!live) return;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i)
            store_out(tot[nt][i], group * kTileRows, tok0 + nt * 8, i, lane, n_out, n_tok, y, bias, accumulate);
}

template <uint32_t T>
void launch(const DevWeight &w, const ActQ8 &xq, int64_t n_tokens, float *y, const float *bias, bool acc, cudaStream_t s) {
    const auto *codes = static_cast<const uint8_t *>(w.codes);
    const auto *xs = reinterpret_cast<const float2 *>(xq.scales);
    const int64_t nb = w.n_in / 32, groups = tile_groups(w.n_out);
    const int n = static_cast<int>(n_tokens);
    const dim3 block(32 * kWarps);
    if (n_tokens <= 32) {
        const dim3 grid(static_cast<unsigned>(groups));
        switch ((n + 7) / 8) {
        case 1: k_mma_split<T, 1><<<grid, block, 0, s>>>(codes, w.scales, nb, w.n_out, xq.codes, xs, n, y, bias, acc); break;
        case 2: k_mma_split<T, 2><<<grid, block, 0, s>>>(codes, w.scales, nb, w.n_out, xq.codes, xs, n, y, bias, acc); break;
        case 3: k_mma_split<T, 3><<<grid, block, 0, s>>>(codes, w.scales, nb, w.n_out, xq.codes, xs, n, y, bias, acc); break;
        default: k_mma_split<T, 4><<<grid, block, 0, s>>>(codes, w.scales, nb, w.n_out, xq.codes, xs, n, y, bias, acc); break;
        }
        return;
    }
    const dim3 grid(blocks_for(n_tokens, kTileTokens), blocks_for(groups, kWarps));
    k_mma_tiles<T><<<grid, block, 0, s>>>(codes, w.scales, nb, w.n_out, xq.codes, xs, n, y, bias, acc);
}

} // namespace

void mma_product(const DevWeight &w, const ActQ8 &xq, int64_t n_tokens, float *y, const float *bias, bool accumulate,
                 cudaStream_t s) {
    switch (w.type) {
    case kQ8_0: launch<kQ8_0>(w, xq, n_tokens, y, bias, accumulate, s); break;
    case kQ4_0: launch<kQ4_0>(w, xq, n_tokens, y, bias, accumulate, s); break;
    case kQ4_K: launch<kQ4_K>(w, xq, n_tokens, y, bias, accumulate, s); break;
    default: launch<kQ6_K>(w, xq, n_tokens, y, bias, accumulate, s); break;
    }
}

} // namespace ember::cu
