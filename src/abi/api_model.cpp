// api_model.cpp — loading models and reading what they hold.
#include "abi/handles.hpp"
#include "backend/backend.hpp"
#include "gguf/gguf_format.hpp"

#include <cstring>

using namespace ember;
using ember::abi::guard;

extern "C" {

void ember_model_params_init(ember_model_params *params) {
    if (!params) return;
    std::memset(params, 0, sizeof *params);
    params->struct_size = sizeof *params;
}

namespace {
// Both loads: the full one (ember_model_load) and the metadata-only one (ember_model_load_metadata).
ember_status load(const char *fn, const char *path, const ember_model_params *params, ember_model **out,
                  bool metadata_only) {
    if (out) *out = nullptr;
    return guard(fn, [&] {
        EMBER_REQUIRE_ARG(path);
        EMBER_REQUIRE_ARG(out);
        const ember_model_params p = abi::read_params(params, offsetof(ember_model_params, log_user_data) + sizeof(void *),
                                                      ember_model_params_init, "ember_model_params");
        LoadOptions opts;
        opts.vocab_only = p.vocab_only;
        opts.metadata_only = metadata_only;
        opts.log = LogSink{p.log, p.log_user_data};
        if (p.progress) {
            ember_progress_fn fn = p.progress;
            void *ud = p.progress_user_data;
            opts.progress = [fn, ud](float f) { return fn(f, ud); };
        }
        auto h = std::make_unique<ember_model>();
        h->model = Model::load(path, opts);
        for (const auto &kv : h->model->gguf().kvs()) h->meta_keys.emplace_back(kv.key);
        for (const auto &t : h->model->gguf().tensors()) h->tensor_names.emplace_back(t.name);
        *out = h.release();
        return EMBER_OK;
    });
}
} // namespace

ember_status ember_model_load(const char *path, const ember_model_params *params, ember_model **out) {
    return load("ember_model_load", path, params, out, false);
}

ember_status ember_model_load_metadata(const char *path, const ember_model_params *params, ember_model **out) {
    return load("ember_model_load_metadata", path, params, out, true);
}

void ember_model_free(ember_model *model) { delete model; }


namespace {
// ember_model_info as EMBER_1 had it: up to kv_bytes_per_token.
constexpr uint32_t kModelInfoV1Size = offsetof(ember_model_info, state_bytes_per_sequence);
ember_model_info model_info_defaults() {
    ember_model_info i;
    std::memset(&i, 0, sizeof i);
    i.struct_size = sizeof i;
    return i;
}
} // namespace

EMBER_GROWN_PARAMS_INIT_AT(ember_model_info, ember_model_info_init, model_info_defaults, kModelInfoV1Size, 1_9, "EMBER_1.9");

ember_status ember_model_get_info(const ember_model *model, ember_model_info *info) {
    return guard("ember_model_get_info", [&] {
        EMBER_REQUIRE_ARG(model);
        EMBER_REQUIRE_ARG(info);
        const Model &m = *model->model;
        ember_model_info full = model_info_defaults();
        full.architecture = m.arch().c_str();
        full.name = m.name().c_str();
        full.n_params = m.vocab_only() ? 0 : m.n_params();
        full.size_bytes = m.size_bytes();
        full.n_vocab = m.n_vocab();
        if (!m.vocab_only()) {
            const HParams &hp = m.desc().hp;
            full.n_ctx_train = hp.n_ctx_train;
            full.n_embd = hp.n_embd;
            full.n_layer = hp.n_layer;
            full.n_head = hp.n_head;
            full.n_head_kv = hp.n_head_kv;
            full.kv_bytes_per_token = 2ull * n_kv_layers(m.desc().c) * hp.n_embd_kv() * sizeof(uint16_t);
            full.state_bytes_per_sequence = state_bytes(m.desc().c);
            full.n_kv_layers = n_kv_layers(m.desc().c);
            full.n_recurrent_layers = n_recurrent_layers(m.desc().c);
        }
        abi::write_out(info, full, offsetof(ember_model_info, kv_bytes_per_token), "ember_model_info");
        return EMBER_OK;
    });
}

ember_status ember_model_meta_count(const ember_model *model, size_t *out_count) {
    return guard("ember_model_meta_count", [&] {
        EMBER_REQUIRE_ARG(model);
        EMBER_REQUIRE_ARG(out_count);
        *out_count = model->meta_keys.size();
        return EMBER_OK;
    });
}

ember_status ember_model_meta_key(const ember_model *model, size_t i, const char **out_key) {
    return guard("ember_model_meta_key", [&] {
        EMBER_REQUIRE_ARG(model);
        EMBER_REQUIRE_ARG(out_key);
        if (i >= model->meta_keys.size())
            fail(EMBER_ERR_NOT_FOUND, "metadata index %zu is out of range (%zu keys)", i, model->meta_keys.size());
        *out_key = model->meta_keys[i].c_str();
        return EMBER_OK;
    });
}

namespace {
const gguf::KV &find_kv(const ember_model *model, const char *key) {
    const gguf::KV *kv = model->model->gguf().find(key);
    if (!kv) fail(EMBER_ERR_NOT_FOUND, "metadata key '%s' not found", key);
    return *kv;
}
} // namespace

ember_status ember_model_meta_string(const ember_model *model, const char *key, char *buf, size_t capacity,
                                     size_t *out_len) {
    return guard("ember_model_meta_string", [&] {
        EMBER_REQUIRE_ARG(model);
        EMBER_REQUIRE_ARG(key);
        EMBER_REQUIRE_ARG(out_len);
        return abi::copy_out(gguf::value_to_string(find_kv(model, key).value), buf, capacity, out_len, true);
    });
}

ember_status ember_model_meta_int(const ember_model *model, const char *key, int64_t *out) {
    return guard("ember_model_meta_int", [&] {
        EMBER_REQUIRE_ARG(model);
        EMBER_REQUIRE_ARG(key);
        EMBER_REQUIRE_ARG(out);
        const gguf::Value &v = find_kv(model, key).value;
        if (!v.is_integer())
            fail(EMBER_ERR_TYPE_MISMATCH, "metadata '%s' is %s, not an integer", key, gguf::value_type_name(v.type));
        if (v.type == gguf::ValueType::U64 && v.u > static_cast<uint64_t>(INT64_MAX))
            fail(EMBER_ERR_TYPE_MISMATCH, "metadata '%s' = %llu does not fit int64", key, (unsigned long long)v.u);
        const bool is_unsigned = v.type == gguf::ValueType::U8 || v.type == gguf::ValueType::U16 ||
                                 v.type == gguf::ValueType::U32 || v.type == gguf::ValueType::U64;
        *out = is_unsigned ? static_cast<int64_t>(v.u) : v.i;
        return EMBER_OK;
    });
}

ember_status ember_model_meta_float(const ember_model *model, const char *key, double *out) {
    return guard("ember_model_meta_float", [&] {
        EMBER_REQUIRE_ARG(model);
        EMBER_REQUIRE_ARG(key);
        EMBER_REQUIRE_ARG(out);
        const gguf::Value &v = find_kv(model, key).value;
        if (!v.is_float())
            fail(EMBER_ERR_TYPE_MISMATCH, "metadata '%s' is %s, not a float", key, gguf::value_type_name(v.type));
        *out = v.f;
        return EMBER_OK;
    });
}

void ember_tensor_info_init(ember_tensor_info *info) {
    if (!info) return;
    std::memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
}

ember_status ember_model_tensor_count(const ember_model *model, size_t *out_count) {
    return guard("ember_model_tensor_count", [&] {
        EMBER_REQUIRE_ARG(model);
        EMBER_REQUIRE_ARG(out_count);
        *out_count = model->tensor_names.size();
        return EMBER_OK;
    });
}

ember_status ember_model_tensor_info(const ember_model *model, size_t i, ember_tensor_info *info) {
    return guard("ember_model_tensor_info", [&] {
        EMBER_REQUIRE_ARG(model);
        EMBER_REQUIRE_ARG(info);
        const auto &tensors = model->model->gguf().tensors();
        if (i >= tensors.size())
            fail(EMBER_ERR_NOT_FOUND, "tensor index %zu is out of range (%zu tensors)", i, tensors.size());
        const gguf::TensorInfo &t = tensors[i];
        ember_tensor_info full;
        ember_tensor_info_init(&full);
        full.name = model->tensor_names[i].c_str();
        full.type = dtype_name(t.type);
        full.n_dims = t.n_dims;
        for (int d = 0; d < 4; ++d) full.dims[d] = t.ne[d];
        full.n_bytes = t.n_bytes;
        abi::write_out(info, full, sizeof(ember_tensor_info), "ember_tensor_info");
        return EMBER_OK;
    });
}

} // extern "C"
