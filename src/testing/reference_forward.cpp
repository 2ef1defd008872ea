// reference_forward.cpp — see reference_forward.hpp. One straightforward loop over tokens and layers;
// each family's differences are flags read from the architecture name and the file's metadata.
#include "testing/reference_forward.hpp"

#include "core/error.hpp"
#include "core/fp16.hpp"
#include "core/mapped_file.hpp"
#include "cpu/kernels.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>

namespace ember {

namespace {

using Vec = std::vector<double>;
constexpr double kPi = 3.14159265358979323846;

// What distinguishes the families, from their definitions.
struct Family {
    bool neox = false;            // rope pairs (i, i + n_rot/2) rather than (2i, 2i+1)
    int qk_norm = 0;              // 0 none, 1 per head, 2 over the whole q / k row
    bool pre_norms = true, post_norms = false;
    bool gelu = false;            // GeGLU (tanh GELU) rather than SwiGLU
    bool oss = false;             // gpt-oss: sinks, clamped SwiGLU experts, its norm names
    int window_pattern = -1;      // -1 no window; 0 every layer; p: layers il % p < p - 1
    double local_theta = 0;       // window layers' own rope base, unscaled (Gemma 3)
    bool local_unscaled = false;  // window layers rope with the model's base, unscaled (OLMo 3)
    uint32_t no_rope_step = 0;    // layers l with (l + 1) % step == 0 have no rope (SmolLM3)
    // Qwen3.5 / Qwen3.6 / Qwen3-Next: Gated DeltaNet layers between gated attention layers, the pre-FFN
    // norm named post_attention_norm, a gated shared expert beside the routed ones.
    bool hybrid = false;
    // How value head j of a DeltaNet layer finds its key head among H_k: Qwen3-Next's j / (H_v / H_k)
    // (each key head's value heads adjacent), Qwen3.5's j % H_k (the key heads tiled).
    bool kv_heads_grouped = false;
    bool imrope = false;          // rope.dimension_sections' interleaved sections (Qwen3.5); Qwen3-Next: NEOX
    // LFM2: gated short-convolution blocks where attention.head_count_kv (per layer) is 0; the final norm
    // named token_embd_norm; LFM2-MoE's experts gated by sigmoid with a selection bias.
    bool lfm2 = false;
    // Granite 4 (granitehybrid): Mamba-2 layers where attention.head_count_kv (per layer) is 0, Granite's
    // multipliers, no rope where rope.scaling.finetuned is false, an unweighted shared expert.
    bool mamba2 = false;
    // Llama 4: chunked local attention in the roped layers, where q and k are RMS-normed per head without a
    // weight after the rope; the attention temperature in the unroped ones; experts every few layers, each
    // chosen expert's input scaled by the sigmoid of its router logit, and an ungated shared expert.
    bool llama4 = false;
};

Family family_of(const std::string &arch, bool has_window) {
    Family f;
    if (arch == "llama" || arch == "granite") return f;
    if (arch == "smollm3") {
        f.no_rope_step = 4;
        return f;
    }
    if (arch == "mistral3") return f;   // Llama's layers; YaRN and the attention temperature from metadata
    if (arch == "llama4") {
        f.llama4 = true;
        return f;
    }
    if (arch == "granitehybrid") {
        f.mamba2 = true;
        return f;
    }
    f.neox = true;
    if (arch == "qwen2" || arch == "phi3") return f;
    if (arch == "qwen3" || arch == "qwen3moe") f.qk_norm = 1;
    else if (arch == "gemma2" || arch == "gemma3") {
        f.post_norms = true, f.gelu = true;
        f.window_pattern = arch == "gemma2" ? 2 : 6;
        if (arch == "gemma3") f.qk_norm = 1, f.local_theta = 10000.0;
    } else if (arch == "olmo2") {
        f.pre_norms = false, f.post_norms = true, f.qk_norm = 2;
        if (has_window) f.window_pattern = 4, f.local_unscaled = true;
    } else if (arch == "gpt-oss") {
        f.oss = true, f.window_pattern = 2;
    } else if (arch == "qwen35" || arch == "qwen35moe" || arch == "qwen3next") {
        f.hybrid = true, f.qk_norm = 1, f.kv_heads_grouped = arch == "qwen3next", f.imrope = arch != "qwen3next";
    } else if (arch == "lfm2" || arch == "lfm2moe") {
        f.lfm2 = true, f.qk_norm = 1;
    } else {
        fail(EMBER_ERR_UNSUPPORTED, "reference: no definition of '%s'", arch.c_str());
    }
    return f;
}

class Ref {
public:
    Ref(const gguf::File &g, uint32_t n_ctx) : g_(g) {
        const auto arch = g_.get_string("general.architecture");
        if (!arch) fail(EMBER_ERR_INVALID_MODEL, "reference: metadata key 'general.architecture' is missing");
        arch_ = std::string(*arch);
        a_ = arch_ + ".";
        n_embd = u("embedding_length"), n_layer = u("block_count"), n_head = u("attention.head_count");
        // Multi-token-prediction blocks (counted in block_count, the last nextn_predict_layers ones) are a
        // draft head: the model's own pass runs the layers before them.
        if (has("nextn_predict_layers")) {
            if (u("nextn_predict_layers") >= n_layer)
                fail(EMBER_ERR_INVALID_MODEL, "reference: nextn_predict_layers is not below block_count");
            n_layer -= u("nextn_predict_layers");
        }
        const gguf::KV *kv_key = g_.find(a_ + "attention.head_count_kv");
        if (const gguf::Value *kv = kv_key && kv_key->value.type == gguf::ValueType::ARRAY ? &kv_key->value : nullptr) {
            // One count per layer (LFM2, Granite 4): 0 marks a recurrent layer; the attention layers share one.
            if (kv->count < n_layer) fail(EMBER_ERR_INVALID_MODEL, "reference: attention.head_count_kv is too short");
            n_head_kv = 0;
            for (uint32_t l = 0; l < n_layer; ++l) {
                recurrent.push_back(kv->array_int(l) == 0);
                if (kv->array_int(l) != 0) n_head_kv = static_cast<uint32_t>(kv->array_int(l));
            }
            if (n_head_kv == 0) n_head_kv = n_head;
        } else {
            n_head_kv = has("attention.head_count_kv") ? u("attention.head_count_kv") : n_head;
        }
        head_dim = has("attention.key_length") ? u("attention.key_length") : n_embd / n_head;
        n_rot = has("rope.dimension_count") ? u("rope.dimension_count") : head_dim;
        eps = f("attention.layer_norm_rms_epsilon", 1e-5);
        theta = f("rope.freq_base", 10000.0);
        window = has("attention.sliding_window") ? u("attention.sliding_window") : 0;
        fam = family_of(arch_, window > 0);
        // Gemma 3: attention.sliding_window_pattern, a period or one flag per layer (true: a window).
        if (const gguf::KV *pat = arch_ == "gemma3" ? g_.find(a_ + "attention.sliding_window_pattern") : nullptr) {
            if (pat->value.type == gguf::ValueType::ARRAY)
                for (uint32_t l = 0; l < n_layer; ++l) window_flags.push_back(pat->value.array_int(l) != 0);
            else
                fam.window_pattern = static_cast<int>(u("attention.sliding_window_pattern"));
        }
        if (fam.window_pattern >= 0 && window == 0) window = arch_ == "gemma2" ? 4096 : arch_ == "gpt-oss" ? 128 : 0;
        n_expert = has("expert_count") ? u("expert_count") : 0;
        n_used = has("expert_used_count") ? u("expert_used_count") : 0;
        if (auto type = g_.get_string(a_ + "rope.scaling.type")) {
            scaling = std::string(*type);
            factor = f("rope.scaling.factor", 1.0);
            orig_ctx = has("rope.scaling.original_context_length") ? u("rope.scaling.original_context_length") : 0;
        }
        attn_factor = f("rope.scaling.attn_factor", 1.0);
        // Attention temperature (Mistral 3's llama_4_scaling_beta): the query at p scaled by
        // 1 + scale ln(floor(p / n) + 1), n the original context.
        temp_scale = f("attention.temperature_scale", 0.0);
        temp_floor = orig_ctx ? orig_ctx : (has("context_length") ? u("context_length") : 0);
        // YaRN (the configuration's rope_scaling): the ramp's share (extrapolation_factor), its two
        // boundaries, and the magnitude: attention_factor where given, which replaces the default
        // 1 + 0.1 ln(factor); that default divided by 1 + 0.1 mscale_all_dim ln(factor) where given.
        ext_factor = f("rope.scaling.yarn_ext_factor", 1.0);
        beta_fast = f("rope.scaling.yarn_beta_fast", 32.0), beta_slow = f("rope.scaling.yarn_beta_slow", 1.0);
        yarn_mscale = ext_factor != 0 && factor > 1
                          ? (1.0 + 0.1 * std::log(factor)) / (1.0 + 0.1 * f("rope.scaling.yarn_log_multiplier", 0.0) * std::log(factor))
                          : 1.0;
        yarn_mscale = f("rope.scaling.yarn_attn_factor", yarn_mscale);
        // LongRoPE (Phi-3): the short factors up to the original context, the long ones for a context
        // beyond it, chosen by the context's size (not the position) as the model card prescribes; the
        // attention factor (sqrt(1 + ln(scale) / ln(original)), stored by the converters) applies to both.
        const uint32_t n_ctx_orig = has("rope.scaling.original_context_length")
                                        ? u("rope.scaling.original_context_length")
                                        : (has("context_length") ? u("context_length") : 0);
        longrope_factors = n_ctx > n_ctx_orig && vec_or_null("rope_factors_long.weight") ? "rope_factors_long.weight"
                                                                                          : "rope_factors_short.weight";
        const bool gemma = arch_ == "gemma2" || arch_ == "gemma3";
        embd_scale = gemma ? std::sqrt(static_cast<double>(n_embd)) : f("embedding_scale", 1.0);
        residual_scale = f("residual_scale", 1.0);
        attn_scale = f("attention.scale", 1.0 / std::sqrt(static_cast<double>(head_dim)));
        logit_scale = 1.0 / f("logit_scale", 1.0);
        attn_softcap = arch_ == "gemma2" ? f("attn_logit_softcapping", 50.0) : 0.0;
        final_softcap = arch_ == "gemma2" ? f("final_logit_softcapping", 30.0) : f("final_logit_softcapping", 0.0);
        if (fam.hybrid) {
            full_attn_interval = has("full_attention_interval") ? u("full_attention_interval") : 4;
            ssm_conv = u("ssm.conv_kernel"), ssm_state = u("ssm.state_size");
            ssm_groups = u("ssm.group_count"), ssm_heads = u("ssm.time_step_rank");
            if (!full_attn_interval || !ssm_groups || !ssm_heads || ssm_heads % ssm_groups || !ssm_state || !ssm_conv)
                fail(EMBER_ERR_INVALID_MODEL, "reference: inconsistent DeltaNet shape");
            // Which layers are DeltaNet layers: attention.recurrent_layers (one flag per layer, as newer
            // converters write from the checkpoint's layer_types) where present, as llama.cpp prefers
            // it; else every layer but each full_attention_interval-th.
            const gguf::Value *flags = g_.get_array(a_ + "attention.recurrent_layers");
            if (flags && flags->count < n_layer)
                fail(EMBER_ERR_INVALID_MODEL, "reference: attention.recurrent_layers has fewer entries than layers");
            for (uint32_t l = 0; l < n_layer; ++l)
                recurrent.push_back(flags ? flags->array_int(l) != 0 : (l + 1) % full_attn_interval != 0);
        }
        if (fam.lfm2) {
            l_cache = u("shortconv.l_cache");
            n_dense_lead = has("leading_dense_block_count") ? u("leading_dense_block_count") : 0;
        }
        if (fam.mamba2) {
            ssm_conv = u("ssm.conv_kernel"), ssm_state = u("ssm.state_size"), ssm_groups = u("ssm.group_count");
            ssm_heads = u("ssm.time_step_rank"), ssm_inner = u("ssm.inner_size");
            if (!ssm_heads || !ssm_groups || ssm_heads % ssm_groups || ssm_inner % ssm_heads || !ssm_state || !ssm_conv)
                fail(EMBER_ERR_INVALID_MODEL, "reference: inconsistent Mamba-2 shape");
            use_rope = g_.get_bool(a_ + "rope.scaling.finetuned").value_or(true);   // false: no rope (NoPE)
        }
        if (fam.llama4) read_llama4();
        if (fam.imrope) {
            const gguf::Value *sec = g_.get_array(a_ + "rope.dimension_sections");
            if (!sec) fail(EMBER_ERR_INVALID_MODEL, "reference: rope.dimension_sections is missing");
            // Interleaved multi-section rope (llama.cpp's IMROPE, Qwen3.5's): pair i falls in sector
            // s = i mod (the four counts' total) and takes the time, height or width position as s mod 3
            // is 0, 1 or 2, provided s < 3 x that section's count, else the fourth (extra) position. A
            // text token's first three positions are its index and the fourth is 0, so only pairs that
            // fall to the fourth stay unturned (none with Qwen3.5's 11/11/10/0 over 32 pairs: plain NEOX).
            for (uint64_t i = 0; i < 4 && i < sec->count; ++i) sections[i] = static_cast<int>(sec->array_int(i));
            has_sections = sections[0] + sections[1] + sections[2] + sections[3] > 0;
        }
    }

