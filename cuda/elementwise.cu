// elementwise.cu — RMSNorm, adds, SwiGLU, RoPE, KV-cache stores and row copies; the families' elementwise
// ops (scale, softcap, GeGLU, gpt-oss's SwiGLU), YaRN's rope angles, the hybrid families' column copy
// and sigmoid gate (recurrent.hpp), and the encoders' biased LayerNorm, GELU and position rows.
#include "attn_math.hpp"
#include "cu_check.hpp"
#include "cu_util.cuh"
#include "family_kernels.hpp"
#include "gelu_math.hpp"
#include "kernels.hpp"
#include "recurrent.hpp"

namespace ember::cu {

namespace {

constexpr int kNormThreads = 256;

// The sum of v over a block of kNormThreads threads (every thread gets it): each warp's sum into part
// (kNormThreads / 32 entries of shared memory, not reused by the caller's next sum), then warp 0's.
template <class T>
__device__ __forceinline__ T block_sum(T v, T *part) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        T u = threadIdx.x < kNormThreads / 32 ? part[threadIdx.x] : T(0);
        for (int o = 16; o > 0; o >>= 1) u += __shfl_xor_sync(0xffffffffu, u, o);
        if (threadIdx.x == 0) part[0] = u;
    }
    __syncthreads();
    return part[0];
}

// One block per row. In place (y == x) is safe: each thread writes only the elements it read, after
// the block's reduction.
__global__ void k_rms_norm(const float *x, const float *w, float *y, int64_t dim, float eps) {
    const int64_t r = blockIdx.x;
    const float *xr = x + r * dim;
    float ss = 0;
    for (int64_t i = threadIdx.x; i < dim; i += kNormThreads) ss += xr[i] * xr[i];
    __shared__ float part[kNormThreads / 32];
    const float scale = 1.0f / sqrtf(block_sum(ss, part) / static_cast<float>(dim) + eps);
    if (w)
        for (int64_t i = threadIdx.x; i < dim; i += kNormThreads) y[r * dim + i] = xr[i] * scale * w[i];
    else
        for (int64_t i = threadIdx.x; i < dim; i += kNormThreads) y[r * dim + i] = xr[i] * scale;
}

// graph.h's LAYER_NORM, one block per row, as cpu::layer_norm: the mean, then the sum of squared
// deviations from it, in double (two passes over the row); the mean and 1 / sqrt(var + eps) rounded to
// float, then (x - mean) * scale * w + b, each step rounded (w, b: null for none). In place as k_rms_norm.
__global__ void k_layer_norm(const float *x, const float *w, const float *b, float *y, int64_t dim, float eps) {
    const int64_t r = blockIdx.x;
    const float *xr = x + r * dim;
    __shared__ double part_sum[kNormThreads / 32], part_ss[kNormThreads / 32];
    double sum = 0;
    for (int64_t i = threadIdx.x; i < dim; i += kNormThreads) sum += xr[i];
    const double mean = block_sum(sum, part_sum) / static_cast<double>(dim);
    double ss = 0;
    for (int64_t i = threadIdx.x; i < dim; i += kNormThreads) ss += (xr[i] - mean) * (xr[i] - mean);
    const float scale = static_cast<float>(1.0 / sqrt(block_sum(ss, part_ss) / static_cast<double>(dim) + eps));
    const float m = static_cast<float>(mean);
    for (int64_t i = threadIdx.x; i < dim; i += kNormThreads) {
        float v = __fmul_rn(__fsub_rn(xr[i], m), scale);
        if (w) v = __fmul_rn(v, w[i]);
        if (b) v = __fadd_rn(v, b[i]);
        y[r * dim + i] = v;
    }
}

