// api_sampler.cpp — samplers through the C ABI.
#include "abi/handles.hpp"

#include <cstddef>
#include <cstring>

using namespace ember;
using ember::abi::guard;

namespace ember::abi {
SamplerParams sampler_params_from(const ember_sampler_params &p) {
    SamplerParams s;
    s.temperature = p.temperature;
    s.top_k = p.top_k;
    s.top_p = p.top_p;
    s.min_p = p.min_p;
    s.repeat_penalty = p.repeat_penalty;
    s.frequency_penalty = p.frequency_penalty;
    s.presence_penalty = p.presence_penalty;
    s.penalty_last_n = p.penalty_last_n;
    s.seed = p.seed;
    s.n_logprobs = p.n_logprobs;
    return s;
}
} // namespace ember::abi

namespace {
// What a caller built before EMBER_1.4 passes (struct_size 48): the fields before `n_logprobs`.
constexpr uint32_t kSamplerParamsV1Size = offsetof(ember_sampler_params, n_logprobs);
ember_sampler_params sampler_params_defaults() {
    ember_sampler_params p;
    std::memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    const SamplerParams d;
    p.temperature = d.temperature;
    p.top_k = d.top_k;
    p.top_p = d.top_p;
    p.min_p = d.min_p;
    p.repeat_penalty = d.repeat_penalty;
    p.frequency_penalty = d.frequency_penalty;
    p.presence_penalty = d.presence_penalty;
    p.penalty_last_n = d.penalty_last_n;
    p.seed = d.seed;
    p.n_logprobs = d.n_logprobs;
    return p;
}
} // namespace

EMBER_GROWN_PARAMS_INIT_AT(ember_sampler_params, ember_sampler_params_init, sampler_params_defaults, kSamplerParamsV1Size,
                           1_4, "EMBER_1.4");

namespace ember::abi {
ember_sampler_params read_sampler_params(const ember_sampler_params *params) {
    return abi::read_params(params, kSamplerParamsV1Size, impl_ember_sampler_params_init_1_4, "ember_sampler_params");
}
} // namespace ember::abi

extern "C" {

ember_status ember_sampler_create(const ember_sampler_params *params, ember_sampler **out) {
    if (out) *out = nullptr;
    return guard("ember_sampler_create", [&] {
        EMBER_REQUIRE_ARG(out);
        const ember_sampler_params p = abi::read_sampler_params(params);
        auto h = std::make_unique<ember_sampler>();
        h->sampler = std::make_unique<Sampler>(abi::sampler_params_from(p));
        *out = h.release();
        return EMBER_OK;
    });
}

void ember_sampler_free(ember_sampler *sampler) {
    // From ember_generate's callback, the sampler is still in use: that call frees it when it returns.
    if (sampler && CallbackScope::running_on(sampler)) sampler->free_pending = true;
    else delete sampler;
}

ember_status ember_sampler_sample(ember_sampler *sampler, const float *logits, size_t n_vocab, ember_token *out_token) {
    return guard("ember_sampler_sample", [&] {
        EMBER_REQUIRE_ARG(sampler);
        const abi::ExclusiveUse use_sampler = abi::enter(sampler, "ember_sampler_sample");
        EMBER_REQUIRE_ARG(logits);
        EMBER_REQUIRE_ARG(out_token);
        if (n_vocab == 0 || n_vocab > INT32_MAX) fail(EMBER_ERR_INVALID_ARGUMENT, "n_vocab %zu is out of range", n_vocab);
        *out_token = sampler->sampler->sample(logits, n_vocab);
        return EMBER_OK;
    });
}

ember_status ember_sampler_accept(ember_sampler *sampler, ember_token token) {
    return guard("ember_sampler_accept", [&] {
        EMBER_REQUIRE_ARG(sampler);
        const abi::ExclusiveUse use_sampler = abi::enter(sampler, "ember_sampler_accept");
        sampler->sampler->accept(token);
        return EMBER_OK;
    });
}

ember_status ember_sampler_reset(ember_sampler *sampler) {
    return guard("ember_sampler_reset", [&] {
        EMBER_REQUIRE_ARG(sampler);
        const abi::ExclusiveUse use_sampler = abi::enter(sampler, "ember_sampler_reset");
        sampler->sampler->reset();
        return EMBER_OK;
    });
}

ember_status ember_sampler_set_logit_bias(ember_sampler *sampler, const ember_logit_bias *bias, size_t n) {
    return guard("ember_sampler_set_logit_bias", [&] {
        EMBER_REQUIRE_ARG(sampler);
        if (!bias && n) fail(EMBER_ERR_INVALID_ARGUMENT, "bias is NULL but n is %zu", n);
        abi::refuse_reentry(sampler, "ember_sampler_set_logit_bias");
        std::vector<std::pair<int32_t, float>> b;
        b.reserve(n);
        for (size_t i = 0; i < n; ++i) b.emplace_back(bias[i].token, bias[i].bias);
        sampler->sampler->set_logit_bias(std::move(b));
        return EMBER_OK;
    });
}

// The number a general.sampling.* key holds, or nothing when the file has no such key.
static bool sampling_number(const ember_model &model, const char *key, double *out) {
    const gguf::KV *kv = model.model->gguf().find(key);
    if (!kv) return false;
    const gguf::Value &v = kv->value;
    const bool is_unsigned = v.type == gguf::ValueType::U8 || v.type == gguf::ValueType::U16 ||
                             v.type == gguf::ValueType::U32 || v.type == gguf::ValueType::U64;
    if (v.is_float()) *out = v.f;
    else if (v.is_integer()) *out = is_unsigned ? static_cast<double>(v.u) : static_cast<double>(v.i);
    else fail(EMBER_ERR_INVALID_MODEL, "metadata '%s' is %s, not a number", key, gguf::value_type_name(v.type));
    return true;
}

ember_status ember_sampler_params_from_model(const ember_model *model, ember_sampler_params *params, size_t *out_count) {
    if (out_count) *out_count = 0;
    return guard("ember_sampler_params_from_model", [&] {
        EMBER_REQUIRE_ARG(model);
        EMBER_REQUIRE_ARG(params);
        if (params->struct_size < kSamplerParamsV1Size)
            fail(EMBER_ERR_INVALID_ARGUMENT, "ember_sampler_params.struct_size is %u, smaller than any version of the "
                 "struct (%u); call ember_sampler_params_init() first", params->struct_size, kSamplerParamsV1Size);
        // Read all first, so that a bad key changes nothing. The fields are all of the first version.
        ember_sampler_params p;
        std::memcpy(static_cast<void *>(&p), params, kSamplerParamsV1Size);   // a caller's struct may be that small
        size_t n = 0;
        double v;
        if (sampling_number(*model, "general.sampling.temp", &v)) p.temperature = static_cast<float>(v), ++n;
        if (sampling_number(*model, "general.sampling.top_k", &v)) p.top_k = static_cast<int32_t>(v), ++n;
        if (sampling_number(*model, "general.sampling.top_p", &v)) p.top_p = static_cast<float>(v), ++n;
        if (sampling_number(*model, "general.sampling.min_p", &v)) p.min_p = static_cast<float>(v), ++n;
        if (sampling_number(*model, "general.sampling.penalty_repeat", &v)) p.repeat_penalty = static_cast<float>(v), ++n;
        if (sampling_number(*model, "general.sampling.penalty_last_n", &v)) p.penalty_last_n = static_cast<int32_t>(v), ++n;
        std::memcpy(static_cast<void *>(params), &p, kSamplerParamsV1Size);
        if (out_count) *out_count = n;
        return EMBER_OK;
    });
}

} // extern "C"
