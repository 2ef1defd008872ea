// api_session.cpp — sessions through the C ABI.
#include "abi/api_placement.hpp"
#include "abi/handles.hpp"

#include <cstddef>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

using namespace ember;
using ember::abi::guard;

extern "C" {

// ember_session_params grew in EMBER_1.1 (reserved, n_seq_max, kv_type) and EMBER_1.4 (device): a program
// built against EMBER_1 passes the 32-byte struct of then, one built against EMBER_1.1 the 40-byte one, and
// their init must not write past it.
namespace {
constexpr uint32_t kSessionParamsV1Size = offsetof(ember_session_params, n_seq_max);
constexpr uint32_t kSessionParamsV2Size = offsetof(ember_session_params, device);
constexpr uint32_t kSessionParamsV3Size = offsetof(ember_session_params, gpu_layers);   // EMBER_1.4's struct
ember_session_params session_params_defaults() {
    ember_session_params p;
    std::memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.n_batch = 256;
    p.backend = EMBER_BACKEND_AUTO;
    p.n_seq_max = 1;
    p.kv_type = EMBER_KV_F16;
    p.gpu_layers = EMBER_GPU_LAYERS_ALL;
    return p;
}
} // namespace
EMBER_GROWN_THRICE_PARAMS_INIT_AT(ember_session_params, ember_session_params_init, session_params_defaults, kSessionParamsV1Size,
                                  kSessionParamsV2Size, 1_1, "EMBER_1.1", kSessionParamsV3Size, 1_4, "EMBER_1.4", 1_9,
                                  "EMBER_1.9");

ember_status ember_session_create(const ember_model *model, const ember_session_params *params, ember_session **out) {
    if (out) *out = nullptr;
    return guard("ember_session_create", [&] {
        EMBER_REQUIRE_ARG(model);
        EMBER_REQUIRE_ARG(out);
        const ember_session_params p = abi::read_params(params, kSessionParamsV1Size,
                                                        impl_ember_session_params_init_1_9, "ember_session_params");
        const DType kv_type = abi::kv_dtype(p.kv_type);
        const int64_t backend = abi::enum_value(p.backend);
        if (backend < EMBER_BACKEND_AUTO || backend > EMBER_BACKEND_VULKAN)
            fail(EMBER_ERR_INVALID_ARGUMENT, "unknown backend %lld", (long long)backend);
        SessionOptions o;
        o.n_ctx = p.n_ctx;
        o.n_threads = p.n_threads;
        o.n_batch = p.n_batch;
        o.seed = p.seed;
        o.backend = p.device ? abi::use_device(p.device) : p.backend;
        o.n_seq_max = p.n_seq_max;
        o.kv_type = kv_type;
        o.placement = abi::placement_request(p.gpu_layers, p.experts_on_cpu, p.gpu_budget_bytes);
        o.fingerprint = model->fingerprint;
        auto h = std::make_unique<ember_session>();
        h->session = std::make_unique<Session>(*model->model, o);
        h->n_threads = p.n_threads;
        *out = h.release();
        return EMBER_OK;
    });
}

void ember_session_free(ember_session *session) {
    // From ember_generate's callback, the session is still in use: that call frees it when it returns.
    if (session && CallbackScope::running_on(session)) session->free_pending = true;
    else delete session;
}

ember_status ember_session_fork(ember_session *session, ember_session **out) {
    if (out) *out = nullptr;
    return guard("ember_session_fork", [&] {
        EMBER_REQUIRE_ARG(session);
        const abi::ExclusiveUse use_session = abi::enter(session, "ember_session_fork");
        EMBER_REQUIRE_ARG(out);
        auto h = std::make_unique<ember_session>();
        h->session = session->session->fork();
        h->n_threads = session->n_threads;
        *out = h.release();
        return EMBER_OK;
    });
}

ember_status ember_session_feed(ember_session *session, const ember_token *tokens, size_t n_tokens) {
    return guard("ember_session_feed", [&] {
        EMBER_REQUIRE_ARG(session);
        const abi::ExclusiveUse use_session = abi::enter(session, "ember_session_feed");
        if (!tokens && n_tokens) fail(EMBER_ERR_INVALID_ARGUMENT, "tokens is NULL but n_tokens is %zu", n_tokens);
        if (abi::cancel_at_entry(*session)) fail(EMBER_ERR_CANCELLED, "cancelled (ember_session_cancel) before the feed began");
        session->session->feed(tokens, n_tokens, nullptr, &session->cancel);
        return EMBER_OK;
    });
}

void ember_session_cancel(ember_session *session) {
    // A lock-free atomic store: safe from a signal handler and from any thread.
    if (session) session->cancel.store(true, std::memory_order_relaxed);
}

void ember_session_cancel_arm(ember_session *session) {
    if (!session) return;
    session->cancel.store(false, std::memory_order_relaxed);
    session->cancel_sticky.store(true, std::memory_order_relaxed);
}

ember_status ember_session_logits(const ember_session *session, const float **out_logits, size_t *out_n_vocab) {
    return guard("ember_session_logits", [&] {
        EMBER_REQUIRE_ARG(session);
        const abi::ExclusiveUse use_session = abi::enter(session, "ember_session_logits");
        EMBER_REQUIRE_ARG(out_logits);
        const float *l = session->session->logits();
        if (out_n_vocab) *out_n_vocab = session->session->n_vocab();
        *out_logits = l;
        if (!l) fail(EMBER_ERR_INVALID_STATE, "no logits: nothing was fed since the session was created or truncated");
        return EMBER_OK;
    });
}

ember_status ember_session_position(const ember_session *session, uint32_t *out_position) {
    return guard("ember_session_position", [&] {
        EMBER_REQUIRE_ARG(session);
        const abi::ExclusiveUse use_session = abi::claim(session, "ember_session_position");
        EMBER_REQUIRE_ARG(out_position);
        *out_position = session->session->position();
        return EMBER_OK;
    });
}

ember_status ember_session_context_length(const ember_session *session, uint32_t *out_n_ctx) {
    return guard("ember_session_context_length", [&] {
        EMBER_REQUIRE_ARG(session);
        EMBER_REQUIRE_ARG(out_n_ctx);
        *out_n_ctx = session->session->n_ctx();
        return EMBER_OK;
    });
}

ember_status ember_session_backend(const ember_session *session, ember_backend_kind *out_backend,
                                   uint32_t *out_n_threads) {
    return guard("ember_session_backend", [&] {
        EMBER_REQUIRE_ARG(session);
        const ember_backend_kind kind = session->session->backend_kind();
        if (out_backend) *out_backend = kind;
        if (out_n_threads)
            *out_n_threads = kind != EMBER_BACKEND_CPU ? 0 : session->n_threads ? session->n_threads : default_thread_count();
        return EMBER_OK;
    });
}

ember_status ember_session_device(const ember_session *session, const ember_device **out_device) {
    return guard("ember_session_device", [&] {
        EMBER_REQUIRE_ARG(session);
        EMBER_REQUIRE_ARG(out_device);
        *out_device = abi::device_in_use(session->session->backend_kind());
        return EMBER_OK;
    });
}

ember_status ember_session_set_precision(ember_session *session, ember_precision precision) {
    return guard("ember_session_set_precision", [&] {
        EMBER_REQUIRE_ARG(session);
        const abi::ExclusiveUse use_session = abi::enter(session, "ember_session_set_precision");
        const int64_t v = abi::enum_value(precision);
        if (v < EMBER_PRECISION_DEFAULT || v > EMBER_PRECISION_HIGH)
            fail(EMBER_ERR_INVALID_ARGUMENT, "unknown precision %lld", (long long)v);
        session->session->set_precision(static_cast<uint32_t>(v));
        return EMBER_OK;
    });
}

uint32_t ember_default_thread_count(void) {
    try {
        return default_thread_count();
    } catch (...) {   // nothing may cross the C boundary; the count reads /sys, which could fail to allocate
        return 1;
    }
}

ember_status ember_session_truncate(ember_session *session, uint32_t n_tokens) {
    return guard("ember_session_truncate", [&] {
        EMBER_REQUIRE_ARG(session);
        const abi::ExclusiveUse use_session = abi::enter(session, "ember_session_truncate");
        session->session->truncate(n_tokens);
        return EMBER_OK;
    });
}

ember_status ember_session_save(const ember_session *session, void *buf, size_t capacity, size_t *out_len) {
    return guard("ember_session_save", [&] {
        EMBER_REQUIRE_ARG(session);
        const abi::ExclusiveUse use_session = abi::enter(session, "ember_session_save");
        EMBER_REQUIRE_ARG(out_len);
        const std::vector<uint8_t> bytes = session->session->save();
        return abi::copy_out(std::string_view(reinterpret_cast<const char *>(bytes.data()), bytes.size()), buf, capacity,
                             out_len, false);
    });
}

ember_status ember_session_restore(ember_session *session, const void *data, size_t size) {
    return guard("ember_session_restore", [&] {
        EMBER_REQUIRE_ARG(session);
        const abi::ExclusiveUse use_session = abi::enter(session, "ember_session_restore");
        if (!data && size) fail(EMBER_ERR_INVALID_ARGUMENT, "data is NULL but size is %zu", size);
        session->session->restore(static_cast<const uint8_t *>(data), size);
        return EMBER_OK;
    });
}

ember_status ember_session_save_file(const ember_session *session, const char *path) {
    return guard("ember_session_save_file", [&] {
        EMBER_REQUIRE_ARG(session);
        const abi::ExclusiveUse use_session = abi::enter(session, "ember_session_save_file");
        EMBER_REQUIRE_ARG(path);
        const std::vector<uint8_t> bytes = session->session->save();
        std::ofstream f(path, std::ios::binary | std::ios::trunc);
        f.write(reinterpret_cast<const char *>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
        f.close();
        if (!f) fail(EMBER_ERR_IO, "cannot write '%s'", path);
        return EMBER_OK;
    });
}

ember_status ember_session_restore_file(ember_session *session, const char *path) {
    return guard("ember_session_restore_file", [&] {
        EMBER_REQUIRE_ARG(session);
        const abi::ExclusiveUse use_session = abi::enter(session, "ember_session_restore_file");
        EMBER_REQUIRE_ARG(path);
        session->session->restore_file(path);
        return EMBER_OK;
    });
}

} // extern "C"