// graph.h's ADD_POS_ROWS: y[t] += row pos[t] of an F32 (half false) or F16 table of `width` values a row.
__global__ void k_add_pos_rows(float *y, const void *table, bool half, const int32_t *pos, int64_t n, int64_t width) {
    const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e >= n) return;
    const int64_t at = static_cast<int64_t>(pos[e / width]) * width + e % width;
    const float v = half ? half_bits_to_float(static_cast<const uint16_t *>(table)[at]) : static_cast<const float *>(table)[at];
    y[e] = __fadd_rn(y[e], v);
}

__global__ void k_add(float *y, const float *x, int64_t n) {
    const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e < n) y[e] += x[e];
}

__global__ void k_swiglu(const float *g, const float *u, float *out, int64_t n) {
    const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e < n) out[e] = g[e] / (1.0f + expf(-g[e])) * u[e];
}

// Angles in double, as cpu::rope: at position 4096, pos * theta in float is already 2e-4 rad off.
__global__ void k_rope_angles(const int32_t *pos, int64_t n_tokens, int half, int n_rot, float theta, float freq_scale,
                              const float *ff, float *cs, float *sn) {
    const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e >= n_tokens * half) return;
    const int i = static_cast<int>(e % half);
    double f = static_cast<double>(freq_scale) * pow(static_cast<double>(theta), -2.0 * i / static_cast<double>(n_rot));
    if (ff) f /= static_cast<double>(ff[i]);
    const double a = static_cast<double>(pos[e / half]) * f;
    cs[e] = static_cast<float>(cos(a));
    sn[e] = static_cast<float>(sin(a));
}

__global__ void k_rope_apply(float *x, int64_t n_tokens, int n_heads, int head_dim, int half, bool neox, const float *cs,
                             const float *sn) {
    const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e >= n_tokens * n_heads * half) return;
    const int i = static_cast<int>(e % half);
    const int64_t th = e / half, t = th / n_heads;
    float *v = x + th * head_dim;
    const int stride = neox ? 1 : 2, partner = neox ? half : 1;
    const float c = cs[t * half + i], s = sn[t * half + i];
    const float x0 = v[i * stride], x1 = v[i * stride + partner];
    // __fmul_rn/__fadd_rn: the CPU rounds each product (no fused multiply-add).
    v[i * stride] = __fadd_rn(__fmul_rn(x0, c), -__fmul_rn(x1, s));
    v[i * stride + partner] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
}

// tanh with its argument clamped (tanh(+-10) is +-1 in float); tanhf itself is accurate to 2 ulp.
__device__ __forceinline__ float tanh_clamped(float x) { return tanhf(fminf(fmaxf(x, -10.0f), 10.0f)); }

// The elementwise ops of family_kernels.hpp's Ew, as cpu/elementwise.cpp and cpu/moe.cpp compute them
// (each product rounded: no fused multiply-add, so that the CPU's roundings are the GPU's).
__global__ void k_elementwise(Ew op, const float *x, const float *x2, float *y, int64_t n, float a, float b) {
    const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e >= n) return;
    const float v = x[e];
    float r;
    switch (op) {
    case Ew::Scale: r = __fmul_rn(v, a); break;
    case Ew::Mul: r = __fmul_rn(v, x2[e]); break;
    case Ew::Softcap: r = __fmul_rn(a, tanh_clamped(__fdiv_rn(v, a))); break;
    case Ew::Geglu: r = __fmul_rn(gelu(v), x2[e]); break;
    case Ew::Gelu: r = gelu(v); break;
    default: {
        const float g = fminf(v, b), u = fminf(fmaxf(x2[e], -b), b);
        r = __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-__fmul_rn(a, g)))), __fadd_rn(u, 1.0f));
        break;
    }
    }
    y[e] = r;
}