    std::vector<Vec> run(const std::vector<int32_t> &tokens) {
        const size_t n = tokens.size();
        const Mat &emb = mat("token_embd.weight");
        std::vector<Vec> x(n, Vec(n_embd));
        for (size_t t = 0; t < n; ++t)
            for (uint32_t i = 0; i < n_embd; ++i) x[t][i] = emb.w[static_cast<size_t>(tokens[t]) * n_embd + i] * embd_scale;
        for (uint32_t l = 0; l < n_layer; ++l) layer(l, x);
        const std::string out = find("output.weight") ? "output.weight" : "token_embd.weight";
        std::vector<Vec> logits(n);
        for (size_t t = 0; t < n; ++t) {
            logits[t] = matvec(out, rmsnorm(x[t], vec(fam.lfm2 ? "token_embd_norm.weight" : "output_norm.weight")));
            for (double &v : logits[t]) {
                v *= logit_scale;
                if (final_softcap > 0) v = final_softcap * std::tanh(v / final_softcap);
            }
        }
        return logits;
    }

private:
    // Llama 4's layout, from the checkpoint's definition: attention_chunk_size 8192, a global unroped layer
    // every fourth, the temperature 1 + 0.1 ln(floor((p + 1) / 8192) + 1) in those (floor_scale 8192,
    // attn_scale 0.1), the L2 norm unless the configuration turns it off (the 128-expert model), experts
    // every interleave_moe_layer_step-th layer. A file may state the chunk, the step and the temperature
    // (attention.chunk_size, no_rope_layer_step, attention.temperature_*); attention.sliding_window 0 means
    // no chunks and no temperature, every layer roped but the last (MobileLLM-R1's files, as llama.cpp
    // reads them).
    void read_llama4() {
        auto positive = [&](const char *k, uint32_t fallback) {
            const uint32_t v = has(k) ? u(k) : fallback;
            if (v == 0) fail(EMBER_ERR_INVALID_MODEL, "reference: %s is 0", k);
            return v;
        };
        moe_step = positive("interleave_moe_layer_step", 0);
        if (has("attention.sliding_window") && u("attention.sliding_window") == 0) {
            fam.no_rope_step = n_layer;
            return;
        }
        chunk = positive("attention.chunk_size", 8192);
        // The chunked layers: a period p (il % p < p - 1; 0: all) or one flag per layer.
        if (const gguf::Value *flags = g_.get_array(a_ + "attention.sliding_window_pattern")) {
            for (uint32_t l = 0; l < n_layer; ++l) chunk_flags.push_back(l < flags->count && flags->array_int(l) != 0);
        } else {
            const uint32_t p = has("attention.sliding_window_pattern") ? u("attention.sliding_window_pattern") : 4;
            for (uint32_t l = 0; l < n_layer; ++l) chunk_flags.push_back(p == 0 || l % p < p - 1);
        }
        fam.no_rope_step = positive("no_rope_layer_step", 4);
        temp_scale = f("attention.temperature_scale", 0.1);
        temp_floor = positive("attention.temperature_length", 8192);
        temp_offset = 1.0;
        l2_norm = n_expert != 128;
    }

