// cu_check.cpp — CUDA errors as ember::Error.
#include "cu_check.hpp"

namespace ember::cu {

void fail_cuda(cudaError_t e, const char *what) {
    ember_status st = EMBER_ERR_BACKEND;
    if (e == cudaErrorMemoryAllocation) st = EMBER_ERR_OUT_OF_MEMORY;
    else if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice || e == cudaErrorStubLibrary ||
             e == cudaErrorNoKernelImageForDevice || e == cudaErrorUnsupportedPtxVersion ||
             e == cudaErrorCallRequiresNewerDriver)
        st = EMBER_ERR_UNSUPPORTED;
    fail(st, "cuda: %s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

void check_launch(const char *what) { check(cudaGetLastError(), what); }

} // namespace ember::cu
