// cu_check.hpp — turning CUDA runtime errors into ember::Error (host code only).
#pragma once

#include "core/error.hpp"

#include <cuda_runtime.h>

namespace ember::cu {

// Out-of-memory becomes EMBER_ERR_OUT_OF_MEMORY; no driver or no device EMBER_ERR_UNSUPPORTED; the rest
// (launch failures, a lost device) EMBER_ERR_BACKEND, each naming the call.
[[noreturn]] void fail_cuda(cudaError_t e, const char *what);
inline void check(cudaError_t e, const char *what) {
    if (e != cudaSuccess) fail_cuda(e, what);
}
// Checks the last kernel launch (launch configuration errors; execution errors show at the next sync).
void check_launch(const char *what);

} // namespace ember::cu

#define EMBER_CU(call) ::ember::cu::check((call), #call)
