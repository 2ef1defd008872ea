// quant_round.hpp — private to src/cpu: the rounding steps the reference quantizers share (quant.cpp,
// quant_k.cpp, quant_b32.cpp). Baseline code: not for the AVX2 files.
#pragma once

#include <cmath>

namespace ember::cpu::detail {

// Round to nearest, ties to even (the default FP environment), as _mm256_round_ps does in the AVX2
// activation quantizer, so both produce the same integers.
static inline int round_even(float v) { return static_cast<int>(std::nearbyint(v)); }

// The smallest integer k in [0, kmax] with k * unit >= v (v >= 0), kmax when none is: how many steps of
// a stored (rounded-up) unit a scale or offset needs so that it never falls short.
static inline int ceil_steps(float v, float unit, int kmax) {
    if (!(unit > 0) || !(v > 0)) return 0;
    const float k = std::ceil(v / unit);
    return k > static_cast<float>(kmax) ? kmax : static_cast<int>(k);
}

} // namespace ember::cpu::detail