// rope_math.hpp's frequencies; the scale multiplies the cosine and sine in double, as cpu/rope.cpp.
__global__ void k_rope_angles_yarn(const int32_t *pos, int64_t n_tokens, int half, int n_rot, float theta,
                                   float freq_scale, const float *ff, RopeYarn y, YarnRamp ramp, double mscale, float *cs,
                                   float *sn) {
    const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e >= n_tokens * half) return;
    const int i = static_cast<int>(e % half);
    const double f = yarn_freq(i, n_rot, theta, freq_scale, ff ? ff[i] : 1.0f, y, ramp);
    const double a = static_cast<double>(pos[e / half]) * f;
    cs[e] = static_cast<float>(cos(a) * mscale);
    sn[e] = static_cast<float>(sin(a) * mscale);
}

__global__ void k_kv_store_f16(const float *x, const int32_t *slots, int64_t n_tokens, int64_t n, uint8_t *cache,
                               size_t row_bytes) {
    const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e >= n_tokens * n) return;
    __half *row = reinterpret_cast<__half *>(cache + static_cast<size_t>(slots[e / n]) * row_bytes);
    row[e % n] = __float2half_rn(x[e]);
}

// The quantized kv_store kernels' thread: one warp per block of 32 values (block b of the n_tokens rows
// of n), this lane's value v and the block's largest magnitude amax; live is false past the last block
// (for a whole warp: n is a multiple of 32).
struct KvBlockLane {
    int64_t nb, b;
    int lane;
    float v = 0.0f, amax = 0.0f;
    bool live;
    __device__ KvBlockLane(const float *x, int64_t n_tokens, int64_t n)
        : nb(n / 32), b(static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32),
          lane(static_cast<int>(threadIdx.x % 32)), live(b < n_tokens * nb) {
        if (!live) return;
        v = x[b * 32 + lane];
        amax = warp_max(fabsf(v));
    }
    // Where the block goes: its token's cache row slots[b / nb], block b % nb of block_bytes.
    __device__ uint8_t *block(uint8_t *cache, const int32_t *slots, size_t row_bytes, size_t block_bytes) const {
        return cache + static_cast<size_t>(slots[b / nb]) * row_bytes + static_cast<size_t>(b % nb) * block_bytes;
    }
};

// One warp per block of 32 values, the bytes of cpu::quantize_row_q8_0 (see k_quantize_acts).
__global__ void k_kv_store_q8_0(const float *x, const int32_t *slots, int64_t n_tokens, int64_t n, uint8_t *cache,
                                size_t row_bytes) {
    const KvBlockLane k(x, n_tokens, n);
    if (!k.live) return;
    const __half dh = __float2half_rn(__fdiv_rn(k.amax, 127.0f));
    const float d = __half2float(dh);
    const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
    int q = __float2int_rn(__fmul_rn(k.v, id));
    q = q > 127 ? 127 : (q < -127 ? -127 : q);
    uint8_t *blk = k.block(cache, slots, row_bytes, 34);
    blk[2 + k.lane] = static_cast<uint8_t>(static_cast<int8_t>(q));
    if (k.lane == 0) *reinterpret_cast<uint16_t *>(blk) = __half_as_ushort(dh);
}

// One warp per block of 32 values, the bytes of cpu::quantize_row_q4_0: the element of largest magnitude
// (the first of equals) with its sign, d = max / -8 as f16, codes clamp(round-to-even(x / d + 8), 0, 15);
// lane j < 16 writes byte j, its own code low and lane j + 16's high.
__global__ void k_kv_store_q4_0(const float *x, const int32_t *slots, int64_t n_tokens, int64_t n, uint8_t *cache,
                                size_t row_bytes) {
    const KvBlockLane k(x, n_tokens, n);
    if (!k.live) return;
    const unsigned first = __ffs(__ballot_sync(0xffffffffu, fabsf(k.v) == k.amax)) - 1;
    const float lead = __shfl_sync(0xffffffffu, k.v, static_cast<int>(first));
    const float mx = k.amax == 0.0f ? 0.0f : lead;  // the CPU's max starts at +0, whatever sign a zero has
    const __half dh = __float2half_rn(__fdiv_rn(mx, -8.0f));
    const float d = __half2float(dh);
    const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
    int q = __float2int_rn(__fadd_rn(__fmul_rn(k.v, id), 8.0f));
    q = q > 15 ? 15 : (q < 0 ? 0 : q);
    const int hi = __shfl_down_sync(0xffffffffu, q, 16);
    uint8_t *blk = k.block(cache, slots, row_bytes, 18);
    if (k.lane < 16) blk[2 + k.lane] = static_cast<uint8_t>(q | (hi << 4));
    if (k.lane == 0) *reinterpret_cast<uint16_t *>(blk) = __half_as_ushort(dh);
}

