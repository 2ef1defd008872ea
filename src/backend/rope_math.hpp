// rope_math.hpp — graph.h's ROPE_YARN frequencies, written once for every backend: the YaRN ramp between
// interpolated and extrapolated angles, LongRoPE's factors, and the output scale. Plain C++ that CUDA
// compiles for the device too: the CPU's rope (cpu/rope.cpp), Vulkan's cos/sin tables (vk_program.cpp) and
// CUDA's angle kernel (elementwise.cu) all take their frequencies from here, in double.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define EMBER_ROPE_HD __host__ __device__ __forceinline__
#else
#define EMBER_ROPE_HD inline
#endif

namespace ember {

// ROPE_YARN's options (graph.h); the defaults are plain ROPE's.
struct RopeYarn {
    float ext_factor = 0, attn_factor = 1, beta_fast = 0, beta_slow = 0;
    uint32_t n_ctx_orig = 0;
};

// The ramp's ends: pairs below lo keep the extrapolated (unscaled) frequency, pairs above hi the
// interpolated one. Only meaningful with ext_factor != 0.
struct YarnRamp {
    double lo, hi;
};
EMBER_ROPE_HD YarnRamp yarn_ramp(int n_rot, float theta, const RopeYarn &y) {
    const double n_ctx = y.n_ctx_orig, two_pi = 2.0 * 3.14159265358979323846, base = theta;
    const double c_fast = n_rot * log(n_ctx / (static_cast<double>(y.beta_fast) * two_pi)) / (2.0 * log(base));
    const double c_slow = n_rot * log(n_ctx / (static_cast<double>(y.beta_slow) * two_pi)) / (2.0 * log(base));
    const double lo = floor(c_fast), hi = ceil(c_slow);
    return {lo > 0.0 ? lo : 0.0, hi < n_rot - 1.0 ? hi : n_rot - 1.0};
}

// Pair i's frequency in double (the angle is pos times it), as cpu/rope.cpp: freq_scale theta^(-2i/n_rot)
// / factor (factor: the rope's frequency factor tensor, 1 without), mixed by the ramp with the unscaled one.
EMBER_ROPE_HD double yarn_freq(int i, int n_rot, float theta, float freq_scale, float factor, const RopeYarn &y,
                               YarnRamp r) {
    const double base_freq = pow(static_cast<double>(theta), -2.0 * i / static_cast<double>(n_rot));
    double f = static_cast<double>(freq_scale) * base_freq / static_cast<double>(factor);
    if (y.ext_factor != 0.0f) {
        const double extrap = base_freq / static_cast<double>(factor);
        double t = (i - r.lo) / (r.hi - r.lo > 0.001 ? r.hi - r.lo : 0.001);
        t = t < 0.0 ? 0.0 : (t > 1.0 ? 1.0 : t);
        const double mix = (1.0 - t) * static_cast<double>(y.ext_factor);
        f = f * (1.0 - mix) + extrap * mix;
    }
    return f;
}

// The factor of both rotated values: attn_factor, times YaRN's 1 + 0.1 ln(1 / freq_scale) with the ramp on.
EMBER_ROPE_HD double yarn_mscale(float freq_scale, const RopeYarn &y) {
    double m = y.attn_factor;
    if (y.ext_factor != 0.0f) m *= 1.0 + 0.1 * log(1.0 / static_cast<double>(freq_scale));
    return m;
}

} // namespace ember