    struct Mat {
        int64_t n_in = 0, n_out = 0, n_mat = 1;
        std::vector<double> w;   // n_mat matrices of n_out rows of n_in
    };

    bool has(const char *k) const { return g_.get_int(a_ + k).has_value(); }
    uint32_t u(const char *k) const { return static_cast<uint32_t>(*g_.get_int(a_ + k)); }
    double f(const char *k, double fallback) const { return g_.get_float(a_ + k).value_or(fallback); }
    const gguf::TensorInfo *find(const std::string &name) const { return g_.find_tensor(name); }
    const float *vec(const std::string &name) const {
        const gguf::TensorInfo *t = find(name);
        if (t && t->type != DType::F32) fail(EMBER_ERR_INVALID_MODEL, "reference: '%s' is not F32", name.c_str());
        return t ? reinterpret_cast<const float *>(t->data) : nullptr;
    }
    // A weight as doubles, dequantized once.
    const Mat &mat(const std::string &name) {
        auto it = cache_.find(name);
        if (it != cache_.end()) return it->second;
        const gguf::TensorInfo *t = find(name);
        if (!t) fail(EMBER_ERR_INVALID_MODEL, "reference: tensor '%s' is missing", name.c_str());
        Mat m;
        m.n_in = t->ne[0], m.n_out = t->n_dims > 1 ? t->ne[1] : 1, m.n_mat = t->n_dims > 2 ? t->ne[2] : 1;
        m.w = reference_weights(*t);
        return cache_.emplace(name, std::move(m)).first->second;
    }
    // Rows [row0, row0 + n_out) of matrix `which` of a weight, times x, plus an optional bias.
    Vec matvec(const std::string &name, const Vec &x, const float *bias = nullptr, int64_t row0 = 0, int64_t n_out = -1,
               int64_t which = 0) {
        const Mat &m = mat(name);
        if (n_out < 0) n_out = m.n_out;
        Vec y(static_cast<size_t>(n_out));
        const double *base = m.w.data() + (which * m.n_out + row0) * m.n_in;
        for (int64_t o = 0; o < n_out; ++o) {
            double s = bias ? bias[o] : 0.0;
            for (int64_t i = 0; i < m.n_in; ++i) s += base[o * m.n_in + i] * x[static_cast<size_t>(i)];
            y[static_cast<size_t>(o)] = s;
        }
        return y;
    }
    Vec rmsnorm(const Vec &x, const float *w, size_t off = 0, size_t n = 0) const {
        if (n == 0) n = x.size();
        double ss = 0;
        for (size_t i = 0; i < n; ++i) ss += x[off + i] * x[off + i];
        const double sc = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
        Vec y(n);
        for (size_t i = 0; i < n; ++i) y[i] = x[off + i] * sc * (w ? w[i] : 1.0);
        return y;
    }
    void norm_groups(Vec &x, const float *w, size_t group) const {
        for (size_t h = 0; h < x.size() / group; ++h) {
            const Vec y = rmsnorm(x, w, h * group, group);
            std::copy(y.begin(), y.end(), x.begin() + static_cast<std::ptrdiff_t>(h * group));
        }
    }
    bool windowed(uint32_t l) const {
        if (fam.window_pattern < 0 || window == 0) return false;
        if (!window_flags.empty()) return window_flags[l];
        const uint32_t p = static_cast<uint32_t>(fam.window_pattern);
        return p == 0 || l % p < p - 1;
    }

