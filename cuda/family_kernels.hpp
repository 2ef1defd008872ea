// family_kernels.hpp — launchers of the ops graph.h gained with the families of windows, softcaps, YaRN
// and experts (defined in elementwise.cu, attention.cu and moe.cu), beside kernels.hpp's. Same conventions: f32 row-major
// activations, enqueued on `s`, never synchronizing.
#pragma once

#include "kernels.hpp"
#include "backend/rope_math.hpp"

namespace ember::cu {

// y = x * a (SCALE), a * tanh(x / a) (SOFTCAP), gelu(x) * x2 in GELU's tanh form (GEGLU), or gpt-oss's
// clamped SwiGLU x' sigmoid(a x') (u' + 1), x' = min(x, b), u' = clamp(x2, -b, b) (MOE's SWIGLU_OAI).
// n values; y may be x or x2.
// Gelu: y = gelu(x), the tanh form (graph.h's GELU). GELU's tanh form is the CPU's arithmetic exactly
// (cpu/gelu_lanes.hpp), so GEGLU and GELU give the CPU's bits.
enum class Ew { Scale = 0, Softcap = 1, Geglu = 2, SwigluOai = 3, Mul = 4, Gelu = 5 };   // Mul: y = x * x2 (graph.h's MUL)
void elementwise(Ew op, const float *x, const float *x2, float *y, int64_t n, float a, float b, cudaStream_t s);

// rope_angles with ROPE_YARN's ramp and output scale (rope_math.hpp): cos and sin times mscale.
void rope_angles_yarn(const int32_t *pos, int64_t n_tokens, int n_rot, float theta, float freq_scale,
                      const float *freq_factors, const RopeYarn &y, float *cs, float *sn, cudaStream_t s);

// ATTENTION_EXT's options over kernels.hpp's attention: a sliding window (query at p sees positions
// p - window + 1 .. p; 0: none; the splits then cover those keys), a score softcap (0: none), sinks
// ([n_head] logits joining the normaliser in the combine; null: none), chunked local attention and
// attention temperature.
struct AttnExt {
    int32_t window = 0;
    float softcap = 0;
    const float *sinks = nullptr;
    // Chunked local attention (0: none; the splits then cover the chunk) and attention temperature
    // (temp_scale 0: none), graph.h's last two options.
    int32_t local_chunk = 0, temp_floor = 0;
    float temp_scale = 0, temp_offset = 0;
};
// `group` > 0: at most that many tokens at a time (the partials hold a.n_splits splits of `group`
// tokens' heads); each token's result is its own whatever group it is in.
void attention_ext(const AttnArgs &a, const AttnExt &x, cudaStream_t s, int group = 0);

// The encoders' ops. graph.h's LAYER_NORM over n_rows rows of dim: y = (x - mean) / sqrt(var + eps) * w + b
// (w, b: [dim] or null for none; y may be x), mean and variance in double as cpu::layer_norm.
void layer_norm(const float *x, const float *w, const float *b, float *y, int64_t n_rows, int64_t dim, float eps,
                cudaStream_t s);
// ADD_POS_ROWS: y[t] += row pos[t] of `table` (an F32 or F16 weight of rows of `width`; the host checked
// the positions against its rows).
void add_pos_rows(float *y, const DevWeight &table, const int32_t *pos, int64_t n_tokens, int64_t width, cudaStream_t s);

// MOE's last step: y[t] = sum_j gate[t k + j] * outs[pos[t k + j]] (rows of n_out), in the order of the
// choices.
void moe_combine(const float *outs, const int32_t *pos, const float *gate, int64_t n_tokens, int64_t n_out, int k,
                 float *y, cudaStream_t s);
// x (n_rows rows of n) scaled row by row in place: row r times factor[r] (experts gated on their input).
void moe_scale_rows(float *x, const float *factor, int64_t n_rows, int64_t n, cudaStream_t s);

} // namespace ember::cu
