// gelu_lanes.hpp — GELU's tanh form on W lanes, written once and compiled per ISA level:
// elementwise.cpp (the baseline, 8 lanes) and elementwise_avx512.cpp (16 lanes). Only IEEE operations,
// each written out (both files are built with -ffp-contract=off), so every lane gives the same bits at
// every level.
//
// 0.5 g (1 + tanh y) is g * sigmoid(2y) = g / (1 + e^-2y), y = sqrt(2/pi) (g + 0.044715 g^3); e^x is
// simd_avx2.hpp's polynomial with separate multiplies and adds. No cancellation: the result is within a
// few roundings of g's relative precision for every g. A libm tanh per element was 28 % of a BERT
// encoder's pass (33M parameters, 2,048 tokens).
//
// Internal linkage on purpose (as recurrent_loops.hpp): each including file gets its own copy, compiled
// with its own flags.
#pragma once

#include <cstdint>
#include <cstring>

namespace ember::cpu::detail {

namespace {

typedef float GeluF8 __attribute__((vector_size(32)));
typedef int32_t GeluI8 __attribute__((vector_size(32)));
typedef float GeluF16 __attribute__((vector_size(64)));
typedef int32_t GeluI16 __attribute__((vector_size(64)));

// F, I: W floats and W 32-bit integers (GCC's vector types; declared outside the template, whose
// dependent vector types __builtin_convertvector does not take).
template <class F, class I, int W>
struct GeluLanes {

    // e^x: n = round(x log2 e), r = x - n ln 2 (ln 2 in two parts, so r is nearly exact), the degree-7
    // Taylor polynomial of e^r (|r| <= 0.35: ~5e-9 truncation), times 2^n built in the exponent bits.
    // Inputs clamped to [-87.3, 88.3] keep 2^n a normal float (callers use e^x only beside 1).
    static F exp(F x) {
        x = x < -87.3f ? F{} - 87.3f : x;
        x = x > 88.3f ? F{} + 88.3f : x;
        const F t = x * 1.44269504088896341f;
        const F n = (t + 12582912.0f) - 12582912.0f;  // nearest integer (|t| < 2^22), ties to even
        F r = x - n * 0.693359375f;
        r = r - n * -2.12194440e-4f;
        F p = r * (1.0f / 5040.0f) + 1.0f / 720.0f;
        p = p * r + 1.0f / 120.0f;
        p = p * r + 1.0f / 24.0f;
        p = p * r + 1.0f / 6.0f;
        p = p * r + 0.5f;
        p = p * r + 1.0f;
        p = p * r + 1.0f;
        const I e = (__builtin_convertvector(n, I) + 127) << 23;
        F two_n;
        std::memcpy(&two_n, &e, sizeof two_n);
        return p * two_n;
    }

    static F gelu(F g) {
        constexpr float kSqrt2OverPi = 0.7978845608028654f;
        const F y = (g + g * g * g * 0.044715f) * kSqrt2OverPi;
        return g / (1.0f + exp(y * -2.0f));
    }

    // out[i] = gelu(g[i]), times up[i] where up is given; W at a time, the tail through the same lanes.
    // out may alias g or up.
    static void rows(const float *g, const float *up, float *out, int64_t n) {
        int64_t i = 0;
        for (; i + W <= n; i += W) {
            F v, u;
            std::memcpy(&v, g + i, sizeof v);
            v = gelu(v);
            if (up) std::memcpy(&u, up + i, sizeof u), v *= u;
            std::memcpy(out + i, &v, sizeof v);
        }
        if (i == n) return;
        float tg[W] = {}, tu[W] = {}, to[W];
        std::memcpy(tg, g + i, static_cast<size_t>(n - i) * sizeof(float));
        if (up) std::memcpy(tu, up + i, static_cast<size_t>(n - i) * sizeof(float));
        rows(tg, up ? tu : nullptr, to, W);
        std::memcpy(out + i, to, static_cast<size_t>(n - i) * sizeof(float));
    }
};

} // namespace

} // namespace ember::cpu::detail