    // Rotary embedding of one head row set at position pos: each pair turns by pos * freq_i, freq_i =
    // theta^(-2i/n_rot) with the layer's scaling: linear (divide by the factor), YaRN (blend of the
    // divided and undivided frequency by a linear ramp over the pairs whose wavelength lies between the
    // original context / beta_fast and / beta_slow, values scaled by its magnitude), LongRoPE and
    // Llama-3 (per-pair divisors; LongRoPE values scaled by its attention factor).
    void rope(Vec &x, uint32_t heads, int pos, bool local) const {
        const double base = local && fam.local_theta > 0 ? fam.local_theta : theta;
        const bool scaled = !(local && (fam.local_theta > 0 || fam.local_unscaled));
        const float *div = scaled ? (vec_or_null("rope_freqs.weight") ? vec_or_null("rope_freqs.weight")
                                                                       : vec_or_null(longrope_factors))
                                  : nullptr;
        double mscale = scaled && vec_or_null(longrope_factors) ? attn_factor : 1.0;
        const int half = static_cast<int>(n_rot / 2);
        std::vector<double> freq(static_cast<size_t>(half));
        for (int i = 0; i < half; ++i) {
            double fi = std::pow(base, -2.0 * i / n_rot);
            if (div) fi /= div[i];
            double fr = fi;
            if (scaled && (scaling == "linear" || scaling == "yarn")) fr = fi / factor;
            if (scaled && scaling == "yarn") {
                // The pair's rotations over the original context: n_ctx * fi / (2 pi). Pairs turning
                // more than beta_fast times keep fi; fewer than beta_slow take fi / factor; a linear
                // ramp in between, over the pair index between the two (rounded outwards) boundaries.
                auto boundary = [&](double beta) {
                    return n_rot * std::log(orig_ctx / (beta * 2 * kPi)) / (2 * std::log(base));
                };
                const double lo = std::max(0.0, std::floor(boundary(beta_fast)));
                const double hi = std::min<double>(n_rot - 1, std::ceil(boundary(beta_slow)));
                const double keep = ext_factor * (1.0 - std::clamp((i - lo) / std::max(0.001, hi - lo), 0.0, 1.0));
                fr = fr * (1.0 - keep) + fi * keep;
            }
            freq[static_cast<size_t>(i)] = fr;
        }
        if (scaled && scaling == "yarn") mscale = yarn_mscale * attn_factor;
        for (uint32_t h = 0; h < heads; ++h) {
            double *v = x.data() + h * head_dim;
            for (int i = 0; i < half; ++i) {
                const double a = section_position(i, pos) * freq[static_cast<size_t>(i)];
                const int p0 = fam.neox ? i : 2 * i, p1 = fam.neox ? i + half : 2 * i + 1;
                const double x0 = v[p0], x1 = v[p1];
                v[p0] = (x0 * std::cos(a) - x1 * std::sin(a)) * mscale;
                v[p1] = (x0 * std::sin(a) + x1 * std::cos(a)) * mscale;
            }
        }
    }
    const float *vec_or_null(const char *name) const { return vec(name); }
    double temperature(double pos) const {
        return temp_scale != 0 ? 1.0 + temp_scale * std::log(std::floor((pos + temp_offset) / temp_floor) + 1.0) : 1.0;
    }
    // The position pair i turns by, for a text token at `pos` (see the sections in the constructor).
    int section_position(int i, int pos) const {
        if (!has_sections) return pos;
        const int sector = i % (sections[0] + sections[1] + sections[2] + sections[3]);
        const int kind = sector % 3;
        return sector < 3 * sections[kind] ? pos : 0;
    }

