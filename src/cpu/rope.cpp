// rope.cpp — rotary position embedding.
//
// The angle is formed and its sine and cosine taken in double. In float, pos * theta at position 4096
// already carries an absolute error of ~2e-4 rad, which would show in every rotated value; in double
// it is exact to ~1e-12 and costs n_rot/2 sincos per token, shared by all heads.
//
// The frequencies (a pow each) and a position's sines and cosines are also shared by the calls of a
// decode step: each layer ropes Q and K at the same position with the same parameters (44 calls per
// token in a 22-layer model, ~2.5 us each before, 0.5 % of a TinyLlama Q4_K_M step at 2 threads). So
// each thread keeps the last parameters' frequencies and the last position's values (RopeMemo),
// computed exactly as before: the bits are the same.
#include "backend/rope_math.hpp"
#include "core/error.hpp"
#include "cpu/kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ember::cpu {

namespace {

constexpr int kMaxPairs = 512;

// The calling thread's last frequencies and last position's cosines and sines. The parameters are
// compared by value, the frequency factors too (their pointer could be another model's by now).
struct RopeMemo {
    bool has_freq = false, has_pos = false;
    int n_rot = 0;
    float theta_base = 0, freq_scale = 0, ext_factor = 0, attn_factor = 0, beta_fast = 0, beta_slow = 0;
    uint32_t n_ctx_orig = 0;
    bool has_factors = false;
    float factors[kMaxPairs];
    double freq[kMaxPairs];
    double mscale = 1;
    int32_t pos = 0;
    float cs[kMaxPairs], sn[kMaxPairs];

    bool same(const RopeParams &p) const {
        return has_freq && n_rot == p.n_rot && theta_base == p.theta_base && freq_scale == p.freq_scale &&
               ext_factor == p.ext_factor && attn_factor == p.attn_factor && beta_fast == p.beta_fast &&
               beta_slow == p.beta_slow && n_ctx_orig == p.n_ctx_orig && has_factors == (p.freq_factors != nullptr) &&
               (!has_factors || std::memcmp(factors, p.freq_factors, sizeof(float) * static_cast<size_t>(n_rot / 2)) == 0);
    }

    // freq[i] = freq_scale * theta_base^(-2i/n_rot) / freq_factors[i]; with YaRN (graph.h's ROPE_YARN)
    // the angle is a mix of that and the unscaled (extrapolated) one, which is still pos times one
    // frequency per pair: (freq_scale (1 - mix_i) + mix_i) * theta_base^(-2i/n_rot) / factor_i.
    void set_freq(const RopeParams &p) {
        const int half = p.n_rot / 2;
        const RopeYarn y{p.ext_factor, p.attn_factor, p.beta_fast, p.beta_slow, p.n_ctx_orig};
        const YarnRamp ramp = p.ext_factor != 0 ? yarn_ramp(p.n_rot, p.theta_base, y) : YarnRamp{0, 0};
        for (int i = 0; i < half; ++i)
            freq[i] = yarn_freq(i, p.n_rot, p.theta_base, p.freq_scale, p.freq_factors ? p.freq_factors[i] : 1.0f, y, ramp);
        mscale = yarn_mscale(p.freq_scale, y);
        n_rot = p.n_rot, theta_base = p.theta_base, freq_scale = p.freq_scale, ext_factor = p.ext_factor;
        attn_factor = p.attn_factor, beta_fast = p.beta_fast, beta_slow = p.beta_slow, n_ctx_orig = p.n_ctx_orig;
        has_factors = p.freq_factors != nullptr;
        if (has_factors) std::memcpy(factors, p.freq_factors, sizeof(float) * static_cast<size_t>(half));
        has_freq = true;
        has_pos = false;
    }

    void set_pos(int32_t at) {
        for (int i = 0; i < n_rot / 2; ++i) {
            const double a = static_cast<double>(at) * freq[i];
            cs[i] = static_cast<float>(std::cos(a) * mscale);
            sn[i] = static_cast<float>(std::sin(a) * mscale);
        }
        pos = at;
        has_pos = true;
    }
};

thread_local RopeMemo t_memo;

} // namespace

void rope(float *x, int64_t n_tokens, int n_heads, int head_dim, const int32_t *pos, const RopeParams &p) {
    const int half = p.n_rot / 2;
    if (p.n_rot < 0 || p.n_rot % 2 != 0 || p.n_rot > head_dim || half > kMaxPairs)
        fail(EMBER_ERR_INVALID_ARGUMENT, "cpu rope: n_rot %d invalid for head_dim %d", p.n_rot, head_dim);
    if (half == 0) return;
    RopeMemo &m = t_memo;
    if (!m.same(p)) m.set_freq(p);
    // normal pairs (2i, 2i+1); NEOX pairs (i, i + n_rot/2).
    const int stride = p.neox ? 1 : 2;
    const int partner = p.neox ? half : 1;
    const float *cs = m.cs, *sn = m.sn;
    for (int64_t t = 0; t < n_tokens; ++t) {
        if (!m.has_pos || m.pos != pos[t]) m.set_pos(pos[t]);
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
