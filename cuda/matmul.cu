// matmul.cu — matrix-vector products for the types without a tensor-core kernel (one warp per output
// row, the weight read once for up to 32 tokens, dequantization in registers, against f32
// activations; Q8_0 and Q4_0 go to matmul_mma.cu), activation quantization, and the dequantization that
// feeds cuBLASLt for prefill when asked for (model.cpp, Matmul::run).
#include "cu_util.cuh"
#include "kernels.hpp"
#include "cu_check.hpp"

namespace ember::cu {

namespace {

constexpr int kWarpsPerBlock = 4;  // output rows per thread block
constexpr int kMaxTok = 32;        // tokens per pass over a weight row (instantiated: 1..8, 16, 32)

// One warp per block of 32 values, as cpu::quantize_row_q8_0: d = max|x| / 127 rounded to f16, q =
// round-to-even(x / d_stored) clamped to ±127. __fdiv_rn/__fmul_rn keep nvcc from contracting or
// approximating, so the codes equal the CPU's. Also the codes' sum (exact in f32), beside d.
__global__ void k_quantize_acts(const float *x, int64_t n_blocks, int8_t *codes, float2 *scales) {
    const int64_t b = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
    if (b >= n_blocks) return;
    const int lane = threadIdx.x % 32;
    const float v = x[b * 32 + lane];
    const float amax = warp_max(fabsf(v));
    const float d = __half2float(__float2half_rn(__fdiv_rn(amax, 127.0f)));
    const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
    int q = __float2int_rn(__fmul_rn(v, id));
    q = q > 127 ? 127 : (q < -127 ? -127 : q);
    codes[b * 32 + lane] = static_cast<int8_t>(q);
    int sum = q;
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) scales[b] = make_float2(d, static_cast<float>(sum));
}

template <int NT>
__device__ __forceinline__ void finish_row(float (&acc)[NT], int64_t row, int64_t n_out, float *y, const float *bias,
                                           bool accumulate) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        const float s = warp_sum(acc[t]);
        if (lane == 0) {
            float r = s + (bias ? bias[row] : 0.0f);
            float *dst = y + t * n_out + row;
            *dst = accumulate ? *dst + r : r;
        }
    }
}

template <uint32_t T>
__device__ __forceinline__ float load_plain(const void *w, int64_t i) {
    if constexpr (T == kF32) return static_cast<const float *>(w)[i];
    else if constexpr (T == kF16) return half_bits_to_float(static_cast<const uint16_t *>(w)[i]);
    else return bf16_bits_to_float(static_cast<const uint16_t *>(w)[i]);
}

// F32/F16/BF16 against f32 activations: 8 values per lane step (16- or 32-byte loads) when n_in is a
// multiple of 8, one value otherwise.
template <uint32_t T, int NT>
__global__ void k_gemv_plain(const void *w, int64_t n_in, int64_t n_out, const float *x, float *y, const float *bias,
                             bool accumulate) {
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
    if (row >= n_out) return;
    const int lane = threadIdx.x % 32;
    float acc[NT] = {};
    if (n_in % 8 == 0) {
        for (int64_t c = lane; c < n_in / 8; c += 32) {
            float wv[8];
            if constexpr (T == kF32) {
                const float4 *p = reinterpret_cast<const float4 *>(static_cast<const float *>(w) + row * n_in + c * 8);
                const float4 a = p[0], b = p[1];
                wv[0] = a.x, wv[1] = a.y, wv[2] = a.z, wv[3] = a.w, wv[4] = b.x, wv[5] = b.y, wv[6] = b.z, wv[7] = b.w;
            } else {
                const uint4 u = *reinterpret_cast<const uint4 *>(static_cast<const uint16_t *>(w) + row * n_in + c * 8);
                const uint32_t uu[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    const uint16_t lo = static_cast<uint16_t>(uu[k] & 0xffffu), hi = static_cast<uint16_t>(uu[k] >> 16);
                    wv[2 * k] = T == kF16 ? half_bits_to_float(lo) : bf16_bits_to_float(lo);
                    wv[2 * k + 1] = T == kF16 ? half_bits_to_float(hi) : bf16_bits_to_float(hi);
                }
            }
#pragma unroll
            for (int t = 0; t < NT; ++t) {
                const float4 *xp = reinterpret_cast<const float4 *>(x + t * n_in + c * 8);
                const float4 a = xp[0], b = xp[1];
                acc[t] += wv[0] * a.x + wv[1] * a.y + wv[2] * a.z + wv[3] * a.w + wv[4] * b.x + wv[5] * b.y +
                          wv[6] * b.z + wv[7] * b.w;
            }
        }
    } else {
        for (int64_t i = lane; i < n_in; i += 32) {
            const float wv = load_plain<T>(w, row * n_in + i);
#pragma unroll
            for (int t = 0; t < NT; ++t) acc[t] += wv * x[t * n_in + i];
        }
    }
    finish_row<NT>(acc, row, n_out, y, bias, accumulate);
}

