// api_engine.cpp — engines and requests through the C ABI.
#include "abi/api_placement.hpp"
#include "abi/handles.hpp"

#include <chrono>
#include <cstddef>
#include <cstring>

using namespace ember;
using ember::abi::guard;

extern "C" {

// ember_engine_params grew in EMBER_1.1 (kv_type), EMBER_1.4 (reserved, device), EMBER_1.9 (placement) and
// EMBER_1.10 (speculation): programs built against EMBER_1 keep an init that writes only the 40 bytes their
// struct has, those built against EMBER_1.1 one that writes 48, and so on (see ember_session_params_init).
namespace {
constexpr uint32_t kEngineParamsV1Size = offsetof(ember_engine_params, kv_type);
constexpr uint32_t kEngineParamsV2Size = offsetof(ember_engine_params, device);  // sizeof the EMBER_1.1 struct
constexpr uint32_t kEngineParamsV3Size = offsetof(ember_engine_params, gpu_layers);  // sizeof the EMBER_1.4 struct
constexpr uint32_t kEngineParamsV4Size = offsetof(ember_engine_params, speculation);  // sizeof the EMBER_1.9 struct
ember_engine_params engine_params_defaults() {
    ember_engine_params p;
    std::memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.n_seq_max = 8;
    p.n_batch = 256;
    p.backend = EMBER_BACKEND_AUTO;
    p.kv_type = EMBER_KV_F16;
    p.gpu_layers = EMBER_GPU_LAYERS_ALL;
    p.speculation = EMBER_SPEC_OFF;
    p.spec_k = 4;
    p.spec_ngram_max = 3;
    return p;
}
} // namespace
EMBER_GROWN_FOUR_TIMES_PARAMS_INIT_AT(ember_engine_params, ember_engine_params_init, engine_params_defaults,
                                      kEngineParamsV1Size, kEngineParamsV2Size, 1_1, "EMBER_1.1", kEngineParamsV3Size, 1_4,
                                      "EMBER_1.4", kEngineParamsV4Size, 1_9, "EMBER_1.9", 1_10, "EMBER_1.10");

namespace {
// select_device: make the params' device the one its backend opens (creating an engine); an estimate only
// needs the device's backend.
EngineOptions engine_options(const ember_engine_params *params, bool select_device) {
    const ember_engine_params p = abi::read_params(params, kEngineParamsV1Size, impl_ember_engine_params_init_1_10,
                                                   "ember_engine_params");
    const DType kv_type = abi::kv_dtype(p.kv_type);
    const int64_t backend = abi::enum_value(p.backend);
    if (backend < EMBER_BACKEND_AUTO || backend > EMBER_BACKEND_VULKAN)
        fail(EMBER_ERR_INVALID_ARGUMENT, "unknown backend %lld", (long long)backend);
    EngineOptions o;
    o.n_ctx = p.n_ctx;
    o.n_seq_max = p.n_seq_max;
    o.kv_bytes = p.kv_bytes;
    o.n_threads = p.n_threads;
    o.n_batch = p.n_batch;
    o.backend = !p.device ? p.backend : select_device ? abi::use_device(p.device) : abi::device_backend(p.device);
    o.manual_step = p.manual_step;
    o.kv_type = kv_type;
    o.placement = abi::placement_request(p.gpu_layers, p.experts_on_cpu, p.gpu_budget_bytes);
    const int64_t spec = abi::enum_value(p.speculation);
    if (spec < EMBER_SPEC_OFF || spec > EMBER_SPEC_MTP) fail(EMBER_ERR_INVALID_ARGUMENT, "unknown speculation mode %lld", (long long)spec);
    if (spec == EMBER_SPEC_DRAFT)
        fail(EMBER_ERR_UNSUPPORTED, "an engine does not speculate with a draft model (EMBER_SPEC_MTP and EMBER_SPEC_LOOKUP it does)");
    o.spec_mode = static_cast<ember_spec_mode>(spec);
    o.spec_k = p.spec_k;
    o.spec_ngram_max = p.spec_ngram_max;
    return o;
}

void write_estimate(const Model &model, const ember_engine_params *params, ember_memory_estimate *out) {
    const MemoryEstimate m = estimate_engine_memory(model, engine_options(params, false));
    ember_memory_estimate full;
    ember_memory_estimate_init(&full);
    full.weights_bytes = m.weights_bytes;
    full.kv_bytes = m.kv_bytes;
    full.compute_bytes = m.compute_bytes;
    full.total_bytes = m.weights_bytes + m.kv_bytes + m.compute_bytes;
    abi::write_out(out, full, sizeof(ember_memory_estimate), "ember_memory_estimate");
}
} // namespace

void ember_memory_estimate_init(ember_memory_estimate *estimate) {
    if (!estimate) return;
    std::memset(estimate, 0, sizeof *estimate);
    estimate->struct_size = sizeof *estimate;
}

ember_status ember_estimate_memory(const ember_model *model, const ember_engine_params *params, ember_memory_estimate *out) {
    return guard("ember_estimate_memory", [&] {
        EMBER_REQUIRE_ARG(model);
        EMBER_REQUIRE_ARG(out);
        write_estimate(*model->model, params, out);
        return EMBER_OK;
    });
}

ember_status ember_estimate_placement(const ember_model *model, const ember_engine_params *params, ember_placement *out) {
    return guard("ember_estimate_placement", [&] {
        EMBER_REQUIRE_ARG(model);
        EMBER_REQUIRE_ARG(out);
        const EngineOptions o = engine_options(params, false);
        const Model &m = *model->model;
        const PlacementPlan plan = estimate_engine_placement(m, o);
        abi::write_placement(plan, m.desc().hp.n_layer, backend_require(o.backend).kind(), out);
        return EMBER_OK;
    });
}

ember_status ember_estimate_memory_file(const char *path, const ember_engine_params *params, ember_memory_estimate *out) {
    return guard("ember_estimate_memory_file", [&] {
        EMBER_REQUIRE_ARG(path);
        EMBER_REQUIRE_ARG(out);
        write_estimate(*Model::load(path, LoadOptions{}), params, out);
        return EMBER_OK;
    });
}

ember_status ember_engine_create(const ember_model *model, const ember_engine_params *params, ember_engine **out) {
    if (out) *out = nullptr;
    return guard("ember_engine_create", [&] {
        EMBER_REQUIRE_ARG(model);
        EMBER_REQUIRE_ARG(out);
        const EngineOptions o = engine_options(params, true);
        auto h = std::make_unique<ember_engine>();
        h->engine = std::make_unique<Engine>(*model->model, o);
        *out = h.release();
        return EMBER_OK;
    });
}

void ember_engine_free(ember_engine *engine) {
    if (!engine) return;
    // From a request's callback the step is still running: in manual mode ember_engine_step frees the
    // engine when it returns; a worker thread cannot stop and free itself, so there it is refused.
    if (CallbackScope::running_on(engine->engine.get())) {
        if (engine->engine->manual()) {
            engine->free_pending = true;
        } else {
            abi::set_error(EMBER_ERR_INVALID_STATE, "ember_engine_free", "",
                           "cannot free an engine from a callback on its own worker thread; the engine was not freed");
        }
        return;
    }
    delete engine;
}

ember_status ember_engine_step(ember_engine *engine, bool *out_busy) {
    const ember_status status = guard("ember_engine_step", [&] {
        EMBER_REQUIRE_ARG(engine);
        abi::refuse_reentry(engine->engine.get(), "ember_engine_step");
        if (!engine->engine->manual())
            fail(EMBER_ERR_INVALID_STATE, "the engine runs its own worker thread (manual_step is false)");
        const bool busy = engine->engine->step();
        if (out_busy) *out_busy = busy && !engine->free_pending;
        return EMBER_OK;
    });
    if (engine && engine->free_pending) delete engine;   // a callback of this step freed it
    return status;
}

void ember_engine_stats_init(ember_engine_stats *stats) {
    if (!stats) return;
    std::memset(stats, 0, sizeof *stats);
    stats->struct_size = sizeof *stats;
}

ember_status ember_engine_get_stats(ember_engine *engine, ember_engine_stats *stats) {
    return guard("ember_engine_get_stats", [&] {
        EMBER_REQUIRE_ARG(engine);
        EMBER_REQUIRE_ARG(stats);
        const Engine::Stats s = engine->engine->stats();
        const EnginePlan &p = engine->engine->plan();
        ember_engine_stats full;
        ember_engine_stats_init(&full);
        full.n_blocks = p.n_blocks;
        full.n_blocks_used = s.n_blocks_used;
        full.n_blocks_cached = s.n_blocks_cached;
        full.block_size = p.block_size;
        full.n_running = s.n_running;
        full.n_queued = s.n_queued;
        full.kv_bytes = p.kv_bytes;
        abi::write_out(stats, full, sizeof(ember_engine_stats), "ember_engine_stats");
        return EMBER_OK;
    });
}

ember_status ember_engine_device(const ember_engine *engine, const ember_device **out_device) {
    return guard("ember_engine_device", [&] {
        EMBER_REQUIRE_ARG(engine);
        EMBER_REQUIRE_ARG(out_device);
        *out_device = abi::device_in_use(engine->engine->backend_kind());
        return EMBER_OK;
    });
}

ember_status ember_engine_pin_prefix(ember_engine *engine, const ember_token *tokens, size_t n_tokens) {
    return guard("ember_engine_pin_prefix", [&] {
        EMBER_REQUIRE_ARG(engine);
        abi::refuse_reentry(engine->engine.get(), "ember_engine_pin_prefix");
        EMBER_REQUIRE_ARG(tokens);
        engine->engine->pin_prefix(tokens, n_tokens);
        return EMBER_OK;
    });
}

} // extern "C"

