// arch_builder.cpp — metadata and tensor look-ups with their checks, and the program's nodes.
#include "model/arch.hpp"

#include "core/error.hpp"
#include "core/fp16.hpp"

#include <cmath>
#include <cstring>

namespace ember {

ArchBuilder::ArchBuilder(const gguf::File &file, std::string arch, const std::deque<TensorRef> &tensors, ModelDesc &out)
    : file_(file), prefix_(arch + "."), out_(out) {
    for (const TensorRef &t : tensors) by_name_[t.name] = &t;
    out_.arch = std::move(arch);
}

uint32_t ArchBuilder::u32(const std::string &key, std::optional<uint32_t> fallback) const {
    const std::string k = prefix_ + key;
    auto v = file_.get_int(k);
    if (!v) {
        if (fallback) return *fallback;
        fail(EMBER_ERR_INVALID_MODEL, "required metadata key '%s' is missing", k.c_str());
    }
    if (*v < 0 || *v > 0x7fffffff)
        fail(EMBER_ERR_INVALID_MODEL, "metadata '%s' = %lld is out of range", k.c_str(), (long long)*v);
    return static_cast<uint32_t>(*v);
}

float ArchBuilder::f32(const std::string &key, float fallback) const {
    const std::string k = prefix_ + key;
    auto v = file_.get_float(k);
    if (!v) return fallback;
    if (!std::isfinite(*v)) fail(EMBER_ERR_INVALID_MODEL, "metadata '%s' is not finite", k.c_str());
    return static_cast<float>(*v);
}

std::optional<std::string_view> ArchBuilder::str(const std::string &key) const { return file_.get_string(prefix_ + key); }

std::vector<uint32_t> ArchBuilder::u32_per_layer(const std::string &key, uint32_t n_layer,
                                                 std::optional<uint32_t> fallback) const {
    const std::string k = prefix_ + key;
    const gguf::KV *kv = file_.find(k);
    if (!kv || kv->value.type != gguf::ValueType::ARRAY) return std::vector<uint32_t>(n_layer, u32(key, fallback));
    const gguf::Value &a = kv->value;
    const bool numeric = a.elem_type != gguf::ValueType::STRING && a.elem_type != gguf::ValueType::ARRAY &&
                         a.elem_type != gguf::ValueType::F32 && a.elem_type != gguf::ValueType::F64;
    if (!numeric || a.count != n_layer)
        fail(EMBER_ERR_INVALID_MODEL, "metadata '%s' must be a number or an array of %u integers (it has %llu entries)",
             k.c_str(), n_layer, (unsigned long long)a.count);
    std::vector<uint32_t> out(n_layer);
    for (uint32_t i = 0; i < n_layer; ++i) {
        const int64_t v = a.array_int(i);
        if (v < 0 || v > 0x7fffffff)
            fail(EMBER_ERR_INVALID_MODEL, "metadata '%s'[%u] = %lld is out of range", k.c_str(), i, (long long)v);
        out[i] = static_cast<uint32_t>(v);
    }
    return out;
}

const TensorRef *ArchBuilder::find(const std::string &name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second;
}

namespace {
// The weight types the kernels take (core/dtype.cpp marks them).
bool is_matmul_type(DType t) { return dtype_info(t).supported; }

// "F32, F16, ..." from the same table, for messages.
std::string supported_types() {
    std::string out;
    for (uint32_t id = 0; id < 64; ++id)
        if (dtype_info(id).name && dtype_info(id).supported) out += (out.empty() ? "" : ", ") + std::string(dtype_info(id).name);
    return out;
}

[[noreturn]] void unsupported_type(const std::string &name, DType type) {
    fail(EMBER_ERR_UNSUPPORTED, "tensor '%s' has type %s, which this build does not support (supported: %s)", name.c_str(),
         dtype_name(type), supported_types().c_str());
}
} // namespace

int32_t ArchBuilder::matrix(const std::string &name, int64_t n_in, int64_t n_out, bool required) {
    const TensorRef *t = checked_matrix(name, n_in, n_out, required);
    if (!t) return -1;
    auto [it, added] = index_.emplace(t, static_cast<int32_t>(out_.tensors.size()));
    if (added) out_.tensors.push_back(t);
    return it->second;
}

const TensorRef *ArchBuilder::checked_matrix(const std::string &name, int64_t n_in, int64_t n_out, bool required) const {
    const TensorRef *t = find(name);
    if (!t) {
        if (required) fail(EMBER_ERR_INVALID_MODEL, "tensor '%s' is missing", name.c_str());
        return nullptr;
    }
    if (t->n_dims != 2 || t->ne[0] != n_in || t->ne[1] != n_out)
        fail(EMBER_ERR_INVALID_MODEL, "tensor '%s' has shape [%lld, %lld], expected [%lld, %lld]", name.c_str(),
             (long long)t->ne[0], (long long)t->ne[1], (long long)n_in, (long long)n_out);
    if (!is_matmul_type(t->type)) unsupported_type(name, t->type);
    return t;
}

int32_t ArchBuilder::vector(const std::string &name, int64_t n, bool required) {
    const TensorRef *t = find(name);
    if (!t) {
        if (required) fail(EMBER_ERR_INVALID_MODEL, "tensor '%s' is missing", name.c_str());
        return -1;
    }
    if (t->n_dims != 1 || t->ne[0] != n)
        fail(EMBER_ERR_INVALID_MODEL, "tensor '%s' has shape [%lld, %lld], expected [%lld]", name.c_str(),
             (long long)t->ne[0], (long long)t->ne[1], (long long)n);
    if (t->type != DType::F32)
        fail(EMBER_ERR_UNSUPPORTED, "tensor '%s' has type %s; norms and biases must be F32", name.c_str(),
             dtype_name(t->type));
    auto [it, added] = index_.emplace(t, static_cast<int32_t>(out_.tensors.size()));
    if (added) out_.tensors.push_back(t);
    return it->second;
}

int32_t ArchBuilder::matrix_rows(const std::string &name, int64_t n_in, int64_t n_total, int64_t row0, int64_t n_rows) {
    // Only the part goes into the description (a GPU backend uploads each tensor listed there).
    const TensorRef *t = checked_matrix(name, n_in, n_total, true);
    if (row0 < 0 || n_rows <= 0 || row0 + n_rows > n_total)
        fail(EMBER_ERR_INTERNAL, "rows %lld..%lld of '%s'", (long long)row0, (long long)(row0 + n_rows), name.c_str());
    const size_t row_bytes = dtype_row_bytes(t->type, static_cast<uint64_t>(n_in));
    TensorRef part = *t;
    part.name = name + "[" + std::to_string(row0) + ":" + std::to_string(row0 + n_rows) + "]";
    part.ne[1] = n_rows;
    part.data = static_cast<const uint8_t *>(t->data) + static_cast<size_t>(row0) * row_bytes;
    part.n_bytes = static_cast<size_t>(n_rows) * row_bytes;
    out_.made.push_back(std::move(part));
    out_.tensors.push_back(&out_.made.back());
    return static_cast<int32_t>(out_.tensors.size() - 1);
}

int32_t ArchBuilder::experts(const std::string &name, int64_t n_in, int64_t n_out, int64_t n_expert, bool required) {
    const TensorRef *t = find(name);
    if (!t) {
        if (required) fail(EMBER_ERR_INVALID_MODEL, "tensor '%s' is missing", name.c_str());
        return -1;
    }
    if (t->n_dims != 3 || t->ne[0] != n_in || t->ne[1] != n_out || t->ne[2] != n_expert)
        fail(EMBER_ERR_INVALID_MODEL, "tensor '%s' has shape [%lld, %lld, %lld], expected [%lld, %lld, %lld]", name.c_str(),
             (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)n_in, (long long)n_out,
             (long long)n_expert);
    if (!is_matmul_type(t->type)) unsupported_type(name, t->type);
    auto [it, added] = index_.emplace(t, static_cast<int32_t>(out_.tensors.size()));
    if (added) out_.tensors.push_back(t);
    return it->second;
}

int32_t ArchBuilder::expert_bias(const std::string &name, int64_t n, int64_t n_expert) {
    const TensorRef *t = find(name);
    if (!t) return -1;
    if (t->n_dims != 2 || t->ne[0] != n || t->ne[1] != n_expert || t->type != DType::F32)
        fail(EMBER_ERR_INVALID_MODEL, "tensor '%s' must be F32 of shape [%lld, %lld]", name.c_str(), (long long)n,
             (long long)n_expert);
    auto [it, added] = index_.emplace(t, static_cast<int32_t>(out_.tensors.size()));
    if (added) out_.tensors.push_back(t);
    return it->second;
}

int32_t ArchBuilder::row_matrix(const std::string &name, int64_t n_in) {
    const TensorRef *t = find(name);
    if (!t) fail(EMBER_ERR_INVALID_MODEL, "tensor '%s' is missing", name.c_str());
    if (t->ne[0] != n_in || t->n_dims > 2 || (t->n_dims == 2 && t->ne[1] != 1))
        fail(EMBER_ERR_INVALID_MODEL, "tensor '%s' has shape [%lld, %lld], expected [%lld]", name.c_str(),
             (long long)t->ne[0], (long long)t->ne[1], (long long)n_in);
    if (!is_matmul_type(t->type)) unsupported_type(name, t->type);
    if (t->n_dims == 2) return matrix(name, n_in, 1);
    TensorRef m = *t;
    m.n_dims = 2;
    m.ne[1] = 1;
    out_.made.push_back(std::move(m));
    out_.tensors.push_back(&out_.made.back());
    return static_cast<int32_t>(out_.tensors.size() - 1);
}

int32_t ArchBuilder::f32_matrix(const std::string &name, int64_t ne0, int64_t ne1) {
    const TensorRef *t = find(name);
    if (!t) fail(EMBER_ERR_INVALID_MODEL, "tensor '%s' is missing", name.c_str());
    if (t->n_dims != 2 || t->ne[0] != ne0 || t->ne[1] != ne1)
        fail(EMBER_ERR_INVALID_MODEL, "tensor '%s' has shape [%lld, %lld], expected [%lld, %lld]", name.c_str(),
             (long long)t->ne[0], (long long)t->ne[1], (long long)ne0, (long long)ne1);
    if (t->type != DType::F32)
        fail(EMBER_ERR_UNSUPPORTED, "tensor '%s' has type %s; it must be F32", name.c_str(), dtype_name(t->type));
    auto [it, added] = index_.emplace(t, static_cast<int32_t>(out_.tensors.size()));
    if (added) out_.tensors.push_back(t);
    return it->second;
}

int32_t ArchBuilder::f32_slice(const std::string &name, int64_t total, int64_t offset, int64_t n) {
    const TensorRef *t = find(name);
    if (!t) fail(EMBER_ERR_INVALID_MODEL, "tensor '%s' is missing", name.c_str());
    if (t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3] != total)
        fail(EMBER_ERR_INVALID_MODEL, "tensor '%s' has %lld values, expected %lld", name.c_str(),
             (long long)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]), (long long)total);
    if (t->type != DType::F32)
        fail(EMBER_ERR_UNSUPPORTED, "tensor '%s' has type %s; it must be F32", name.c_str(), dtype_name(t->type));
    if (offset < 0 || n <= 0 || offset + n > total)
        fail(EMBER_ERR_INTERNAL, "values %lld..%lld of '%s'", (long long)offset, (long long)(offset + n), name.c_str());
    if (t->n_dims == 1 && n == total) return vector(name, n);
    TensorRef part = *t;
    part.name = name + "[" + std::to_string(offset) + ":" + std::to_string(offset + n) + "]";
    part.n_dims = 1;
    part.ne[0] = n, part.ne[1] = part.ne[2] = part.ne[3] = 1;
    part.data = static_cast<const float *>(t->data) + offset;
    part.n_bytes = static_cast<size_t>(n) * sizeof(float);
    out_.made.push_back(std::move(part));
    out_.tensors.push_back(&out_.made.back());
    return static_cast<int32_t>(out_.tensors.size() - 1);
}

