#include "testing/reference_bert.hpp"

#include "core/error.hpp"
#include "core/fp16.hpp"
#include "cpu/kernels.hpp"

#include <cmath>
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

} // namespace

Mat reference_bert_hidden(const gguf::File &file, const std::vector<int32_t> &tokens) {
    const Reader r{file};
    const int64_t n_layer = r.u("bert.block_count"), n_head = r.u("bert.attention.head_count");
    const double eps = file.get_float("bert.attention.layer_norm_epsilon").value_or(1e-12);
    const Mat tok = r.rows("token_embd.weight"), pos = r.rows("position_embd.weight");
    const std::vector<double> type0 = r.has("token_types.weight") ? r.rows("token_types.weight")[0]
                                                                  : std::vector<double>(tok[0].size(), 0.0);
    const size_t n = tokens.size(), d = tok[0].size(), hd = d / static_cast<size_t>(n_head);
    Mat x(n, std::vector<double>(d));
    for (size_t t = 0; t < n; ++t)
        for (size_t i = 0; i < d; ++i) x[t][i] = tok[static_cast<size_t>(tokens[t])][i] + type0[i] + pos[t][i];
    layer_norm(r, "token_embd_norm", x, eps);
    for (int64_t il = 0; il < n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        const Mat q = linear(r, p + "attn_q", x);
        Mat k = linear(r, p + "attn_k", x), v = linear(r, p + "attn_v", x);
        for (Mat *m : {&k, &v})
            for (std::vector<double> &row : *m)
                for (double &e : row) e = f16_round(e);
        Mat a(n, std::vector<double>(d, 0.0));
        for (size_t h = 0; h < static_cast<size_t>(n_head); ++h)
            for (size_t t = 0; t < n; ++t) {
                std::vector<double> s(n);
                double m = -1e300;
                for (size_t j = 0; j < n; ++j) {
                    double dot = 0;
                    for (size_t i = 0; i < hd; ++i) dot += q[t][h * hd + i] * k[j][h * hd + i];
                    s[j] = dot / std::sqrt(static_cast<double>(hd));
                    m = std::max(m, s[j]);
                }
                double z = 0;
                for (double &e : s) z += (e = std::exp(e - m));
                for (size_t j = 0; j < n; ++j)
                    for (size_t i = 0; i < hd; ++i) a[t][h * hd + i] += s[j] / z * v[j][h * hd + i];
            }
        Mat y = linear(r, p + "attn_output", a);
        for (size_t t = 0; t < n; ++t)
            for (size_t i = 0; i < d; ++i) y[t][i] += x[t][i];
        layer_norm(r, p + "attn_output_norm", y, eps);
        Mat u = linear(r, p + "ffn_up", y);
        for (std::vector<double> &row : u)
            for (double &e : row) e = gelu(e);
        x = linear(r, p + "ffn_down", u);
        for (size_t t = 0; t < n; ++t)
            for (size_t i = 0; i < d; ++i) x[t][i] += y[t][i];
        layer_norm(r, p + "layer_output_norm", x, eps);
    }
    return x;
}

std::vector<double> reference_bert_embedding(const gguf::File &file, const std::vector<int32_t> &tokens, bool normalize) {
    const Mat h = reference_bert_hidden(file, tokens);
    const int64_t pooling = file.get_int("bert.pooling_type").value_or(1);
    const Reader r{file};
    if (pooling == 4) {
        Mat c = linear(r, "cls", Mat{h[0]});
        for (double &e : c[0]) e = std::tanh(e);
        return linear(r, "cls.output", c)[0];
    }
    std::vector<double> v(h[0].size(), 0.0);
    if (pooling == 2) {
        v = h[0];
    } else {
        for (const std::vector<double> &row : h)
            for (size_t i = 0; i < v.size(); ++i) v[i] += row[i] / static_cast<double>(h.size());
    }
    if (normalize) {
        double ss = 0;
        for (double e : v) ss += e * e;
        for (double &e : v) e /= std::sqrt(ss);
    }
    return v;
}

} // namespace ember
