// rounded_math.hpp — single float operations rounded to nearest that nvcc may not fuse into a
// multiply-add: on the device the _rn intrinsics, on the host the operators (a host file using these is
// compiled without contraction). Where a kernel must give the CPU's bits (the CPU rounds every product),
// it computes with these (quant_math.hpp's dequantization, gelu_math.hpp's GELU).
#pragma once

#include "attn_math.hpp"  // EMBER_HD

namespace ember::cu {

EMBER_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
EMBER_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
EMBER_HD float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}
EMBER_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}

} // namespace ember::cu