int32_t ArchBuilder::made_vector(const std::string &name, std::vector<float> values) {
    out_.made_data.push_back(std::move(values));
    const std::vector<float> &v = out_.made_data.back();
    TensorRef t;
    t.name = name;
    t.type = DType::F32;
    t.n_dims = 1;
    t.ne[0] = static_cast<int64_t>(v.size());
    t.data = v.data();
    t.n_bytes = v.size() * sizeof(float);
    out_.made.push_back(std::move(t));
    out_.tensors.push_back(&out_.made.back());
    return static_cast<int32_t>(out_.tensors.size() - 1);
}

int32_t ArchBuilder::buf(uint32_t width, bool logits) {
    out_.bufs.push_back({width, logits ? uint32_t{EMBER_GRAPH_ROWS_LOGITS} : uint32_t{EMBER_GRAPH_ROWS_TOKENS}});
    return static_cast<int32_t>(out_.bufs.size() - 1);
}

uint32_t ArchBuilder::width(int32_t b) const { return out_.bufs.at(static_cast<size_t>(b)).width; }

ember_graph_node &ArchBuilder::node(uint32_t op) {
    ember_graph_node n{};
    n.op = op;
    n.layer = layer_;
    n.dst = n.src = n.src2 = n.src3 = n.w = n.b = n.w2 = n.w3 = n.b2 = n.b3 = n.sel_bias = -1;
    out_.nodes.push_back(n);
    return out_.nodes.back();
}