    static double round_f16(double v) { return fp16_to_fp32(fp32_to_fp16(static_cast<float>(v))); }
    static double gelu(double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / kPi) * (v + 0.044715 * v * v * v))); }
    static double silu(double v) { return v / (1 + std::exp(-v)); }
    static double sigmoid(double v) { return 1 / (1 + std::exp(-v)); }
    static double softplus(double v) { return v > 30 ? v : std::log1p(std::exp(v)); }

    Vec ffn(const std::string &p, const Vec &xn) {
        const uint32_t d = n_embd;
        if (n_expert == 0 || !find(p + "ffn_gate_inp.weight")) {
            Vec g, up;
            if (find(p + "ffn_gate.weight")) {
                g = matvec(p + "ffn_gate.weight", xn), up = matvec(p + "ffn_up.weight", xn);
            } else {  // Phi-3: ffn_up holds the gate rows, then the up rows
                const int64_t nff = mat(p + "ffn_up.weight").n_out / 2;
                g = matvec(p + "ffn_up.weight", xn, nullptr, 0, nff), up = matvec(p + "ffn_up.weight", xn, nullptr, nff, nff);
            }
            for (size_t i = 0; i < g.size(); ++i) g[i] = (fam.gelu ? gelu(g[i]) : silu(g[i])) * up[i];
            return matvec(p + "ffn_down.weight", g);
        }
        // Experts: the n_used largest router logits, weighted by their softmax among themselves; LFM2-MoE:
        // the n_used largest sigmoid(logit) + exp_probs_b, weighted by their sigmoids over those chosen.
        const Vec l = matvec(p + "ffn_gate_inp.weight", xn, vec(p + "ffn_gate_inp.bias"));
        Vec score = l, prob(n_expert);
        if (fam.llama4 && (l_index + 1) % moe_step != 0)
            fail(EMBER_ERR_INVALID_MODEL, "reference: experts in %s, not an interleave_moe_layer_step layer", p.c_str());
        const float *sel_bias = fam.lfm2 ? vec(p + "exp_probs_b.bias") : nullptr;
        for (uint32_t e = 0; e < n_expert; ++e) {
            prob[e] = fam.lfm2 ? sigmoid(l[e]) : l[e];
            score[e] = prob[e] + (sel_bias ? sel_bias[e] : 0.0);
        }
        std::vector<int> idx(n_expert);
        std::iota(idx.begin(), idx.end(), 0);
        std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return score[a] > score[b]; });
        if (n_used < n_expert)
            stats.min_route_margin = std::min(stats.min_route_margin, score[idx[n_used - 1]] - score[idx[n_used]]);
        double sum = 0;
        for (uint32_t j = 0; j < n_used; ++j) sum += fam.lfm2 ? prob[idx[j]] : std::exp(l[idx[j]] - l[idx[0]]);
        Vec out(d, 0.0);
        const int64_t nff = mat(p + "ffn_gate_exps.weight").n_out;
        for (uint32_t j = 0; j < n_used; ++j) {
            const int e = idx[j];
            double gw = fam.lfm2 ? prob[e] / sum : std::exp(l[e] - l[idx[0]]) / sum;
            Vec xe = xn;
            if (fam.llama4) {   // the sigmoid scales the expert's input; its output joins as it is
                for (double &v : xe) v *= sigmoid(l[e]);
                gw = 1.0;
            }
            auto bias = [&](const char *name, int64_t width) {
                const float *b = vec(p + name);
                return b ? b + e * width : nullptr;
            };
            Vec g = matvec(p + "ffn_gate_exps.weight", xe, bias("ffn_gate_exps.bias", nff), 0, -1, e);
            const Vec up = matvec(p + "ffn_up_exps.weight", xe, bias("ffn_up_exps.bias", nff), 0, -1, e);
            for (size_t i = 0; i < g.size(); ++i) {
                if (fam.oss) {  // gpt-oss: gate clamped above at 7, up to [-7, 7], sigmoid(1.702 g), up + 1
                    const double gc = std::min(g[i], 7.0), uc = std::clamp(up[i], -7.0, 7.0);
                    g[i] = gc / (1 + std::exp(-1.702 * gc)) * (uc + 1);
                } else {
                    g[i] = silu(g[i]) * up[i];
                }
            }
            const Vec o = matvec(p + "ffn_down_exps.weight", g, bias("ffn_down_exps.bias", d), 0, -1, e);
            for (uint32_t i = 0; i < d; ++i) out[i] += gw * o[i];
        }
        if (find(p + "ffn_up_shexp.weight")) {
            // The shared expert (SwiGLU), weighted by sigmoid of its one-row gate.
            Vec g = matvec(p + "ffn_gate_shexp.weight", xn);
            const Vec up = matvec(p + "ffn_up_shexp.weight", xn);
            for (size_t i = 0; i < g.size(); ++i) g[i] = silu(g[i]) * up[i];
            const Vec o = matvec(p + "ffn_down_shexp.weight", g);
            // Granite 4's and Llama 4's shared experts join unweighted (they have no gate).
            const double gate = fam.mamba2 || fam.llama4 ? 1.0 : sigmoid(matvec(p + "ffn_gate_inp_shexp.weight", xn)[0]);
            for (uint32_t i = 0; i < d; ++i) out[i] += gate * o[i];
        }
        return out;
    }

    void layer(uint32_t l, std::vector<Vec> &x) {
        const std::string p = "blk." + std::to_string(l) + ".";
        if (fam.hybrid && recurrent[l]) return delta_net(p, x);
        if (fam.lfm2 && recurrent[l]) return short_conv(p, x);
        if (fam.mamba2 && recurrent[l]) return mamba2(p, x);
        const size_t n = x.size();
        const uint32_t nq = n_head * head_dim, nkv = n_head_kv * head_dim, hd = head_dim;
        const bool local = windowed(l);
        l_index = l;
        const bool roped = use_rope && (fam.no_rope_step == 0 || (l + 1) % fam.no_rope_step != 0);
        // Llama 4: chunks in the roped layers the period marks, the temperature in the unroped ones.
        const bool chunked = chunk > 0 && chunk_flags[l];
        const bool tempered = temp_scale != 0 && !(fam.llama4 && roped);
        std::vector<Vec> q(n), k(n), v(n), gate(n);
        for (size_t t = 0; t < n; ++t) {
            const Vec xn = fam.pre_norms ? rmsnorm(x[t], vec(p + "attn_norm.weight")) : x[t];
            if (find(p + "attn_qkv.weight")) {
                q[t] = matvec(p + "attn_qkv.weight", xn, nullptr, 0, nq);
                k[t] = matvec(p + "attn_qkv.weight", xn, nullptr, nq, nkv);
                v[t] = matvec(p + "attn_qkv.weight", xn, nullptr, nq + nkv, nkv);
            } else if (fam.hybrid) {
                // attn_q holds, per head, its query rows and then its output gate's rows.
                const Vec qg = matvec(p + "attn_q.weight", xn);
                q[t].resize(nq), gate[t].resize(nq);
                for (uint32_t h = 0; h < n_head; ++h)
                    for (uint32_t i = 0; i < hd; ++i)
                        q[t][h * hd + i] = qg[2 * h * hd + i], gate[t][h * hd + i] = qg[2 * h * hd + hd + i];
                k[t] = matvec(p + "attn_k.weight", xn);
                v[t] = matvec(p + "attn_v.weight", xn);
            } else {
                q[t] = matvec(p + "attn_q.weight", xn, vec(p + "attn_q.bias"));
                k[t] = matvec(p + "attn_k.weight", xn, vec(p + "attn_k.bias"));
                v[t] = matvec(p + "attn_v.weight", xn, vec(p + "attn_v.bias"));
            }
            if (fam.qk_norm) {
                norm_groups(q[t], vec(p + "attn_q_norm.weight"), fam.qk_norm == 1 ? hd : nq);
                norm_groups(k[t], vec(p + "attn_k_norm.weight"), fam.qk_norm == 1 ? hd : nkv);
            }
            if (roped) {
                rope(q[t], n_head, static_cast<int>(t), local);
                rope(k[t], n_head_kv, static_cast<int>(t), local);
                if (l2_norm) norm_groups(q[t], nullptr, hd), norm_groups(k[t], nullptr, hd);
            }
            for (double &e : k[t]) e = round_f16(e);
            for (double &e : v[t]) e = round_f16(e);
        }
        const uint32_t group = n_head / n_head_kv;
        const float *sinks = fam.oss ? vec(p + "attn_sinks.weight") : nullptr;
        for (size_t t = 0; t < n; ++t) {
            Vec att(nq, 0.0);
            const size_t first = chunked ? t / chunk * chunk : local && t + 1 > window ? t + 1 - window : 0;
            for (uint32_t h = 0; h < n_head; ++h) {
                const uint32_t kvh = h / group;
                Vec s(t + 1 - first);
                double mx = sinks ? sinks[h] : -1e300;
                for (size_t j = first; j <= t; ++j) {
                    double dot = 0;
                    for (uint32_t i = 0; i < hd; ++i) dot += q[t][h * hd + i] * k[j][kvh * hd + i];
                    double sc = dot * attn_scale * (tempered ? temperature(static_cast<double>(t)) : 1.0);
                    if (attn_softcap > 0) sc = attn_softcap * std::tanh(sc / attn_softcap);
                    s[j - first] = sc;
                    mx = std::max(mx, sc);
                }
                double sum = sinks ? std::exp(sinks[h] - mx) : 0.0;
                for (double &e : s) sum += e = std::exp(e - mx);
                for (size_t j = first; j <= t; ++j)
                    for (uint32_t i = 0; i < hd; ++i) att[h * hd + i] += s[j - first] / sum * v[j][kvh * hd + i];
            }
            if (fam.hybrid)
                for (uint32_t i = 0; i < nq; ++i) att[i] *= sigmoid(gate[t][i]);
            Vec o = matvec(p + "attn_output.weight", att, vec(p + "attn_output.bias"));
            add_block(x[t], o, p + "post_attention_norm.weight");
            ffn_block(p, x[t]);
        }
    }
    // x += ffn(norm(x)), with the families' norm names and post-norms.
    void ffn_block(const std::string &p, Vec &x) {
        const std::string ffn_norm = fam.oss || fam.hybrid ? "post_attention_norm.weight" : "ffn_norm.weight";
        const Vec xn = fam.pre_norms ? rmsnorm(x, vec(p + ffn_norm)) : x;
        Vec f = ffn(p, xn);
        add_block(x, f, p + "post_ffw_norm.weight");
    }

    // A Gated DeltaNet layer (Qwen3.5 / Qwen3-Next's linear attention), token by token from a zero state.
    // From the normed input h: a vector m of 2 key_dim + value_dim channels, z (value_dim), and per value
    // head beta = sigmoid(.) and alpha; m passes a causal depthwise convolution over the last ssm_conv
    // tokens (zeros before the first) and SiLU, then splits into q, k (H_k heads of S) and v (H_v heads
    // of S); q and k are L2-normalised per head (x / sqrt(|x|^2 + eps)) and q scaled by 1/sqrt(S). Each
    // value head j keeps an S x S matrix M (M[i][c]: key dim i, value dim c) and, per token,
    //   M *= exp(g), g = softplus(alpha + dt_bias) * ssm_a   (ssm_a = -exp(A_log): g < 0, a decay)
    //   d_c = beta (v_c - sum_i M[i][c] k_i);  M[i][c] += k_i d_c;  o_c = sum_i M[i][c] q_i
    // with q, k those of j's key head. o is RMS-normed per head (ssm_norm), times silu(z), then ssm_out.
    void delta_net(const std::string &p, std::vector<Vec> &x) {
        const size_t n = x.size();
        const uint32_t S = ssm_state, Hk = ssm_groups, Hv = ssm_heads, ratio = Hv / Hk, K = ssm_conv;
        const uint32_t key_dim = Hk * S, value_dim = Hv * S, conv_dim = 2 * key_dim + value_dim;
        std::vector<Vec> m(n), z(n), beta(n, Vec(Hv)), decay(n, Vec(Hv));
        const float *dt_bias = vec(p + "ssm_dt.bias"), *ssm_a = vec(p + "ssm_a");
        const float *conv_w = vec(p + "ssm_conv1d.weight"), *norm_w = vec(p + "ssm_norm.weight");
        if (!dt_bias || !ssm_a || !conv_w || !norm_w)
            fail(EMBER_ERR_INVALID_MODEL, "reference: a DeltaNet tensor of '%s' is missing", p.c_str());
        for (size_t t = 0; t < n; ++t) {
            const Vec h = rmsnorm(x[t], vec(p + "attn_norm.weight"));
            Vec b(Hv), a(Hv);
            if (find(p + "ssm_in.weight")) {
                // Qwen3-Next's older fused projection: per key head g, q_g (S), k_g (S), then v and z of
                // its `ratio` value heads (ratio S each).
                const Vec in = matvec(p + "ssm_in.weight", h);
                m[t].assign(conv_dim, 0.0), z[t].assign(value_dim, 0.0);
                const uint32_t group = 2 * S + 2 * ratio * S;
                for (uint32_t g = 0; g < Hk; ++g) {
                    const double *src = in.data() + g * group;
                    std::copy(src, src + S, m[t].begin() + g * S);
                    std::copy(src + S, src + 2 * S, m[t].begin() + key_dim + g * S);
                    std::copy(src + 2 * S, src + 2 * S + ratio * S, m[t].begin() + 2 * key_dim + g * ratio * S);
                    std::copy(src + 2 * S + ratio * S, src + group, z[t].begin() + g * ratio * S);
                }
            } else {
                m[t] = matvec(p + "attn_qkv.weight", h);
                z[t] = matvec(p + "attn_gate.weight", h);
            }
            if (find(p + "ssm_ba.weight")) {
                // Qwen3-Next: per key head, the betas of its `ratio` value heads, then their alphas.
                const Vec ba = matvec(p + "ssm_ba.weight", h);
                for (uint32_t j = 0; j < Hv; ++j) {
                    const uint32_t base = (j / ratio) * 2 * ratio + j % ratio;
                    b[j] = ba[base], a[j] = ba[base + ratio];
                }
            } else {
                b = matvec(p + "ssm_beta.weight", h);
                a = matvec(p + "ssm_alpha.weight", h);
            }
            for (uint32_t j = 0; j < Hv; ++j) {
                beta[t][j] = sigmoid(b[j]);
                decay[t][j] = std::exp(softplus(a[j] + dt_bias[j]) * ssm_a[j]);
            }
        }
        std::vector<std::vector<double>> M(Hv, std::vector<double>(static_cast<size_t>(S) * S, 0.0));
        Vec c(conv_dim), o(value_dim);
        for (size_t t = 0; t < n; ++t) {
            // Channel ch's taps w[ch][0..K-1] meet tokens t-K+1 .. t (the last tap the current token).
            for (uint32_t ch = 0; ch < conv_dim; ++ch) {
                double sum = 0;
                for (uint32_t j = 0; j < K; ++j) {
                    const ptrdiff_t src = static_cast<ptrdiff_t>(t) - static_cast<ptrdiff_t>(K - 1) + j;
                    if (src >= 0) sum += conv_w[static_cast<size_t>(ch) * K + j] * m[static_cast<size_t>(src)][ch];
                }
                c[ch] = silu(sum);
            }
            for (uint32_t h = 0; h < 2 * Hk; ++h) {   // q's heads, then k's
                double ss = 0;
                for (uint32_t i = 0; i < S; ++i) ss += c[h * S + i] * c[h * S + i];
                const double sc = 1.0 / std::sqrt(ss + eps) / (h < Hk ? std::sqrt(static_cast<double>(S)) : 1.0);
                for (uint32_t i = 0; i < S; ++i) c[h * S + i] *= sc;
            }
            for (uint32_t j = 0; j < Hv; ++j) {
                const uint32_t kh = fam.kv_heads_grouped ? j / ratio : j % Hk;
                const double *q = c.data() + kh * S, *k = c.data() + key_dim + kh * S, *v = c.data() + 2 * key_dim + j * S;
                std::vector<double> &Mj = M[j];
                for (double &e : Mj) e *= decay[t][j];
                for (uint32_t col = 0; col < S; ++col) {
                    double u = 0;
                    for (uint32_t i = 0; i < S; ++i) u += Mj[static_cast<size_t>(i) * S + col] * k[i];
                    const double d = beta[t][j] * (v[col] - u);
                    for (uint32_t i = 0; i < S; ++i) Mj[static_cast<size_t>(i) * S + col] += k[i] * d;
                }
                for (uint32_t col = 0; col < S; ++col) {
                    double sum = 0;
                    for (uint32_t i = 0; i < S; ++i) sum += Mj[static_cast<size_t>(i) * S + col] * q[i];
                    o[j * S + col] = sum;
                }
            }
            norm_groups(o, norm_w, S);
            for (uint32_t i = 0; i < value_dim; ++i) o[i] *= silu(z[t][i]);
            Vec out = matvec(p + "ssm_out.weight", o);
            add_block(x[t], out, p + "post_attention_norm.weight");
            ffn_block(p, x[t]);
        }
    }
    // LFM2's gated short convolution, from a zero window: in_proj gives B, C and x (n_embd each) of the
    // normed input; y_t = C_t * sum_j w[c][j] (B x)_{t-L+1+j} over the last l_cache tokens (zeros before
    // the first; no bias, no activation); out_proj.
    void short_conv(const std::string &p, std::vector<Vec> &x) {
        const size_t n = x.size();
        const uint32_t d = n_embd, L = l_cache;
        const float *w = vec(p + "shortconv.conv.weight");
        if (!w) fail(EMBER_ERR_INVALID_MODEL, "reference: '%sshortconv.conv.weight' is missing", p.c_str());
        std::vector<Vec> bx(n), c(n);
        for (size_t t = 0; t < n; ++t) {
            const Vec bcx = matvec(p + "shortconv.in_proj.weight", rmsnorm(x[t], vec(p + "attn_norm.weight")));
            bx[t].resize(d), c[t].assign(bcx.begin() + d, bcx.begin() + 2 * d);
            for (uint32_t i = 0; i < d; ++i) bx[t][i] = bcx[i] * bcx[2 * d + i];
        }
        for (size_t t = 0; t < n; ++t) {
            Vec y(d);
            for (uint32_t ch = 0; ch < d; ++ch) {
                double sum = 0;
                for (uint32_t j = 0; j < L; ++j) {
                    const ptrdiff_t src = static_cast<ptrdiff_t>(t) - static_cast<ptrdiff_t>(L - 1) + j;
                    if (src >= 0) sum += w[static_cast<size_t>(ch) * L + j] * bx[static_cast<size_t>(src)][ch];
                }
                y[ch] = c[t][ch] * sum;
            }
            Vec out = matvec(p + "shortconv.out_proj.weight", y);
            add_block(x[t], out, "");
            ffn_block(p, x[t]);
        }
    }

    // A Mamba-2 layer (Granite 4), from a zero state. ssm_in of the normed input gives z (inner), then
    // x B C (inner + 2 groups x state) and dt (one per head); x B C pass a causal depthwise convolution of
    // ssm_conv taps plus ssm_conv1d.bias, then SiLU. Head h (head_dim P = inner / heads) reads group
    // g = h / (heads / groups) of B and C and keeps a P x N state H:
    //   s = softplus(dt_h + dt_bias_h);  H[i][k] = H[i][k] exp(s A_h) + B_k x_i s;  y_i = sum_k H[i][k] C_k + D_h x_i
    // then y * silu(z), RMS-normed per group of inner / groups (ssm_norm), ssm_out.
    void mamba2(const std::string &p, std::vector<Vec> &x) {
        const size_t n = x.size();
        const uint32_t H = ssm_heads, G = ssm_groups, N = ssm_state, I = ssm_inner, P = I / H, K = ssm_conv;
        const uint32_t conv_dim = I + 2 * G * N;
        const float *conv_w = vec(p + "ssm_conv1d.weight"), *conv_b = vec(p + "ssm_conv1d.bias");
        const float *A = vec(p + "ssm_a"), *D = vec(p + "ssm_d"), *dt_b = vec(p + "ssm_dt.bias"), *norm_w = vec(p + "ssm_norm.weight");
        if (!conv_w || !A || !D || !dt_b)
            fail(EMBER_ERR_INVALID_MODEL, "reference: a Mamba-2 tensor of '%s' is missing", p.c_str());
        std::vector<Vec> in(n);
        for (size_t t = 0; t < n; ++t) in[t] = matvec(p + "ssm_in.weight", rmsnorm(x[t], vec(p + "attn_norm.weight")));
        std::vector<double> state(static_cast<size_t>(H) * P * N, 0.0);
        Vec c(conv_dim), y(I);
        for (size_t t = 0; t < n; ++t) {
            for (uint32_t ch = 0; ch < conv_dim; ++ch) {
                double sum = conv_b ? conv_b[ch] : 0.0;
                for (uint32_t j = 0; j < K; ++j) {
                    const ptrdiff_t src = static_cast<ptrdiff_t>(t) - static_cast<ptrdiff_t>(K - 1) + j;
                    if (src >= 0) sum += conv_w[static_cast<size_t>(ch) * K + j] * in[static_cast<size_t>(src)][I + ch];
                }
                c[ch] = silu(sum);
            }
            for (uint32_t h = 0; h < H; ++h) {
                const uint32_t g = h / (H / G);
                const double s = softplus(in[t][I + conv_dim + h] + dt_b[h]), dA = std::exp(s * A[h]);
                const double *xs = c.data() + h * P, *B = c.data() + I + g * N, *C = c.data() + I + G * N + g * N;
                for (uint32_t i = 0; i < P; ++i) {
                    double *st = state.data() + (static_cast<size_t>(h) * P + i) * N, sum = 0;
                    for (uint32_t k = 0; k < N; ++k) {
                        st[k] = st[k] * dA + B[k] * xs[i] * s;
                        sum += st[k] * C[k];
                    }
                    y[h * P + i] = sum + D[h] * xs[i];
                }
            }
            for (uint32_t i = 0; i < I; ++i) y[i] *= silu(in[t][i]);
            if (norm_w)
                for (uint32_t g = 0; g < G; ++g) {
                    const Vec yn = rmsnorm(y, norm_w + g * (I / G), g * (I / G), I / G);
                    std::copy(yn.begin(), yn.end(), y.begin() + g * (I / G));
                }
            Vec out = matvec(p + "ssm_out.weight", y);
            add_block(x[t], out, "");
            ffn_block(p, x[t]);
        }
    }
    // x += residual_scale * post_norm(block output).
    void add_block(Vec &x, Vec &o, const std::string &post_norm) const {
        if (fam.post_norms) o = rmsnorm(o, vec(post_norm));
        for (size_t i = 0; i < x.size(); ++i) x[i] += residual_scale * o[i];
    }

    const gguf::File &g_;
    std::map<std::string, Mat> cache_;
    std::string arch_, a_;
    Family fam;
    uint32_t n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_rot = 0, window = 0;
    uint32_t n_expert = 0, n_used = 0, orig_ctx = 0;
    double eps = 1e-5, theta = 10000, factor = 1, attn_factor = 1;
    double ext_factor = 1, beta_fast = 32, beta_slow = 1, yarn_mscale = 1;   // YaRN
    double temp_scale = 0, temp_offset = 0, temp_floor = 1;                   // attention temperature
    double embd_scale = 1, residual_scale = 1, attn_scale = 0, logit_scale = 1, attn_softcap = 0, final_softcap = 0;
    std::string scaling;
    const char *longrope_factors = "rope_factors_short.weight";
    int sections[4] = {0, 0, 0, 0};
    bool has_sections = false;
    uint32_t full_attn_interval = 0, ssm_conv = 0, ssm_state = 0, ssm_groups = 0, ssm_heads = 0;
    std::vector<bool> recurrent;   // per layer: a DeltaNet, short-convolution or Mamba-2 layer (hybrids)
    uint32_t l_cache = 0, n_dense_lead = 0, ssm_inner = 0;
    bool use_rope = true;
    std::vector<bool> window_flags;   // per layer: a window layer (a per-layer sliding_window_pattern)
    uint32_t moe_step = 0, chunk = 0;   // Llama 4 (read_llama4)
    std::vector<bool> chunk_flags;      // [n_layer] its chunked layers
    bool l2_norm = false;
    uint32_t l_index = 0;   // the layer being run

