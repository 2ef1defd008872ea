// reference_gemma4.cpp — Gemma 4's double-precision forward pass (reference_forward.hpp's contract),
// written from the model's definition and GGUF's names and keys, not from src/model: window and global
// layers with their own head sizes, rope bases and rotary widths; q and k RMS-normed per head with
// weights, v without; unscaled scores; the last attention.shared_kv_layers layers attending over the
// keys and values of the last window / global layer before them; per-layer embeddings; the MoE layers'
// dense FFN beside the routed experts; layer_output_scale; the final logit softcap. K and V are rounded
// to f16 as the default KV cache does; everything else is double.
#include "testing/reference_forward.hpp"

#include "core/error.hpp"
#include "core/fp16.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

namespace ember {

namespace {

using Vec = std::vector<double>;

class Gemma4Ref {
public:
    explicit Gemma4Ref(const gguf::File &g) : g_(g) {
        d = u("embedding_length"), L = u("block_count"), n_head = u("attention.head_count");
        hd_global = u("attention.key_length");
        hd_window = has("attention.key_length_swa") ? u("attention.key_length_swa") : hd_global;
        rot_global = has("rope.dimension_count") ? u("rope.dimension_count") : hd_global;
        rot_window = has("rope.dimension_count_swa") ? u("rope.dimension_count_swa") : hd_window;
        eps = f("attention.layer_norm_rms_epsilon", 1e-6);
        theta_global = f("rope.freq_base", 1e6), theta_window = f("rope.freq_base_swa", 1e4);
        window = has("attention.sliding_window") ? u("attention.sliding_window") : 0;
        shared = has("attention.shared_kv_layers") ? u("attention.shared_kv_layers") : 0;
        n_pl = has("embedding_length_per_layer_input") ? u("embedding_length_per_layer_input") : 0;
        softcap = f("final_logit_softcapping", 0.0);
        n_expert = has("expert_count") ? u("expert_count") : 0, n_used = has("expert_used_count") ? u("expert_used_count") : 0;
        const gguf::KV *pat = g_.find(a_ + "attention.sliding_window_pattern");
        for (uint32_t l = 0; l < L; ++l) {
            bool w = false;
            if (pat && pat->value.type == gguf::ValueType::ARRAY) w = pat->value.array_int(l) != 0;
            else if (pat) w = u("attention.sliding_window_pattern") > 0 && l % u("attention.sliding_window_pattern") <
                                                                                u("attention.sliding_window_pattern") - 1;
            windowed.push_back(w);
            const gguf::KV *kv = g_.find(a_ + "attention.head_count_kv");
            n_kv.push_back(kv && kv->value.type == gguf::ValueType::ARRAY ? static_cast<uint32_t>(kv->value.array_int(l))
                                                                           : (kv ? u("attention.head_count_kv") : n_head));
        }
    }