void ArchBuilder::get_rows(int32_t dst, int32_t w) {
    auto &n = node(EMBER_GRAPH_GET_ROWS);
    n.dst = dst, n.w = w;
}

void ArchBuilder::rms_norm(int32_t dst, int32_t src, int32_t w, float eps, uint32_t group) {
    if (group == 0 || width(src) % group != 0 || width(dst) != width(src))
        fail(EMBER_ERR_INTERNAL, "rms_norm: group %u does not divide the row of %u", group, width(src));
    auto &n = node(EMBER_GRAPH_RMS_NORM);
    n.dst = dst, n.src = src, n.w = w, n.eps = eps, n.n = group;
}

void ArchBuilder::matmul(int32_t dst, int32_t src, int32_t w, int32_t bias) {
    auto &n = node(EMBER_GRAPH_MATMUL);
    n.dst = dst, n.src = src, n.w = w, n.b = bias;
}

void ArchBuilder::rope(int32_t dst, uint32_t n_head, uint32_t head_dim, const Rope &r) {
    const bool yarn = r.ext_factor != 0.0f || r.attn_factor != 1.0f;
    auto &n = node(yarn ? EMBER_GRAPH_ROPE_YARN : EMBER_GRAPH_ROPE);
    n.dst = dst, n.w = r.factors, n.n_head = n_head, n.head_dim = head_dim, n.n_rot = r.n_rot;
    n.rope_mode = r.mode, n.rope_theta = r.theta, n.rope_freq_scale = r.freq_scale;
    if (yarn) {
        n.rope_ext_factor = r.ext_factor, n.rope_attn_factor = r.attn_factor, n.rope_beta_fast = r.beta_fast;
        n.rope_beta_slow = r.beta_slow, n.rope_n_ctx_orig = r.n_ctx_orig;
    }
}