public:
    ReferenceStats stats;
};

} // namespace

std::vector<double> reference_weights(const gguf::TensorInfo &t) {
    const int64_t n_in = t.ne[0], rows = static_cast<int64_t>(t.n_elements) / n_in;
    const size_t row_bytes = dtype_row_bytes(t.type, static_cast<uint64_t>(n_in));
    std::vector<double> w(static_cast<size_t>(rows * n_in));
    std::vector<float> row(static_cast<size_t>(n_in));
    for (int64_t r = 0; r < rows; ++r) {
        cpu::dequantize_row(t.type, t.data + r * row_bytes, row.data(), n_in);
        std::copy(row.begin(), row.end(), w.begin() + r * n_in);
    }
    return w;
}

std::vector<std::vector<double>> reference_logits(const gguf::File &file, const std::vector<int32_t> &tokens,
                                                  ReferenceStats *stats, uint32_t n_ctx) {
    if (file.get_string("general.architecture") == std::optional<std::string_view>("gemma4"))
        return reference_gemma4_logits(file, tokens, stats);
    Ref ref(file, n_ctx ? n_ctx : static_cast<uint32_t>(tokens.size()));
    auto out = ref.run(tokens);
    if (stats) *stats = ref.stats;
    return out;
}

std::vector<std::vector<double>> reference_logits(const Model &model, const std::vector<int32_t> &tokens,
                                                  ReferenceStats *stats, uint32_t n_ctx) {
    return reference_logits(model.gguf(), tokens, stats, n_ctx);
}

std::vector<std::vector<double>> reference_logits_file(const std::string &path, const std::vector<int32_t> &tokens) {
    // The file is parsed here, not loaded as a Model: the reference runs families Ember may not run yet.
    const MappedFile file(path);
    const gguf::File g = gguf::File::parse(file.data(), file.size());
    return reference_logits(g, tokens);
}

} // namespace ember