// K-quants against f32 activations: per super-block a lane takes 8 consecutive elements (one
// sub-block's quarter), decoded in registers (kq_values8: the element decoder's floats, the scales
// unpacked once); the activations with two 16-byte loads per token.
template <uint32_t T, int NT>
__global__ void k_gemv_kq(const uint8_t *w, int64_t n_in, int64_t n_out, const float *x, float *y, const float *bias,
                          bool accumulate) {
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
    if (row >= n_out) return;
    const int lane = threadIdx.x % 32;
    const uint32_t bb = kq_block_bytes(T);
    const int64_t nsb = n_in / 256;
    const uint8_t *wr = w + row * nsb * bb;
    float acc[NT] = {};
#pragma unroll 2
    for (int64_t sb = 0; sb < nsb; ++sb) {
        float wv[8];
        kq_values8(T, wr + sb * bb, lane, wv);  // scales decoded once per lane and super-block
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            const float4 *xp = reinterpret_cast<const float4 *>(x + t * n_in + sb * 256 + lane * 8);
            const float4 a = xp[0], b = xp[1];
            acc[t] += wv[0] * a.x + wv[1] * a.y + wv[2] * a.z + wv[3] * a.w + wv[4] * b.x + wv[5] * b.y + wv[6] * b.z +
                      wv[7] * b.w;
        }
    }
    finish_row<NT>(acc, row, n_out, y, bias, accumulate);
}

// The other block formats (quant_math.hpp's fb_*) against f32 activations: a lane takes 8 consecutive
// elements per step (inside one block: every block size is a multiple of 8), decoded in registers.
template <int NT>
__global__ void k_gemv_fb(uint32_t type, const uint8_t *w, int64_t n_in, int64_t n_out, const float *x, float *y,
                          const float *bias, bool accumulate) {
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
    if (row >= n_out) return;
    const int lane = threadIdx.x % 32;
    const uint32_t be = fb_block_elems(type), bb = fb_block_bytes(type);
    const uint8_t *wr = w + row * (n_in / be) * bb;
    float acc[NT] = {};
    for (int64_t c = lane; c < n_in / 8; c += 32) {
        const int64_t e0 = c * 8;
        const uint8_t *blk = wr + (e0 / be) * bb;
        float wv[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) wv[k] = fb_value(type, blk, static_cast<int>(e0 % be) + k);
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            const float4 *xp = reinterpret_cast<const float4 *>(x + t * n_in + e0);
            const float4 a = xp[0], b = xp[1];
            acc[t] += wv[0] * a.x + wv[1] * a.y + wv[2] * a.z + wv[3] * a.w + wv[4] * b.x + wv[5] * b.y + wv[6] * b.z +
                      wv[7] * b.w;
        }
    }
    finish_row<NT>(acc, row, n_out, y, bias, accumulate);
}

__global__ void k_dequantize_rows(DevWeight w, int64_t r0, int64_t n, void *dst, bool half_out) {
    const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e >= n * w.n_in) return;
    const float v = weight_at(w, r0 + e / w.n_in, e % w.n_in);
    if (half_out) static_cast<__half *>(dst)[e] = __float2half_rn(v);
    else static_cast<float *>(dst)[e] = v;
}

__global__ void k_get_rows(DevWeight w, const int32_t *ids, int64_t n_tokens, float *y) {
    const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e >= n_tokens * w.n_in) return;
    y[e] = weight_at(w, ids[e / w.n_in], e % w.n_in);
}

__global__ void k_f32_to_f16(const float *x, __half *y, int64_t n) {
    const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e < n) y[e] = __float2half_rn(x[e]);
}

__global__ void k_add_bias(float *y, const float *bias, int64_t n_tokens, int64_t n_out) {
    const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e < n_tokens * n_out) y[e] += bias[e % n_out];
}