// ember_request_params grew in EMBER_1.4 (grammar, stop strings) and EMBER_1.10 (speculate): programs built
// before keep an init that writes only the 56 (or 80) bytes their struct has.
namespace {
constexpr uint32_t kRequestParamsV1Size = offsetof(ember_request_params, grammar);
constexpr uint32_t kRequestParamsV2Size = offsetof(ember_request_params, speculate);   // sizeof the EMBER_1.4 struct
ember_request_params request_params_defaults() {
    ember_request_params p;
    std::memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.max_tokens = 128;
    p.speculate = true;
    return p;
}
} // namespace

EMBER_GROWN_TWICE_PARAMS_INIT_AT(ember_request_params, ember_request_params_init, request_params_defaults, kRequestParamsV1Size,
                                 kRequestParamsV2Size, 1_4, "EMBER_1.4", 1_10, "EMBER_1.10");

extern "C" {

ember_status ember_request_submit(ember_engine *engine, const ember_request_params *params, ember_request **out) {
    if (out) *out = nullptr;
    return guard("ember_request_submit", [&] {
        EMBER_REQUIRE_ARG(engine);
        EMBER_REQUIRE_ARG(params);
        EMBER_REQUIRE_ARG(out);
        const ember_request_params p = abi::read_params(params, kRequestParamsV1Size, impl_ember_request_params_init_1_10,
                                                        "ember_request_params");
        if (!p.prompt && p.n_prompt) fail(EMBER_ERR_INVALID_ARGUMENT, "prompt is NULL but n_prompt is %zu", p.n_prompt);
        engine->engine->check_prompt(p.prompt, p.n_prompt);   // before copying: n_prompt may be anything
        auto r = std::make_shared<Request>();
        r->prompt.assign(p.prompt, p.prompt + p.n_prompt);
        r->max_tokens = p.max_tokens;
        SamplerParams sp;
        sp.temperature = 0;  // NULL sampling: greedy
        if (p.sampling) {
            const ember_sampler_params s = abi::read_sampler_params(p.sampling);
            sp = abi::sampler_params_from(s);
        }
        r->sampler = std::make_unique<Sampler>(sp);
        if (p.grammar) r->sampler->set_grammar(p.grammar->grammar);
        r->stop = abi::stop_strings_from(p.stop, p.n_stop);
        r->speculate = p.speculate;
        auto h = std::make_unique<ember_request>();
        r->on_token = p.on_token;
        r->user_data = p.user_data;
        r->handle = h.get();
        h->request = r;
        engine->engine->submit(r);
        *out = h.release();
        return EMBER_OK;
    });
}

ember_status ember_request_poll(ember_request *request, ember_token *tokens, size_t capacity, size_t *out_count,
                                ember_request_state *out_state) {
    return guard("ember_request_poll", [&] {
        EMBER_REQUIRE_ARG(request);
        if (!tokens && capacity) fail(EMBER_ERR_INVALID_ARGUMENT, "tokens is NULL but capacity is %zu", capacity);
        Request &r = *request->request;
        std::lock_guard<std::mutex> lock(r.mutex);
        const size_t available = r.tokens.size() - r.polled;
        const size_t n = tokens ? std::min(available, capacity) : available;
        if (tokens) {
            std::copy(r.tokens.begin() + static_cast<std::ptrdiff_t>(r.polled),
                      r.tokens.begin() + static_cast<std::ptrdiff_t>(r.polled + n), tokens);
            r.polled += n;
        }
        if (out_count) *out_count = n;
        if (out_state) *out_state = r.state;
        return EMBER_OK;
    });
}

ember_status ember_request_text(ember_request *request, char *buf, size_t capacity, size_t *out_len) {
    return guard("ember_request_text", [&] {
        EMBER_REQUIRE_ARG(request);
        EMBER_REQUIRE_ARG(out_len);
        std::string text;
        {
            std::lock_guard<std::mutex> lock(request->request->mutex);
            text = request->request->text;
        }
        return abi::copy_out(text, buf, capacity, out_len, true);
    });
}

ember_status ember_request_wait(ember_request *request, uint32_t timeout_ms) {
    return guard("ember_request_wait", [&] {
        EMBER_REQUIRE_ARG(request);
        Request &r = *request->request;
        std::unique_lock<std::mutex> lock(r.mutex);
        auto done = [&] { return r.ended_locked(); };
        if (timeout_ms == UINT32_MAX) r.ended.wait(lock, done);
        else if (!r.ended.wait_for(lock, std::chrono::milliseconds(timeout_ms), done)) return EMBER_STOPPED;
        return EMBER_OK;
    });
}

ember_status ember_request_cancel(ember_request *request) {
    return guard("ember_request_cancel", [&] {
        EMBER_REQUIRE_ARG(request);
        request->request->cancel = true;
        return EMBER_OK;
    });
}

ember_status ember_request_error(ember_request *request, ember_status *out_status, const char **out_message) {
    return guard("ember_request_error", [&] {
        EMBER_REQUIRE_ARG(request);
        EMBER_REQUIRE_ARG(out_status);
        Request &r = *request->request;
        std::lock_guard<std::mutex> lock(r.mutex);
        *out_status = r.error;
        if (out_message) *out_message = r.error_message.c_str();
        return EMBER_OK;
    });
}

ember_status ember_request_logprobs(ember_request *request, size_t i, ember_token_logprob *sampled, ember_token_logprob *top,
                                    size_t capacity, size_t *out_count) {
    if (out_count) *out_count = 0;
    return guard("ember_request_logprobs", [&] {
        EMBER_REQUIRE_ARG(request);
        if (!top && capacity) fail(EMBER_ERR_INVALID_ARGUMENT, "top is NULL but capacity is %zu", capacity);
        Request &r = *request->request;
        if (!r.sampler) fail(EMBER_ERR_INVALID_STATE, "an embedding request generates no tokens and records no logprobs");
        if (r.sampler->params().n_logprobs == 0)
            fail(EMBER_ERR_INVALID_STATE, "the request records no logprobs (its sampling params' n_logprobs is 0)");
        std::lock_guard<std::mutex> lock(r.mutex);
        if (i >= r.logprobs.size()) fail(EMBER_ERR_NOT_FOUND, "token %zu is not generated yet (%zu are)", i, r.logprobs.size());
        abi::request_logprobs_out(r.logprobs[i].sampled, r.logprobs[i].top, sampled, top, capacity, out_count);
        return EMBER_OK;
    });
}

void ember_request_stats_init(ember_request_stats *stats) {
    if (!stats) return;
    std::memset(stats, 0, sizeof *stats);
    stats->struct_size = sizeof *stats;
}

ember_status ember_request_get_stats(ember_request *request, ember_request_stats *stats) {
    return guard("ember_request_get_stats", [&] {
        EMBER_REQUIRE_ARG(request);
        EMBER_REQUIRE_ARG(stats);
        ember_request_stats full;
        ember_request_stats_init(&full);
        Request &r = *request->request;
        {
            std::lock_guard<std::mutex> lock(r.mutex);
            full.n_tokens = r.tokens.size();
            full.decode_steps = r.decode_steps;
            full.drafted = r.spec_drafted;
            full.accepted = r.spec_accepted;
        }
        full.acceptance_rate = full.drafted ? static_cast<double>(full.accepted) / static_cast<double>(full.drafted) : 0.0;
        abi::write_out(stats, full, sizeof(ember_request_stats), "ember_request_stats");
        return EMBER_OK;
    });
}

void ember_request_free(ember_request *request) {
    if (!request) return;
    Request &r = *request->request;
    {
        // Wait out a callback in flight and make sure no later one sees this handle.
        std::lock_guard<std::recursive_mutex> cb(r.cb_mutex);
        r.on_token = nullptr;
        r.handle = nullptr;
    }
    r.cancel = true;
    delete request;
}

} // extern "C"
