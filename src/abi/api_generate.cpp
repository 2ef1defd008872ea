// api_generate.cpp — pull (one token per call) and streaming generation.
#include "abi/handles.hpp"

#include <cstddef>
#include <cstring>

using namespace ember;
using ember::abi::guard;

extern "C" {

ember_status ember_generate_next(ember_session *session, ember_sampler *sampler, ember_token *out_token,
                                 const char **out_text, size_t *out_text_len) {
    return guard("ember_generate_next", [&] {
        EMBER_REQUIRE_ARG(session);
        abi::refuse_reentry(session, "ember_generate_next");
        EMBER_REQUIRE_ARG(sampler);
        EMBER_REQUIRE_ARG(out_token);
        abi::refuse_reentry(sampler, "ember_generate_next");
        if (session->cancel_sticky.load(std::memory_order_relaxed) && session->cancel.load(std::memory_order_relaxed)) {
            *out_token = -1;   // an armed session's pending cancel (ember_session_cancel_arm)
            if (out_text) *out_text = "";
            if (out_text_len) *out_text_len = 0;
            return EMBER_STOPPED;
        }
        GenStep step = session->session->next(*sampler->sampler);
        session->text = std::move(step.text);
        *out_token = step.token;
        if (out_text) *out_text = session->text.c_str();
        if (out_text_len) *out_text_len = session->text.size();
        return step.end_of_generation ? EMBER_END_OF_GENERATION : EMBER_OK;
    });
}

namespace {
// What a caller built against EMBER_1 passes (struct_size 24): the fields before `speculate`.
constexpr uint32_t kGenerateParamsV1Size = offsetof(ember_generate_params, speculate);
ember_generate_params generate_params_defaults() {
    ember_generate_params p;
    std::memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.max_tokens = 128;
    p.speculate = true;
    return p;
}
} // namespace

EMBER_GROWN_PARAMS_INIT_1_2(ember_generate_params, ember_generate_params_init, generate_params_defaults, kGenerateParamsV1Size);

ember_status ember_generate(ember_session *session, ember_sampler *sampler, const ember_generate_params *params,
                            size_t *out_count) {
    if (out_count) *out_count = 0;
    const ember_status status = guard("ember_generate", [&] {
        EMBER_REQUIRE_ARG(session);
        EMBER_REQUIRE_ARG(sampler);
        abi::refuse_reentry(session, "ember_generate");
        abi::refuse_reentry(sampler, "ember_generate");
        const ember_generate_params p = abi::read_params(params, kGenerateParamsV1Size, impl_ember_generate_params_init_1_2,
                                                         "ember_generate_params");
        // on_token runs while both handles are in use: the calls it may make on them are limited (ember.h).
        const CallbackScope session_scope(session, "ember_generate"), sampler_scope(sampler, "ember_generate");
        size_t count = 0;
        if (abi::cancel_at_entry(*session)) return EMBER_STOPPED;   // armed, and cancelled before the call
        // ember_session_cancel stops after the token being emitted, which the callback still gets; so does
        // freeing the session or the sampler from the callback (done when this call returns).
        auto cancelled = [&] {
            return session->cancel.load(std::memory_order_relaxed) || session->free_pending || sampler->free_pending;
        };
        if (session->spec && p.speculate) {
            const ember_status st = session->spec->generate(
                *session->session, *sampler->sampler, p.max_tokens, [&](const GenStep &step) {
                    ++count;
                    if (out_count) *out_count = count;
                    const bool go_on = !p.on_token || p.on_token(step.token, step.text.c_str(), step.text.size(), p.user_data);
                    return go_on && !cancelled();
                });
            return st;
        }
        for (;;) {
            if (p.max_tokens && count >= p.max_tokens) return EMBER_OK;
            GenStep step = session->session->next(*sampler->sampler);
            ++count;
            if (out_count) *out_count = count;
            const bool go_on = !p.on_token || p.on_token(step.token, step.text.c_str(), step.text.size(), p.user_data);
            if (step.end_of_generation) return EMBER_END_OF_GENERATION;
            if (!go_on || cancelled()) return EMBER_STOPPED;
        }
    });
    // A free the callback asked for happens now that nothing uses the handle.
    if (session && session->free_pending) delete session;
    if (sampler && sampler->free_pending) delete sampler;
    return status;
}

void ember_spec_params_init(ember_spec_params *params) {
    if (!params) return;
    std::memset(params, 0, sizeof *params);
    params->struct_size = sizeof *params;
    params->mode = EMBER_SPEC_OFF;
    params->k = 4;
    params->adaptive = true;
    params->k_max = 8;
    params->ngram_max = 3;
}

ember_status ember_session_set_speculation(ember_session *session, const ember_spec_params *params) {
    return guard("ember_session_set_speculation", [&] {
        EMBER_REQUIRE_ARG(session);
        abi::refuse_reentry(session, "ember_session_set_speculation");
        const ember_spec_params p =
            abi::read_params(params, sizeof(ember_spec_params), ember_spec_params_init, "ember_spec_params");
        const int64_t mode = abi::enum_value(p.mode);
        if (mode == EMBER_SPEC_OFF) {
            session->spec.reset();
            return EMBER_OK;
        }
        if (mode != EMBER_SPEC_DRAFT && mode != EMBER_SPEC_LOOKUP)
            fail(EMBER_ERR_INVALID_ARGUMENT, "unknown speculation mode %lld", (long long)mode);
        if (p.mode == EMBER_SPEC_DRAFT && !p.draft_model)
            fail(EMBER_ERR_INVALID_ARGUMENT, "EMBER_SPEC_DRAFT needs a draft_model");
        spec::SpecOptions o;
        o.draft = p.mode == EMBER_SPEC_DRAFT ? p.draft_model->model.get() : nullptr;
        o.k = p.k;
        o.adaptive = p.adaptive;
        o.k_max = p.k_max;
        o.ngram_max = p.ngram_max;
        // Built before the old one goes, so a failure leaves what was attached.
        session->spec = std::make_unique<spec::Speculator>(*session->session, o,
                                                           p.n_threads ? p.n_threads : session->n_threads);
        return EMBER_OK;
    });
}

void ember_spec_stats_init(ember_spec_stats *stats) {
    if (!stats) return;
    std::memset(stats, 0, sizeof *stats);
    stats->struct_size = sizeof *stats;
}

ember_status ember_session_spec_stats(const ember_session *session, ember_spec_stats *stats) {
    return guard("ember_session_spec_stats", [&] {
        EMBER_REQUIRE_ARG(session);
        EMBER_REQUIRE_ARG(stats);
        if (!session->spec) fail(EMBER_ERR_INVALID_STATE, "no speculation is attached to this session");
        const spec::SpecStats &s = session->spec->stats();
        ember_spec_stats full;
        ember_spec_stats_init(&full);
        full.k = session->spec->k();
        full.drafted = s.drafted;
        full.accepted = s.accepted;
        full.target_passes = s.target_passes;
        full.generated = s.generated;
        full.acceptance_rate = s.drafted ? static_cast<double>(s.accepted) / static_cast<double>(s.drafted) : 0.0;
        full.tokens_per_pass = s.target_passes ? static_cast<double>(s.generated) / static_cast<double>(s.target_passes) : 0.0;
        abi::write_out(stats, full, sizeof(ember_spec_stats), "ember_spec_stats");
        return EMBER_OK;
    });
}

} // extern "C"