void ArchBuilder::kv_store(int32_t k, int32_t v) {
    auto &n = node(EMBER_GRAPH_KV_STORE);
    n.src = k, n.src2 = v;
}

void ArchBuilder::attention(int32_t dst, int32_t q, uint32_t n_head, uint32_t n_head_kv, uint32_t head_dim, float scale,
                            const AttnExt &ext) {
    const bool temperature = ext.temp_scale != 0;
    if (ext.window > 0 && ext.local_chunk > 0) fail(EMBER_ERR_INTERNAL, "attention: a window and a local chunk at once");
    if (temperature && ext.temp_floor == 0) fail(EMBER_ERR_INTERNAL, "attention: a temperature without its floor");
    const bool extended =
        ext.window > 0 || ext.softcap > 0 || ext.sinks >= 0 || ext.local_chunk > 0 || temperature || ext.bidirectional;
    auto &n = node(extended ? EMBER_GRAPH_ATTENTION_EXT : EMBER_GRAPH_ATTENTION);
    n.dst = dst, n.src = q, n.n_head = n_head, n.n_head_kv = n_head_kv, n.head_dim = head_dim, n.scale = scale;
    if (extended) n.window = ext.window, n.softcap = ext.softcap, n.w = ext.sinks;
    n.attn_local_chunk = ext.local_chunk;
    if (temperature) n.attn_temp_scale = ext.temp_scale, n.attn_temp_offset = ext.temp_offset, n.attn_temp_floor = ext.temp_floor;
    if (ext.bidirectional) n.attn_mask = EMBER_GRAPH_MASK_SEQUENCE;
}

