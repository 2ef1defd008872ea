#include "testing/reference_bert.hpp"

#include "core/error.hpp"
#include "core/fp16.hpp"
#include "cpu/kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

namespace ember {

namespace {

using Mat = std::vector<std::vector<double>>;   // rows

struct Reader {
    const gguf::File &f;
    const gguf::TensorInfo &info(const std::string &name) const {
        for (const gguf::TensorInfo &t : f.tensors())
            if (t.name == name) return t;
        fail(EMBER_ERR_INVALID_MODEL, "reference: tensor '%s' is missing", name.c_str());
    }
    bool has(const std::string &name) const {
        for (const gguf::TensorInfo &t : f.tensors())
            if (t.name == name) return true;
        return false;
    }
    // Rows of ne[0] values.
    Mat rows(const std::string &name) const {
        const gguf::TensorInfo &t = info(name);
        const int64_t n = t.ne[0], r = static_cast<int64_t>(t.n_elements) / n;
        const size_t rb = dtype_row_bytes(t.type, static_cast<uint64_t>(n));
        Mat m(static_cast<size_t>(r), std::vector<double>(static_cast<size_t>(n)));
        std::vector<float> tmp(static_cast<size_t>(n));
        for (int64_t i = 0; i < r; ++i) {
            cpu::dequantize_row(t.type, t.data + static_cast<size_t>(i) * rb, tmp.data(), n);
            for (int64_t j = 0; j < n; ++j) m[static_cast<size_t>(i)][static_cast<size_t>(j)] = tmp[static_cast<size_t>(j)];
        }
        return m;
    }
    std::vector<double> vec(const std::string &name) const { return rows(name)[0]; }
    int64_t u(const std::string &key) const { return f.get_int(key).value(); }
};

// y = W x + b for each row of x (W: rows of n_in).
Mat linear(const Reader &r, const std::string &name, const Mat &x) {
    const Mat w = r.rows(name + ".weight");
    const bool bias = r.has(name + ".bias");
    const std::vector<double> b = bias ? r.vec(name + ".bias") : std::vector<double>(w.size(), 0.0);
    Mat y(x.size(), std::vector<double>(w.size()));
    for (size_t t = 0; t < x.size(); ++t)
        for (size_t o = 0; o < w.size(); ++o) {
            double s = b[o];
            for (size_t i = 0; i < x[t].size(); ++i) s += w[o][i] * x[t][i];
            y[t][o] = s;
        }
    return y;
}

void layer_norm(const Reader &r, const std::string &name, Mat &x, double eps) {
    const std::vector<double> w = r.vec(name + ".weight"), b = r.vec(name + ".bias");
    for (std::vector<double> &row : x) {
        double mean = 0, var = 0;
        for (double v : row) mean += v;
        mean /= static_cast<double>(row.size());
        for (double v : row) var += (v - mean) * (v - mean);
        var /= static_cast<double>(row.size());
        const double inv = 1.0 / std::sqrt(var + eps);
        for (size_t i = 0; i < row.size(); ++i) row[i] = (row[i] - mean) * inv * w[i] + b[i];
    }
}

double gelu(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }

double f16_round(double v) { return fp16_to_fp32(fp32_to_fp16(static_cast<float>(v))); }

void round_f16(Mat &m) {
    for (std::vector<double> &row : m)
        for (double &e : row) e = f16_round(e);
}

// Attention both ways over one text: per query head h (key head h / (n_head / n_head_kv)), softmax(scale
// q.k) v over the keys j with |t - j| <= half (half < 0: every key).
Mat attend(const Mat &q, const Mat &k, const Mat &v, size_t n_head, size_t n_head_kv, size_t hd, double scale,
           long half = -1) {
    const size_t n = q.size(), group = n_head / n_head_kv;
    Mat a(n, std::vector<double>(n_head * hd, 0.0));
    for (size_t h = 0; h < n_head; ++h) {
        const size_t kh = h / group;
        for (size_t t = 0; t < n; ++t) {
            std::vector<double> s(n, 0.0);
            std::vector<bool> seen(n, true);
            double m = -1e300;
            for (size_t j = 0; j < n; ++j) {
                if (half >= 0 && std::labs(static_cast<long>(t) - static_cast<long>(j)) > half) {
                    seen[j] = false;
                    continue;
                }
                double dot = 0;
                for (size_t i = 0; i < hd; ++i) dot += q[t][h * hd + i] * k[j][kh * hd + i];
                s[j] = dot * scale;
                m = std::max(m, s[j]);
            }
            double z = 0;
            for (size_t j = 0; j < n; ++j) z += seen[j] ? (s[j] = std::exp(s[j] - m)) : (s[j] = 0.0);
            for (size_t j = 0; j < n; ++j)
                for (size_t i = 0; i < hd; ++i) a[t][h * hd + i] += s[j] / z * v[j][kh * hd + i];
        }
    }
    return a;
}

// Rotary embedding of the NEOX kind (pairs i and i + n_rot / 2 of each head) at positions 0.., angle
// pos * freq_scale * base^(-2i / n_rot).
void rope_neox(Mat &x, size_t n_head, size_t hd, size_t n_rot, double base, double freq_scale = 1.0) {
    for (size_t t = 0; t < x.size(); ++t)
        for (size_t h = 0; h < n_head; ++h)
            for (size_t i = 0; i < n_rot / 2; ++i) {
                const double a = static_cast<double>(t) * freq_scale * std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(n_rot));
                double &x0 = x[t][h * hd + i], &x1 = x[t][h * hd + i + n_rot / 2];
                const double r0 = x0 * std::cos(a) - x1 * std::sin(a), r1 = x0 * std::sin(a) + x1 * std::cos(a);
                x0 = r0, x1 = r1;
            }
}

// RMSNorm of each group of `group` values of each row, times the weight (one per group position).
void rms_norm(const std::vector<double> &w, Mat &x, double eps, size_t group) {
    for (std::vector<double> &row : x)
        for (size_t g0 = 0; g0 < row.size(); g0 += group) {
            double ss = 0;
            for (size_t i = 0; i < group; ++i) ss += row[g0 + i] * row[g0 + i];
            const double inv = 1.0 / std::sqrt(ss / static_cast<double>(group) + eps);
            for (size_t i = 0; i < group; ++i) row[g0 + i] *= inv * w[i];
        }
}

double silu(double x) { return x / (1.0 + std::exp(-x)); }

// Rows [r0, r0 + n) of a fused projection's output.
Mat columns(const Mat &x, size_t r0, size_t n) {
    Mat y(x.size());
    for (size_t t = 0; t < x.size(); ++t) y[t].assign(x[t].begin() + static_cast<std::ptrdiff_t>(r0), x[t].begin() + static_cast<std::ptrdiff_t>(r0 + n));
    return y;
}

std::string arch_of(const gguf::File &file) { return std::string(file.get_string("general.architecture").value_or("bert")); }

// gemma-embedding: Gemma 3's layers run both ways (see reference_bert.hpp).
Mat gemma_embedding_hidden(const gguf::File &file, const std::vector<int32_t> &tokens) {
    const Reader r{file};
    const std::string a = "gemma-embedding.";
    const size_t n_layer = static_cast<size_t>(r.u(a + "block_count")), n_head = static_cast<size_t>(r.u(a + "attention.head_count"));
    const size_t n_head_kv = static_cast<size_t>(file.get_int(a + "attention.head_count_kv").value_or(static_cast<int64_t>(n_head)));
    const Mat tok = r.rows("token_embd.weight");
    const size_t d = tok[0].size(), n = tokens.size();
    const size_t hd = static_cast<size_t>(file.get_int(a + "attention.key_length").value_or(static_cast<int64_t>(d / n_head)));
    const size_t n_rot = static_cast<size_t>(file.get_int(a + "rope.dimension_count").value_or(static_cast<int64_t>(hd)));
    const double eps = file.get_float(a + "attention.layer_norm_rms_epsilon").value_or(1e-6);
    const double base = file.get_float(a + "rope.freq_base").value_or(10000.0);
    const double base_swa = file.get_float(a + "rope.freq_base_swa").value_or(10000.0);
    double freq_scale = 1.0;
    if (file.get_string(a + "rope.scaling.type") == std::optional<std::string_view>("linear"))
        freq_scale = 1.0 / file.get_float(a + "rope.scaling.factor").value_or(1.0);
    const long window = static_cast<long>(r.u(a + "attention.sliding_window"));
    // Window layers: a period p (il % p < p - 1; 6 when absent) or one flag per layer.
    std::vector<bool> windowed(n_layer);
    const gguf::KV *pat = file.find(a + "attention.sliding_window_pattern");
    for (size_t il = 0; il < n_layer; ++il) {
        if (pat && pat->value.type == gguf::ValueType::ARRAY) windowed[il] = pat->value.array_int(il) != 0;
        else {
            const size_t p = pat ? static_cast<size_t>(r.u(a + "attention.sliding_window_pattern")) : 6;
            windowed[il] = il % p < p - 1;
        }
    }
    Mat x(n);
    for (size_t t = 0; t < n; ++t) {
        x[t] = tok[static_cast<size_t>(tokens[t])];
        for (double &e : x[t]) e *= std::sqrt(static_cast<double>(d));
    }
    for (size_t il = 0; il < n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        Mat xn = x;
        rms_norm(r.vec(p + "attn_norm.weight"), xn, eps, d);
        Mat q = linear(r, p + "attn_q", xn), k = linear(r, p + "attn_k", xn), v = linear(r, p + "attn_v", xn);
        rms_norm(r.vec(p + "attn_q_norm.weight"), q, eps, hd);
        rms_norm(r.vec(p + "attn_k_norm.weight"), k, eps, hd);
        rope_neox(q, n_head, hd, n_rot, windowed[il] ? base_swa : base, windowed[il] ? 1.0 : freq_scale);
        rope_neox(k, n_head_kv, hd, n_rot, windowed[il] ? base_swa : base, windowed[il] ? 1.0 : freq_scale);
        round_f16(k), round_f16(v);
        // The window of a layer attending both ways is symmetric: window / 2 positions either side.
        const Mat att = attend(q, k, v, n_head, n_head_kv, hd, 1.0 / std::sqrt(static_cast<double>(hd)), windowed[il] ? window / 2 : -1);
        Mat o = linear(r, p + "attn_output", att);
        rms_norm(r.vec(p + "post_attention_norm.weight"), o, eps, d);
        for (size_t t = 0; t < n; ++t)
            for (size_t i = 0; i < d; ++i) x[t][i] += o[t][i];
        xn = x;
        rms_norm(r.vec(p + "ffn_norm.weight"), xn, eps, d);
        Mat g = linear(r, p + "ffn_gate", xn);
        const Mat u = linear(r, p + "ffn_up", xn);
        for (size_t t = 0; t < n; ++t)
            for (size_t i = 0; i < g[t].size(); ++i) g[t][i] = gelu(g[t][i]) * u[t][i];
        o = linear(r, p + "ffn_down", g);
        rms_norm(r.vec(p + "post_ffw_norm.weight"), o, eps, d);
        for (size_t t = 0; t < n; ++t)
            for (size_t i = 0; i < d; ++i) x[t][i] += o[t][i];
    }
    rms_norm(r.vec("output_norm.weight"), x, eps, d);
    return x;
}

} // namespace