template <int NT>
void launch_gemv(const DevWeight &w, const float *x, float *y, const float *bias, bool acc, cudaStream_t s) {
    const dim3 grid(blocks_for(w.n_out, kWarpsPerBlock)), block(32 * kWarpsPerBlock);
    switch (w.type) {
    case kF32: k_gemv_plain<kF32, NT><<<grid, block, 0, s>>>(w.codes, w.n_in, w.n_out, x, y, bias, acc); break;
    case kF16: k_gemv_plain<kF16, NT><<<grid, block, 0, s>>>(w.codes, w.n_in, w.n_out, x, y, bias, acc); break;
    case kQ5_K: k_gemv_kq<kQ5_K, NT><<<grid, block, 0, s>>>(static_cast<const uint8_t *>(w.codes), w.n_in, w.n_out, x, y, bias, acc); break;
    case kBF16: k_gemv_plain<kBF16, NT><<<grid, block, 0, s>>>(w.codes, w.n_in, w.n_out, x, y, bias, acc); break;
    default:  // the other block formats (weights.cpp accepted the type)
        k_gemv_fb<NT><<<grid, block, 0, s>>>(w.type, static_cast<const uint8_t *>(w.codes), w.n_in, w.n_out, x, y, bias, acc);
        break;
    }
}

} // namespace

void quantize_acts(const float *x, int64_t rows, int64_t n_in, ActQ8 out, cudaStream_t s) {
    const int64_t nb = rows * n_in / 32;
    k_quantize_acts<<<blocks_for(nb, 8), 256, 0, s>>>(x, nb, out.codes, reinterpret_cast<float2 *>(out.scales));
}

void gemv(const DevWeight &w, const float *x, const ActQ8 &xq, int64_t n_tokens, float *y, const float *bias,
          bool accumulate, cudaStream_t s) {
    if (tiled_type(w.type)) return mma_product(w, xq, n_tokens, y, bias, accumulate, s);
    for (int64_t t0 = 0; t0 < n_tokens;) {
        // Passes of 32, 16, then up to 8 tokens: each token's sums are the same whichever pass it is in.
        const int64_t left = n_tokens - t0, nt = left >= kMaxTok ? kMaxTok : left >= 16 ? 16 : left < 8 ? left : 8;
        const float *xt = x + t0 * w.n_in;
        float *yt = y + t0 * w.n_out;
        switch (nt) {
        case 1: launch_gemv<1>(w, xt, yt, bias, accumulate, s); break;
        case 2: launch_gemv<2>(w, xt, yt, bias, accumulate, s); break;
        case 3: launch_gemv<3>(w, xt, yt, bias, accumulate, s); break;
        case 4: launch_gemv<4>(w, xt, yt, bias, accumulate, s); break;
        case 5: launch_gemv<5>(w, xt, yt, bias, accumulate, s); break;
        case 6: launch_gemv<6>(w, xt, yt, bias, accumulate, s); break;
        case 7: launch_gemv<7>(w, xt, yt, bias, accumulate, s); break;
        case 8: launch_gemv<8>(w, xt, yt, bias, accumulate, s); break;
        case 16: launch_gemv<16>(w, xt, yt, bias, accumulate, s); break;
        default: launch_gemv<32>(w, xt, yt, bias, accumulate, s); break;
        }
        t0 += nt;
    }
}

void dequantize_rows(const DevWeight &w, int64_t r0, int64_t n, void *dst, bool half_out, cudaStream_t s) {
    k_dequantize_rows<<<blocks_for(n * w.n_in, 256), 256, 0, s>>>(w, r0, n, dst, half_out);
}

void get_rows(const DevWeight &w, const int32_t *ids, int64_t n_tokens, float *y, cudaStream_t s) {
    k_get_rows<<<blocks_for(n_tokens * w.n_in, 256), 256, 0, s>>>(w, ids, n_tokens, y);
}

void f32_to_f16(const float *x, uint16_t *y, int64_t n, cudaStream_t s) {
    k_f32_to_f16<<<blocks_for(n, 256), 256, 0, s>>>(x, reinterpret_cast<__half *>(y), n);
}

void add_bias(float *y, const float *bias, int64_t n_tokens, int64_t n_out, cudaStream_t s) {
    k_add_bias<<<blocks_for(n_tokens * n_out, 256), 256, 0, s>>>(y, bias, n_tokens, n_out);
}

} // namespace ember::cu