    std::vector<Vec> run(const std::vector<int32_t> &tokens, ReferenceStats &stats) {
        const size_t n = tokens.size();
        const Mat &emb = mat("token_embd.weight");
        std::vector<Vec> x(n, Vec(d)), ple(n);
        for (size_t t = 0; t < n; ++t)
            for (uint32_t i = 0; i < d; ++i) x[t][i] = emb.w[static_cast<size_t>(tokens[t]) * d + i] * std::sqrt(double(d));
        if (n_pl) {
            const Mat &pe = mat("per_layer_token_embd.weight");
            const size_t w = size_t{n_pl} * L;
            for (size_t t = 0; t < n; ++t) {
                Vec proj = matvec("per_layer_model_proj.weight", x[t]);
                ple[t].resize(w);
                for (uint32_t l = 0; l < L; ++l) {
                    Vec part(proj.begin() + l * n_pl, proj.begin() + (l + 1) * n_pl);
                    for (double &v : part) v /= std::sqrt(double(d));
                    part = rmsnorm(part, vec("per_layer_proj_norm.weight"));
                    for (uint32_t i = 0; i < n_pl; ++i)
                        ple[t][l * n_pl + i] =
                            (pe.w[static_cast<size_t>(tokens[t]) * w + l * n_pl + i] * std::sqrt(double(n_pl)) + part[i]) /
                            std::sqrt(2.0);
                }
            }
        }
        std::vector<std::vector<Vec>> K(L), V(L);   // per layer, per position (after rope; f16-rounded)
        for (uint32_t l = 0; l < L; ++l) {
            const std::string p = "blk." + std::to_string(l) + ".";
            const bool win = windowed[l];
            const uint32_t hd = win ? hd_window : hd_global, nkv = n_kv[l];
            const int32_t src = l + shared >= L ? static_cast<int32_t>(L - shared) - (win ? 2 : 1) : -1;
            for (size_t t = 0; t < n; ++t) {
                const Vec xn = rmsnorm(x[t], vec(p + "attn_norm.weight"));
                Vec q = matvec(p + "attn_q.weight", xn);
                norm_heads(q, vec(p + "attn_q_norm.weight"), hd);
                rope(q, hd, static_cast<int>(t), win);
                if (src < 0) {
                    Vec k = matvec(p + "attn_k.weight", xn);
                    Vec v = find(p + "attn_v.weight") ? matvec(p + "attn_v.weight", xn) : k;
                    norm_heads(k, vec(p + "attn_k_norm.weight"), hd);
                    norm_heads(v, nullptr, hd);
                    rope(k, hd, static_cast<int>(t), win);
                    for (double &e : k) e = fp16_to_fp32(fp32_to_fp16(static_cast<float>(e)));
                    for (double &e : v) e = fp16_to_fp32(fp32_to_fp16(static_cast<float>(e)));
                    K[l].push_back(k), V[l].push_back(v);
                }
                const auto &Ks = K[static_cast<size_t>(src < 0 ? l : src)], &Vs = V[static_cast<size_t>(src < 0 ? l : src)];
                Vec att(size_t{n_head} * hd, 0.0);
                const size_t first = win && t + 1 > window ? t + 1 - window : 0;
                for (uint32_t h = 0; h < n_head; ++h) {
                    const uint32_t kh = h / (n_head / nkv);
                    Vec s(t + 1 - first);
                    double mx = -1e300;
                    for (size_t j = first; j <= t; ++j) {
                        double dot = 0;
                        for (uint32_t i = 0; i < hd; ++i) dot += q[h * hd + i] * Ks[j][kh * hd + i];
                        s[j - first] = dot;
                        mx = std::max(mx, dot);
                    }
                    double sum = 0;
                    for (double &e : s) sum += e = std::exp(e - mx);
                    for (size_t j = first; j <= t; ++j)
                        for (uint32_t i = 0; i < hd; ++i) att[h * hd + i] += s[j - first] / sum * Vs[j][kh * hd + i];
                }
                add_normed(x[t], matvec(p + "attn_output.weight", att), p + "post_attention_norm.weight");
                Vec f = geglu_ffn(p, rmsnorm(x[t], vec(p + "ffn_norm.weight")), "ffn_gate.weight", "ffn_up.weight",
                                  "ffn_down.weight");
                if (find(p + "ffn_gate_inp.weight")) {
                    f = rmsnorm(f, vec(p + "post_ffw_norm_1.weight"));
                    Vec e = experts(p, x[t], stats);
                    e = rmsnorm(e, vec(p + "post_ffw_norm_2.weight"));
                    for (uint32_t i = 0; i < d; ++i) f[i] += e[i];
                }
                add_normed(x[t], f, p + "post_ffw_norm.weight");
                if (n_pl) {
                    Vec gte = matvec(p + "inp_gate.weight", x[t]);
                    for (uint32_t i = 0; i < n_pl; ++i) gte[i] = gelu(gte[i]) * ple[t][l * n_pl + i];
                    add_normed(x[t], matvec(p + "proj.weight", gte), p + "post_norm.weight");
                }
                if (const float *s = vec(p + "layer_output_scale.weight"))
                    for (double &v : x[t]) v *= s[0];
            }
        }
        const std::string out = find("output.weight") ? "output.weight" : "token_embd.weight";
        std::vector<Vec> logits(n);
        for (size_t t = 0; t < n; ++t) {
            logits[t] = matvec(out, rmsnorm(x[t], vec("output_norm.weight")));
            if (softcap > 0)
                for (double &v : logits[t]) v = softcap * std::tanh(v / softcap);
        }
        return logits;
    }

private:
    struct Mat {
        int64_t n_in = 0, n_out = 0;
        std::vector<double> w;   // all matrices of the tensor, rows of n_in
    };
    bool has(const char *k) const { return g_.find(a_ + k) != nullptr; }
    uint32_t u(const char *k) const { return static_cast<uint32_t>(*g_.get_int(a_ + k)); }
    double f(const char *k, double fallback) const { return g_.get_float(a_ + k).value_or(fallback); }
    const gguf::TensorInfo *find(const std::string &name) const { return g_.find_tensor(name); }
    const float *vec(const std::string &name) const {
        const gguf::TensorInfo *t = find(name);
        return t ? reinterpret_cast<const float *>(t->data) : nullptr;
    }
    const Mat &mat(const std::string &name) {
        auto it = cache_.find(name);
        if (it != cache_.end()) return it->second;
        const gguf::TensorInfo *t = find(name);
        if (!t) fail(EMBER_ERR_INVALID_MODEL, "reference: tensor '%s' is missing", name.c_str());
        Mat m;
        m.n_in = t->ne[0], m.n_out = t->n_dims > 1 ? t->ne[1] : 1;
        m.w = reference_weights(*t);
        return cache_.emplace(name, std::move(m)).first->second;
    }
    // Matrix `which` of a weight (experts: one of its stack) times x.
    Vec matvec(const std::string &name, const Vec &x, int64_t which = 0) {
        const Mat &m = mat(name);
        Vec y(static_cast<size_t>(m.n_out));
        const double *base = m.w.data() + which * m.n_out * m.n_in;
        for (int64_t o = 0; o < m.n_out; ++o) {
            double s = 0;
            for (int64_t i = 0; i < m.n_in; ++i) s += base[o * m.n_in + i] * x[static_cast<size_t>(i)];
            y[static_cast<size_t>(o)] = s;
        }
        return y;
    }
    Vec rmsnorm(const Vec &x, const float *w) const {
        double ss = 0;
        for (double v : x) ss += v * v;
        const double sc = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
        Vec y(x.size());
        for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * sc * (w ? w[i] : 1.0);
        return y;
    }
    void norm_heads(Vec &x, const float *w, uint32_t hd) const {
        for (size_t h = 0; h < x.size() / hd; ++h) {
            const Vec y = rmsnorm(Vec(x.begin() + h * hd, x.begin() + (h + 1) * hd), w);
            std::copy(y.begin(), y.end(), x.begin() + static_cast<std::ptrdiff_t>(h * hd));
        }
    }
    // NEOX rope: pair (i, i + n_rot/2) of each head turns by pos * base^(-2i/n_rot) (global layers: /
    // rope_freqs[i]).
    void rope(Vec &x, uint32_t hd, int pos, bool win) const {
        const uint32_t n_rot = win ? rot_window : rot_global;
        const double base = win ? theta_window : theta_global;
        const float *div = win ? nullptr : vec("rope_freqs.weight");
        const uint32_t half = n_rot / 2;
        for (size_t h = 0; h < x.size() / hd; ++h) {
            double *v = x.data() + h * hd;
            for (uint32_t i = 0; i < half; ++i) {
                const double a = pos * std::pow(base, -2.0 * i / n_rot) / (div ? div[i] : 1.0);
                const double x0 = v[i], x1 = v[i + half];
                v[i] = x0 * std::cos(a) - x1 * std::sin(a);
                v[i + half] = x0 * std::sin(a) + x1 * std::cos(a);
            }
        }
    }
    static double gelu(double v) {
        return 0.5 * v * (1 + std::tanh(std::sqrt(2 / 3.14159265358979323846) * (v + 0.044715 * v * v * v)));
    }
    Vec geglu_ffn(const std::string &p, const Vec &xn, const char *gate, const char *up, const char *down, int64_t e = 0) {
        Vec g = matvec(p + gate, xn, e);
        const Vec u = matvec(p + up, xn, e);
        for (size_t i = 0; i < g.size(); ++i) g[i] = gelu(g[i]) * u[i];
        return matvec(p + down, g, e);
    }
    // The routed experts: the router reads x RMS-normed, times ffn_gate_inp.scale / sqrt(d); the n_used
    // largest logits, weighted by their softmax among themselves, over the experts' GeGLU of
    // pre_ffw_norm_2(x).
    Vec experts(const std::string &p, const Vec &x, ReferenceStats &stats) {
        Vec r = rmsnorm(x, vec(p + "ffn_gate_inp.scale"));
        for (double &v : r) v /= std::sqrt(double(d));
        const Vec l = matvec(p + "ffn_gate_inp.weight", r);
        std::vector<int> idx(n_expert);
        std::iota(idx.begin(), idx.end(), 0);
        std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return l[a] > l[b]; });
        if (n_used < n_expert) stats.min_route_margin = std::min(stats.min_route_margin, l[idx[n_used - 1]] - l[idx[n_used]]);
        double sum = 0;
        for (uint32_t j = 0; j < n_used; ++j) sum += std::exp(l[idx[j]] - l[idx[0]]);
        const Vec xn = rmsnorm(x, vec(p + "pre_ffw_norm_2.weight"));
        Vec out(d, 0.0);
        for (uint32_t j = 0; j < n_used; ++j) {
            const Vec o = geglu_ffn(p, xn, "ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight", idx[j]);
            const double gw = std::exp(l[idx[j]] - l[idx[0]]) / sum;
            for (uint32_t i = 0; i < d; ++i) out[i] += gw * o[i];
        }
        return out;
    }
    void add_normed(Vec &x, const Vec &o, const std::string &norm) const {
        const Vec y = rmsnorm(o, vec(norm));
        for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
    }

    const gguf::File &g_;
    const std::string a_ = "gemma4.";
    std::map<std::string, Mat> cache_;
    uint32_t d = 0, L = 0, n_head = 0, hd_global = 0, hd_window = 0, rot_global = 0, rot_window = 0, window = 0;
    uint32_t shared = 0, n_pl = 0, n_expert = 0, n_used = 0;
    double eps = 1e-6, theta_global = 1e6, theta_window = 1e4, softcap = 0;
    std::vector<bool> windowed;
    std::vector<uint32_t> n_kv;
};

} // namespace

std::vector<std::vector<double>> reference_gemma4_logits(const gguf::File &file, const std::vector<int32_t> &tokens,
                                                         ReferenceStats *stats) {
    Gemma4Ref ref(file);
    ReferenceStats s;
    auto out = ref.run(tokens, s);
    if (stats) *stats = s;
    return out;
}

} // namespace ember