Mat reference_bert_hidden(const gguf::File &file, const std::vector<int32_t> &tokens) {
    const std::string arch = arch_of(file);
    if (arch == "gemma-embedding") return gemma_embedding_hidden(file, tokens);
    const bool nomic = arch == "nomic-bert";
    const std::string ak = arch + ".";
    const Reader r{file};
    const int64_t n_layer = r.u(ak + "block_count"), n_head = r.u(ak + "attention.head_count");
    const double eps = file.get_float(ak + "attention.layer_norm_epsilon").value_or(1e-12);
    const Mat tok = r.rows("token_embd.weight");
    const std::vector<double> type0 = r.has("token_types.weight") ? r.rows("token_types.weight")[0]
                                                                  : std::vector<double>(tok[0].size(), 0.0);
    const size_t n = tokens.size(), d = tok[0].size(), hd = d / static_cast<size_t>(n_head);
    Mat x(n, std::vector<double>(d));
    // BERT: learned absolute positions; nomic-bert: none (rotary positions in each layer).
    const Mat pos = nomic ? Mat(n, std::vector<double>(d, 0.0)) : r.rows("position_embd.weight");
    for (size_t t = 0; t < n; ++t)
        for (size_t i = 0; i < d; ++i) x[t][i] = tok[static_cast<size_t>(tokens[t])][i] + type0[i] + pos[t][i];
    layer_norm(r, "token_embd_norm", x, eps);
    const double base = nomic ? file.get_float(ak + "rope.freq_base").value() : 0.0;
    const size_t n_rot = static_cast<size_t>(file.get_int(ak + "rope.dimension_count").value_or(static_cast<int64_t>(hd)));
    for (int64_t il = 0; il < n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        Mat q, k, v;
        if (nomic) {
            const Mat qkv = linear(r, p + "attn_qkv", x);
            q = columns(qkv, 0, d), k = columns(qkv, d, d), v = columns(qkv, 2 * d, d);
            rope_neox(q, static_cast<size_t>(n_head), hd, n_rot, base);
            rope_neox(k, static_cast<size_t>(n_head), hd, n_rot, base);
        } else {
            q = linear(r, p + "attn_q", x), k = linear(r, p + "attn_k", x), v = linear(r, p + "attn_v", x);
        }
        round_f16(k), round_f16(v);
        const Mat a = attend(q, k, v, static_cast<size_t>(n_head), static_cast<size_t>(n_head), hd, 1.0 / std::sqrt(static_cast<double>(hd)));
        Mat y = linear(r, p + "attn_output", a);
        for (size_t t = 0; t < n; ++t)
            for (size_t i = 0; i < d; ++i) y[t][i] += x[t][i];
        layer_norm(r, p + "attn_output_norm", y, eps);
        Mat u = linear(r, p + "ffn_up", y);
        if (nomic) {
            const Mat g = linear(r, p + "ffn_gate", y);
            for (size_t t = 0; t < n; ++t)
                for (size_t i = 0; i < u[t].size(); ++i) u[t][i] *= silu(g[t][i]);
        } else {
            for (std::vector<double> &row : u)
                for (double &e : row) e = gelu(e);
        }
        x = linear(r, p + "ffn_down", u);
        for (size_t t = 0; t < n; ++t)
            for (size_t i = 0; i < d; ++i) x[t][i] += y[t][i];
        layer_norm(r, p + "layer_output_norm", x, eps);
    }
    return x;
}