void ArchBuilder::layer_norm(int32_t dst, int32_t src, int32_t w, int32_t b, float eps) {
    if (width(dst) != width(src)) fail(EMBER_ERR_INTERNAL, "layer_norm: widths %u, %u", width(dst), width(src));
    auto &n = node(EMBER_GRAPH_LAYER_NORM);
    n.dst = dst, n.src = src, n.w = w, n.b = b, n.eps = eps, n.n = width(src);
}

void ArchBuilder::gelu(int32_t dst, int32_t src) {
    auto &n = node(EMBER_GRAPH_GELU);
    n.dst = dst, n.src = src;
}

void ArchBuilder::add_pos_rows(int32_t dst, int32_t table) {
    const TensorRef *t = out_.tensors.at(static_cast<size_t>(table));
    if (t->ne[0] != width(dst) || (t->type != DType::F32 && t->type != DType::F16))
        fail(EMBER_ERR_INVALID_MODEL, "position embeddings '%s' must be F32 or F16 rows of %u", t->name.c_str(), width(dst));
    auto &n = node(EMBER_GRAPH_ADD_POS_ROWS);
    n.dst = dst, n.w = table;
}

int32_t ArchBuilder::made_matrix(const std::string &name, std::vector<float> values, int64_t ne0, int64_t ne1) {
    if (static_cast<int64_t>(values.size()) != ne0 * ne1) fail(EMBER_ERR_INTERNAL, "made_matrix '%s': size", name.c_str());
    const int32_t i = made_vector(name, std::move(values));
    TensorRef &t = out_.made.back();
    t.n_dims = 2, t.ne[0] = ne0, t.ne[1] = ne1;
    return i;
}

std::vector<float> ArchBuilder::f32_values(const TensorRef &t) const {
    const int64_t n = t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3];
    std::vector<float> v(static_cast<size_t>(n));
    if (t.type != DType::F32 && t.type != DType::F16 && t.type != DType::BF16)
        fail(EMBER_ERR_UNSUPPORTED, "tensor '%s' has type %s; it must be F32, F16 or BF16", t.name.c_str(), dtype_name(t.type));
    if (t.n_bytes < static_cast<size_t>(n) * dtype_row_bytes(t.type, 1))
        fail(EMBER_ERR_INVALID_MODEL, "tensor '%s' is truncated", t.name.c_str());
    for (int64_t i = 0; i < n; ++i) {
        if (t.type == DType::F32) {
            std::memcpy(&v[static_cast<size_t>(i)], static_cast<const uint8_t *>(t.data) + 4 * i, 4);
        } else {
            uint16_t h;
            std::memcpy(&h, static_cast<const uint8_t *>(t.data) + 2 * i, 2);
            v[static_cast<size_t>(i)] = t.type == DType::F16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
        }
    }
    return v;
}

void ArchBuilder::geglu(int32_t dst, int32_t gate, int32_t up) {
    auto &n = node(EMBER_GRAPH_GEGLU);
    n.dst = dst, n.src = gate, n.src2 = up;
}

void ArchBuilder::scale(int32_t dst, int32_t src, float s) {
    auto &n = node(EMBER_GRAPH_SCALE);
    n.dst = dst, n.src = src, n.scale = s;
}

