// gelu_math.hpp — GELU's tanh form one value at a time, with the CPU's arithmetic exactly
// (cpu/gelu_lanes.hpp): 0.5 g (1 + tanh y) written as g / (1 + e^-2y), y = sqrt(2/pi) (g + 0.044715 g^3),
// e^x by the same range reduction and degree-7 polynomial. Shared by the kernels (elementwise.cu's GELU,
// GEGLU and MOE's GELU experts) and by tests/test_cuda_program.cpp, which checks it on the host bit for bit
// against cpu::gelu.
#pragma once

#include "attn_math.hpp"  // EMBER_HD
#include "rounded_math.hpp"

#include <cstdint>
#include <cstring>

namespace ember::cu {

// e^x for x clamped to [-87.3, 88.3] (2^n stays a normal float): n = round(x log2 e), r = x - n ln 2 with
// ln 2 in two parts, the Taylor polynomial of e^r, times 2^n built in the exponent bits.
EMBER_HD float gelu_exp(float x) {
    x = x < -87.3f ? -87.3f : x;
    x = x > 88.3f ? 88.3f : x;
    const float t = mul_rn(x, 1.44269504088896341f);
    const float n = add_rn(add_rn(t, 12582912.0f), -12582912.0f);  // nearest integer, ties to even
    float r = add_rn(x, -mul_rn(n, 0.693359375f));
    r = add_rn(r, -mul_rn(n, -2.12194440e-4f));
    float p = add_rn(mul_rn(r, 1.0f / 5040.0f), 1.0f / 720.0f);
    p = add_rn(mul_rn(p, r), 1.0f / 120.0f);
    p = add_rn(mul_rn(p, r), 1.0f / 24.0f);
    p = add_rn(mul_rn(p, r), 1.0f / 6.0f);
    p = add_rn(mul_rn(p, r), 0.5f);
    p = add_rn(mul_rn(p, r), 1.0f);
    p = add_rn(mul_rn(p, r), 1.0f);
    const int32_t e = (static_cast<int32_t>(n) + 127) << 23;
    float two_n;
    std::memcpy(&two_n, &e, sizeof two_n);
    return mul_rn(p, two_n);
}

EMBER_HD float gelu(float g) {
    const float y = mul_rn(add_rn(g, mul_rn(mul_rn(mul_rn(g, g), g), 0.044715f)), 0.7978845608028654f);
    return div_rn(g, add_rn(1.0f, gelu_exp(mul_rn(y, -2.0f))));
}

} // namespace ember::cu