std::vector<double> reference_bert_embedding(const gguf::File &file, const std::vector<int32_t> &tokens, bool normalize) {
    const Mat h = reference_bert_hidden(file, tokens);
    const std::string arch = arch_of(file);
    const int64_t pooling = file.get_int(arch + ".pooling_type").value_or(1);
    const Reader r{file};
    if (pooling == 4) {
        Mat c = linear(r, "cls", Mat{h[0]});
        for (double &e : c[0]) e = std::tanh(e);
        return linear(r, "cls.output", c)[0];
    }
    std::vector<double> v(h[0].size(), 0.0);
    if (pooling == 2) {
        v = h[0];
    } else if (pooling == 3) {
        v = h.back();
    } else {
        for (const std::vector<double> &row : h)
            for (size_t i = 0; i < v.size(); ++i) v[i] += row[i] / static_cast<double>(h.size());
    }
    // sentence-transformers' dense projections after the pooling (EmbeddingGemma's files may carry them).
    if (r.has("dense_2.weight")) v = linear(r, "dense_2", Mat{v})[0];
    if (r.has("dense_3.weight")) v = linear(r, "dense_3", Mat{v})[0];
    if (normalize) {
        double ss = 0;
        for (double e : v) ss += e * e;
        for (double &e : v) e /= std::sqrt(ss);
    }
    return v;
}

} // namespace ember