void ArchBuilder::softcap(int32_t dst, int32_t src, float cap) {
    if (!(cap > 0)) fail(EMBER_ERR_INVALID_MODEL, "a softcap of %g", static_cast<double>(cap));
    auto &n = node(EMBER_GRAPH_SOFTCAP);
    n.dst = dst, n.src = src, n.softcap = cap;
}

void ArchBuilder::moe(int32_t dst, int32_t src, int32_t router_logits, const Moe &m) {
    auto &n = node(EMBER_GRAPH_MOE);
    n.dst = dst, n.src = src, n.src2 = router_logits;
    n.w = m.gate, n.w2 = m.up, n.w3 = m.down, n.b = m.gate_b, n.b2 = m.up_b, n.b3 = m.down_b;
    n.n_expert = m.n_expert, n.n_expert_used = m.n_used, n.moe_gating = m.gating, n.moe_act = m.act;
    n.act_alpha = m.alpha, n.act_limit = m.limit, n.sel_bias = m.sel_bias;
}

void ArchBuilder::read_kv_of(int32_t layer) {
    ember_graph_node &n = out_.nodes.back();
    if ((n.op != EMBER_GRAPH_ATTENTION && n.op != EMBER_GRAPH_ATTENTION_EXT) || layer < 0 || layer > n.layer)
        fail(EMBER_ERR_INTERNAL, "read_kv_of: layer %d after node %u", layer, n.op);
    n.kv_from = static_cast<uint32_t>(layer) + 1;
}

void ArchBuilder::add(int32_t dst, int32_t src) {
    auto &n = node(EMBER_GRAPH_ADD);
    n.dst = dst, n.src = src;
}

void ArchBuilder::swiglu(int32_t dst, int32_t gate, int32_t up) {
    auto &n = node(EMBER_GRAPH_SWIGLU);
    n.dst = dst, n.src = gate, n.src2 = up;
}

void ArchBuilder::gather_logits(int32_t dst, int32_t src) {
    auto &n = node(EMBER_GRAPH_GATHER_LOGITS);
    n.dst = dst, n.src = src;
}

void ArchBuilder::output(int32_t logits_buf) { out_.logits_buf = logits_buf; }

void ArchBuilder::input_rows(int32_t dst) {
    if (out_.bufs[static_cast<size_t>(dst)].rows != EMBER_GRAPH_ROWS_TOKENS)
        fail(EMBER_ERR_INTERNAL, "input_rows: the buffer is not per token");
    auto &n = node(EMBER_GRAPH_INPUT_ROWS);
    n.dst = dst;
}

void ArchBuilder::hidden_rows(int32_t buf) {
    if (out_.bufs[static_cast<size_t>(buf)].rows != EMBER_GRAPH_ROWS_TOKENS)
        fail(EMBER_ERR_INTERNAL, "hidden_rows: the buffer is not per token");
    out_.hidden_buf = buf;
}

void ArchBuilder::copy_cols(int32_t dst, int32_t src, uint32_t n_group, uint32_t offset, uint32_t n_cols, uint32_t dst_col) {
    if (n_group == 0 || width(src) % n_group != 0 || offset + n_cols > width(src) / n_group ||
        uint64_t{dst_col} + uint64_t{n_group} * n_cols > width(dst))
        fail(EMBER_ERR_INTERNAL, "copy_cols: %u groups of %u columns from %u of a row of %u into %u at %u", n_group,
             n_cols, offset, width(src), width(dst), dst_col);
    auto &n = node(EMBER_GRAPH_COPY_COLS);
    n.dst = dst, n.src = src, n.n_head = n_group, n.head_dim = n_cols, n.n = offset, n.n_rot = dst_col;
}

void ArchBuilder::mul(int32_t dst, int32_t a, int32_t b) {
    if (width(dst) != width(a) || width(b) != width(a))
        fail(EMBER_ERR_INTERNAL, "mul: widths %u, %u, %u", width(dst), width(a), width(b));
    auto &n = node(EMBER_GRAPH_MUL);
    n.dst = dst, n.src = a, n.src2 = b;
}