__global__ void k_copy_rows(const uint8_t *src, const int32_t *src_rows, uint8_t *dst, const int32_t *dst_rows,
                            size_t row_bytes) {
    const int64_t r = blockIdx.x;
    const uint8_t *s = src + static_cast<size_t>(src_rows ? src_rows[r] : r) * row_bytes;
    uint8_t *d = dst + static_cast<size_t>(dst_rows ? dst_rows[r] : r) * row_bytes;
    for (size_t i = threadIdx.x; i < row_bytes; i += blockDim.x) d[i] = s[i];
}

__global__ void k_copy_cols(const float *x, float *y, int64_t n_rows, int64_t x_width, int64_t y_width, int64_t y_col,
                            int64_t groups, int64_t off, int64_t n) {
    const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e >= n_rows * groups * n) return;
    const int64_t r = e / (groups * n), g = e / n % groups, i = e % n;
    y[r * y_width + y_col + g * n + i] = x[r * x_width + g * (x_width / groups) + off + i];
}

// As cpu::sigmoid_mul: x * (1 / (1 + e^-g)), each step rounded.
__global__ void k_sigmoid_mul(const float *x, const float *g, float *y, int64_t n, int64_t width, int64_t g_width) {
    const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e >= n) return;
    const float gate = g[g_width == 1 ? e / width : e];
    y[e] = __fmul_rn(x[e], __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-gate))));
}

__global__ void k_probe(int *p) {
    if (p) *p = 1;
}

} // namespace

void rms_norm(const float *x, const float *w, float *y, int64_t n_rows, int64_t dim, float eps, cudaStream_t s) {
    k_rms_norm<<<static_cast<unsigned>(n_rows), kNormThreads, 0, s>>>(x, w, y, dim, eps);
}

void layer_norm(const float *x, const float *w, const float *b, float *y, int64_t n_rows, int64_t dim, float eps,
                cudaStream_t s) {
    if (n_rows > 0) k_layer_norm<<<static_cast<unsigned>(n_rows), kNormThreads, 0, s>>>(x, w, b, y, dim, eps);
}

void add_pos_rows(float *y, const DevWeight &table, const int32_t *pos, int64_t n_tokens, int64_t width, cudaStream_t s) {
    const int64_t n = n_tokens * width;
    if (n > 0) k_add_pos_rows<<<blocks_for(n, 256), 256, 0, s>>>(y, table.codes, table.type == kF16, pos, n, width);
}

void add_inplace(float *y, const float *x, int64_t n, cudaStream_t s) {
    if (n > 0) k_add<<<blocks_for(n, 256), 256, 0, s>>>(y, x, n);
}

void swiglu(const float *gate, const float *up, float *out, int64_t n, cudaStream_t s) {
    k_swiglu<<<blocks_for(n, 256), 256, 0, s>>>(gate, up, out, n);
}

void rope_angles(const int32_t *pos, int64_t n_tokens, int n_rot, float theta, float freq_scale,
                 const float *freq_factors, float *cs, float *sn, cudaStream_t s) {
    const int half = n_rot / 2;
    if (half == 0) return;
    k_rope_angles<<<blocks_for(n_tokens * half, 128), 128, 0, s>>>(pos, n_tokens, half, n_rot, theta, freq_scale,
                                                                     freq_factors, cs, sn);
}

