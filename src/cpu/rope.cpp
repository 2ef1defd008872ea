// rope.cpp — rotary position embedding.
//
// The angle is formed and its sine and cosine taken in double. In float, pos * theta at position 4096
// already carries an absolute error of ~2e-4 rad, which would show in every rotated value; in double
// it is exact to ~1e-12 and costs n_rot/2 sincos per token, shared by all heads.
#include "backend/rope_math.hpp"
#include "core/error.hpp"
#include "cpu/kernels.hpp"

#include <algorithm>
#include <cmath>

namespace ember::cpu {

void rope(float *x, int64_t n_tokens, int n_heads, int head_dim, const int32_t *pos, const RopeParams &p) {
    constexpr int kMaxPairs = 512;
    const int half = p.n_rot / 2;
    if (p.n_rot < 0 || p.n_rot % 2 != 0 || p.n_rot > head_dim || half > kMaxPairs)
        fail(EMBER_ERR_INVALID_ARGUMENT, "cpu rope: n_rot %d invalid for head_dim %d", p.n_rot, head_dim);
    if (half == 0) return;
    // freq[i] = freq_scale * theta_base^(-2i/n_rot) / freq_factors[i]; with YaRN (graph.h's ROPE_YARN)
    // the angle is a mix of that and the unscaled (extrapolated) one, which is still pos times one
    // frequency per pair: (freq_scale (1 - mix_i) + mix_i) * theta_base^(-2i/n_rot) / factor_i.
    double freq[kMaxPairs];
    const RopeYarn y{p.ext_factor, p.attn_factor, p.beta_fast, p.beta_slow, p.n_ctx_orig};
    const YarnRamp ramp = p.ext_factor != 0 ? yarn_ramp(p.n_rot, p.theta_base, y) : YarnRamp{0, 0};
    for (int i = 0; i < half; ++i)
        freq[i] = yarn_freq(i, p.n_rot, p.theta_base, p.freq_scale, p.freq_factors ? p.freq_factors[i] : 1.0f, y, ramp);
    const double mscale = yarn_mscale(p.freq_scale, y);
    // normal pairs (2i, 2i+1); NEOX pairs (i, i + n_rot/2).
    const int stride = p.neox ? 1 : 2;
    const int partner = p.neox ? half : 1;
    float cs[kMaxPairs], sn[kMaxPairs];
    for (int64_t t = 0; t < n_tokens; ++t) {
        for (int i = 0; i < half; ++i) {
            const double a = static_cast<double>(pos[t]) * freq[i];
            cs[i] = static_cast<float>(std::cos(a) * mscale);
            sn[i] = static_cast<float>(std::sin(a) * mscale);
        }
        float *row = x + t * static_cast<int64_t>(n_heads) * head_dim;
        for (int h = 0; h < n_heads; ++h) {
            float *v = row + static_cast<int64_t>(h) * head_dim;
            for (int i = 0; i < half; ++i) {
                const float x0 = v[i * stride], x1 = v[i * stride + partner];
                v[i * stride] = x0 * cs[i] - x1 * sn[i];
                v[i * stride + partner] = x0 * sn[i] + x1 * cs[i];
            }
        }
    }
}

} // namespace ember::cpu
