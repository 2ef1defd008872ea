// moe.cu — MOE's gated sum of the experts' outputs, and the scaling of an expert's gathered rows where
// the gates scale the experts' inputs (family_kernels.hpp's moe_combine, moe_scale_rows).
#include "cu_util.cuh"
#include "family_kernels.hpp"

namespace ember::cu {

namespace {

// One thread per output value; the sum in the order of the token's choices (largest logit first), each
// product rounded, as cpu/moe.cpp.
__global__ void k_moe_combine(const float *outs, const int32_t *pos, const float *gate, int64_t n_tokens, int64_t n_out,
                              int k, float *y) {
    const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e >= n_tokens * n_out) return;
    const int64_t t = e / n_out, i = e % n_out;
    float acc = 0.0f;
    for (int j = 0; j < k; ++j) {
        const int64_t s = t * k + j;
        acc = __fadd_rn(acc, __fmul_rn(gate[s], outs[static_cast<int64_t>(pos[s]) * n_out + i]));
    }
    y[e] = acc;
}

// One thread per value: row r of x (n_rows of n) times factor[r], one rounding, as cpu/moe.cpp scales
// the rows it gathers for an expert gated on its input.
__global__ void k_scale_rows(float *x, const float *factor, int64_t n_rows, int64_t n) {
    const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e >= n_rows * n) return;
    x[e] = __fmul_rn(x[e], factor[e / n]);
}

} // namespace

void moe_scale_rows(float *x, const float *factor, int64_t n_rows, int64_t n, cudaStream_t s) {
    if (n_rows * n > 0) k_scale_rows<<<blocks_for(n_rows * n, 256), 256, 0, s>>>(x, factor, n_rows, n);
}

void moe_combine(const float *outs, const int32_t *pos, const float *gate, int64_t n_tokens, int64_t n_out, int k,
                 float *y, cudaStream_t s) {
    if (n_tokens * n_out > 0) k_moe_combine<<<blocks_for(n_tokens * n_out, 256), 256, 0, s>>>(outs, pos, gate, n_tokens, n_out, k, y);
}

} // namespace ember::cu