void ArchBuilder::sigmoid_mul(int32_t dst, int32_t src, int32_t gate) {
    if (width(dst) != width(src) || (width(gate) != width(src) && width(gate) != 1))
        fail(EMBER_ERR_INTERNAL, "sigmoid_mul: widths %u, %u, %u", width(dst), width(src), width(gate));
    auto &n = node(EMBER_GRAPH_SIGMOID_MUL);
    n.dst = dst, n.src = src, n.src2 = gate;
}

uint32_t ArchBuilder::state(uint64_t floats) {
    const uint64_t offset = out_.state_floats;
    if (offset + floats > (1ull << 31))
        fail(EMBER_ERR_INVALID_MODEL, "the model's recurrent state would exceed 8 GiB per sequence");
    out_.state_floats = static_cast<uint32_t>(offset + floats);
    return static_cast<uint32_t>(offset);
}

void ArchBuilder::ssm_conv(int32_t dst, int32_t src, int32_t kernel, bool silu, int32_t bias) {
    const TensorRef *k = out_.tensors.at(static_cast<size_t>(kernel));
    if (width(dst) != width(src) || k->ne[1] != width(src) || k->ne[0] < 1)
        fail(EMBER_ERR_INTERNAL, "ssm_conv: kernel [%lld, %lld] over rows of %u", (long long)k->ne[0],
             (long long)k->ne[1], width(src));
    auto &n = node(EMBER_GRAPH_SSM_CONV);
    n.dst = dst, n.src = src, n.w = kernel, n.b = bias;
    n.n = silu ? EMBER_GRAPH_SSM_CONV_SILU : EMBER_GRAPH_SSM_CONV_LINEAR;
    n.state_size = static_cast<uint32_t>((k->ne[0] - 1) * k->ne[1]);
    n.state_offset = state(n.state_size);
}

void ArchBuilder::gated_delta(int32_t dst, int32_t qkv, int32_t a, int32_t b, const GatedDelta &g) {
    const uint64_t S = g.head_dim;
    if (g.n_head == 0 || g.n_head_k == 0 || g.n_head % g.n_head_k != 0 || width(dst) != g.n_head * S ||
        width(qkv) != (2 * g.n_head_k + g.n_head) * S || width(a) != g.n_head || width(b) != g.n_head)
        fail(EMBER_ERR_INTERNAL, "gated_delta: %u value heads, %u key heads of %u", g.n_head, g.n_head_k, g.head_dim);
    auto &n = node(EMBER_GRAPH_GATED_DELTA);
    n.dst = dst, n.src = qkv, n.src2 = a, n.src3 = b, n.w = g.dt, n.w2 = g.decay;
    n.n_head = g.n_head, n.n_head_kv = g.n_head_k, n.head_dim = g.head_dim;
    n.eps = g.eps, n.scale = g.scale, n.n = g.grouped ? 1 : 0;
    n.state_size = static_cast<uint32_t>(g.n_head * S * S);
    n.state_offset = state(n.state_size);
}

void ArchBuilder::ssm_scan(int32_t dst, int32_t xbc, int32_t dt, const Scan &s) {
    const uint64_t inner = uint64_t{s.n_head} * s.head_dim;
    if (s.n_head == 0 || s.n_group == 0 || s.n_head % s.n_group != 0 || s.d_state == 0 || width(dst) != inner ||
        width(xbc) != inner + 2ull * s.n_group * s.d_state || width(dt) != s.n_head)
        fail(EMBER_ERR_INTERNAL, "ssm_scan: %u heads of %u, %u groups of %u", s.n_head, s.head_dim, s.n_group, s.d_state);
    auto &n = node(EMBER_GRAPH_SSM_SCAN);
    n.dst = dst, n.src = xbc, n.src2 = dt, n.w = s.A, n.w2 = s.D, n.b = s.dt_bias;
    n.n_head = s.n_head, n.n_head_kv = s.n_group, n.head_dim = s.head_dim, n.n = s.d_state;
    n.state_size = static_cast<uint32_t>(inner * s.d_state);
    n.state_offset = state(n.state_size);
}

} // namespace ember