void elementwise(Ew op, const float *x, const float *x2, float *y, int64_t n, float a, float b, cudaStream_t s) {
    if (n > 0) k_elementwise<<<blocks_for(n, 256), 256, 0, s>>>(op, x, x2, y, n, a, b);
}

void rope_angles_yarn(const int32_t *pos, int64_t n_tokens, int n_rot, float theta, float freq_scale,
                      const float *freq_factors, const RopeYarn &y, float *cs, float *sn, cudaStream_t s) {
    const int half = n_rot / 2;
    if (half == 0 || n_tokens == 0) return;
    const YarnRamp ramp = y.ext_factor != 0.0f ? yarn_ramp(n_rot, theta, y) : YarnRamp{0, 0};
    k_rope_angles_yarn<<<blocks_for(n_tokens * half, 128), 128, 0, s>>>(pos, n_tokens, half, n_rot, theta, freq_scale,
                                                                          freq_factors, y, ramp, yarn_mscale(freq_scale, y),
                                                                          cs, sn);
}

void rope_apply(float *x, int64_t n_tokens, int n_heads, int head_dim, int n_rot, bool neox, const float *cs,
                const float *sn, cudaStream_t s) {
    const int half = n_rot / 2;
    if (half == 0) return;
    k_rope_apply<<<blocks_for(n_tokens * n_heads * half, 256), 256, 0, s>>>(x, n_tokens, n_heads, head_dim, half, neox,
                                                                              cs, sn);
}

void kv_store(const float *x, const int32_t *slots, int64_t n_tokens, int64_t n, uint32_t kv_type, uint8_t *cache,
              size_t row_bytes, cudaStream_t s) {
    if (n_tokens <= 0 || n <= 0) return;
    if (kv_type == kQ8_0)
        k_kv_store_q8_0<<<blocks_for(n_tokens * n / 32, 8), 256, 0, s>>>(x, slots, n_tokens, n, cache, row_bytes);
    else if (kv_type == kQ4_0)
        k_kv_store_q4_0<<<blocks_for(n_tokens * n / 32, 8), 256, 0, s>>>(x, slots, n_tokens, n, cache, row_bytes);
    else
        k_kv_store_f16<<<blocks_for(n_tokens * n, 256), 256, 0, s>>>(x, slots, n_tokens, n, cache, row_bytes);
}

void gather_rows(const uint8_t *cache, const int32_t *rows, int64_t n, size_t row_bytes, uint8_t *dst, cudaStream_t s) {
    if (n > 0) k_copy_rows<<<static_cast<unsigned>(n), 128, 0, s>>>(cache, rows, dst, nullptr, row_bytes);
}

void scatter_rows(uint8_t *cache, const int32_t *rows, int64_t n, size_t row_bytes, const uint8_t *src, cudaStream_t s) {
    if (n > 0) k_copy_rows<<<static_cast<unsigned>(n), 128, 0, s>>>(src, nullptr, cache, rows, row_bytes);
}

void copy_cols(const float *x, float *y, int64_t n_rows, int64_t x_width, int64_t y_width, int64_t y_col, int64_t groups,
               int64_t off, int64_t n, cudaStream_t s) {
    const int64_t total = n_rows * groups * n;
    if (total > 0) k_copy_cols<<<blocks_for(total, 256), 256, 0, s>>>(x, y, n_rows, x_width, y_width, y_col, groups, off, n);
}

void sigmoid_mul(const float *x, const float *g, float *y, int64_t n_rows, int64_t width, int64_t g_width, cudaStream_t s) {
    const int64_t total = n_rows * width;
    if (total > 0) k_sigmoid_mul<<<blocks_for(total, 256), 256, 0, s>>>(x, g, y, total, width, g_width);
}

bool image_runs_here(cudaError_t *err) {
    cudaFuncAttributes attr{};
    *err = cudaFuncGetAttributes(&attr, k_probe);
    return *err == cudaSuccess;
}

} // namespace ember::cu
