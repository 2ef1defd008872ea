// cublaslt.hpp — cuBLASLt, opened at run time (dlopen libcublasLt.so.13, or $EMBER_CUBLASLT): only the
// functions used are looked up, into this table. The module then has no NEEDED entry for it, and a
// machine without cuBLASLt still runs every product through the module's own kernels (slower prefill).
#pragma once

#include <cublasLt.h>

#include <string>

namespace ember::cu {

struct LtApi {
    decltype(&cublasLtCreate) create = nullptr;
    decltype(&cublasLtDestroy) destroy = nullptr;
    decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
    decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
    decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
    decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
    decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
    decltype(&cublasLtMatmulPreferenceCreate) pref_create = nullptr;
    decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
    decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
    decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
    decltype(&cublasLtMatmul) matmul = nullptr;
};

// The table, loaded once per process; nullptr when the library or a function is missing (*why says
// which).
const LtApi *lt_api(std::string *why);

// C[m x n] (column-major, ldc) = alpha * op(A) * op(B) + beta * C, as this module uses it: A is the
// weight (row-major n_out x n_in, i.e. column-major n_in x n_out, transposed), B the activations
// (row-major n_tokens x n_in), C the output rows (row-major n_tokens x n_out, leading dimension ldc).
// half_in: A and B are f16 (tensor cores), else f32 (CUBLAS_COMPUTE_32F: no TF32). C is f32.
struct LtGemm {
    const void *a, *b;
    float *c;
    int64_t m, n, k, ldc;
    bool half_in;
    float beta;
};
void lt_matmul(const LtApi &api, cublasLtHandle_t h, const LtGemm &g, void *workspace, size_t workspace_bytes,
               cudaStream_t s);

} // namespace ember::cu
