// api_generate.cpp — pull (one token per call) and streaming generation.
#include "abi/handles.hpp"

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

using namespace ember;
using ember::abi::guard;

extern "C" {

ember_status ember_generate_next(ember_session *session, ember_sampler *sampler, ember_token *out_token,
                                 const char **out_text, size_t *out_text_len) {
    return guard("ember_generate_next", [&] {
        EMBER_REQUIRE_ARG(session);
        const abi::ExclusiveUse use_session = abi::enter(session, "ember_generate_next");
        EMBER_REQUIRE_ARG(sampler);
        EMBER_REQUIRE_ARG(out_token);
        const abi::ExclusiveUse use_sampler = abi::enter(sampler, "ember_generate_next");
        if (session->cancel_sticky.load(std::memory_order_relaxed) && session->cancel.load(std::memory_order_relaxed)) {
            *out_token = -1;   // an armed session's pending cancel (ember_session_cancel_arm)
            if (out_text) *out_text = "";
            if (out_text_len) *out_text_len = 0;
            return EMBER_STOPPED;
        }
        StopStrings &stop = session->next_stop;
        if (session->session->position() != session->next_stop_position) stop.restart();
        GenStep step = session->session->next(*sampler->sampler);
        session->text = stop.push(step.text);
        if (step.end_of_generation) session->text += stop.finish();
        const bool ended = step.end_of_generation || stop.stopped();
        if (ended) stop.restart();   // the next step begins a new text
        session->next_stop_position = session->session->position();
        *out_token = step.token;
        if (out_text) *out_text = session->text.c_str();
        if (out_text_len) *out_text_len = session->text.size();
        return ended ? EMBER_END_OF_GENERATION : EMBER_OK;
    });
}

ember_status ember_session_set_stop(ember_session *session, const char *const *stop, size_t n_stop) {
    return guard("ember_session_set_stop", [&] {
        EMBER_REQUIRE_ARG(session);
        const abi::ExclusiveUse use_session = abi::enter(session, "ember_session_set_stop");
        session->next_stop = abi::stop_strings_from(stop, n_stop);   // validated before anything changes
        return EMBER_OK;
    });
}

ember_status ember_session_flush_stop(ember_session *session, const char **out_text, size_t *out_text_len) {
    return guard("ember_session_flush_stop", [&] {
        EMBER_REQUIRE_ARG(session);
        const abi::ExclusiveUse use_session = abi::enter(session, "ember_session_flush_stop");
        session->text = session->next_stop.finish();
        session->next_stop.restart();
        if (out_text) *out_text = session->text.c_str();
        if (out_text_len) *out_text_len = session->text.size();
        return EMBER_OK;
    });
}

} // extern "C"

namespace {
// What a caller built against EMBER_1 passes (struct_size 24): the fields before `speculate`; against
// EMBER_1.2, 32 bytes: up to the grammar.
constexpr uint32_t kGenerateParamsV1Size = offsetof(ember_generate_params, speculate);
constexpr uint32_t kGenerateParamsV1_2Size = offsetof(ember_generate_params, grammar);
ember_generate_params generate_params_defaults() {
    ember_generate_params p;
    std::memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.max_tokens = 128;
    p.speculate = true;
    return p;
}
} // namespace

EMBER_GROWN_TWICE_PARAMS_INIT_AT(ember_generate_params, ember_generate_params_init, generate_params_defaults,
                                 kGenerateParamsV1Size, kGenerateParamsV1_2Size, 1_2, "EMBER_1.2", 1_4, "EMBER_1.4");

namespace ember::abi {
StopStrings stop_strings_from(const char *const *stop, size_t n_stop) {
    if (!stop && n_stop) fail(EMBER_ERR_INVALID_ARGUMENT, "stop is NULL but n_stop is %zu", n_stop);
    if (n_stop > StopStrings::kMaxCount) fail(EMBER_ERR_INVALID_ARGUMENT, "%zu stop strings, more than %zu", n_stop, StopStrings::kMaxCount);
    std::vector<std::string> v;
    for (size_t i = 0; i < n_stop; ++i) {
        if (!stop[i]) fail(EMBER_ERR_INVALID_ARGUMENT, "stop[%zu] is NULL", i);
        v.emplace_back(stop[i], strnlen(stop[i], StopStrings::kMaxBytes + 1));
    }
    return StopStrings(std::move(v));
}
} // namespace ember::abi

namespace {
// Puts a grammar on the sampler for one call and the sampler's own back afterwards.
class CallGrammar {
public:
    CallGrammar(Sampler &s, const ember_grammar *g) : s_(s), active_(g != nullptr) {
        if (!active_) return;
        saved_ = s.matcher_shared();
        s.set_grammar(g->grammar);
    }
    ~CallGrammar() {
        if (active_) s_.set_matcher(std::move(saved_));
    }

private:
    Sampler &s_;
    bool active_;
    std::shared_ptr<grammar::GrammarMatcher> saved_;
};
} // namespace

extern "C" {

ember_status ember_generate(ember_session *session, ember_sampler *sampler, const ember_generate_params *params,
                            size_t *out_count) {
    if (out_count) *out_count = 0;
    const ember_status status = guard("ember_generate", [&] {
        EMBER_REQUIRE_ARG(session);
        EMBER_REQUIRE_ARG(sampler);
        const abi::ExclusiveUse use_session = abi::enter(session, "ember_generate");
        const abi::ExclusiveUse use_sampler = abi::enter(sampler, "ember_generate");
        const ember_generate_params p = abi::read_params(params, kGenerateParamsV1Size, impl_ember_generate_params_init_1_4,
                                                         "ember_generate_params");
        StopStrings stop = abi::stop_strings_from(p.stop, p.n_stop);
        CallGrammar call_grammar(*sampler->sampler, p.grammar);
        // The text a step passes to on_token: through the stop strings, and on the last step (end of
        // generation or max_tokens) with what they still hold.
        auto text_of = [&](const std::string &text, bool last) {
            std::string out = stop.push(text);
            if (last) out += stop.finish();
            return out;
        };
        // on_token runs while both handles are in use: the calls it may make on them are limited (ember.h).
        const CallbackScope session_scope(session, "ember_generate"), sampler_scope(sampler, "ember_generate");
        size_t count = 0;
        if (abi::cancel_at_entry(*session)) return EMBER_STOPPED;   // armed, and cancelled before the call
        // ember_session_cancel stops after the token being emitted, which the callback still gets; so does
        // freeing the session or the sampler from the callback (done when this call returns).
        auto cancelled = [&] {
            return session->cancel.load(std::memory_order_relaxed) || session->free_pending || sampler->free_pending;
        };
        // A grammar's state follows accepted tokens only, which drafted-then-verified positions are not.
        if (session->spec && p.speculate && !sampler->sampler->has_grammar()) {
            const ember_status st = session->spec->generate(
                *session->session, *sampler->sampler, p.max_tokens, [&](const GenStep &step) {
                    ++count;
                    if (out_count) *out_count = count;
                    const std::string text =
                        text_of(step.text, step.end_of_generation || (p.max_tokens && count >= p.max_tokens));
                    const bool go_on = !p.on_token || p.on_token(step.token, text.c_str(), text.size(), p.user_data);
                    return go_on && !cancelled() && !stop.stopped();
                });
            return stop.stopped() ? EMBER_END_OF_GENERATION : st;
        }
        for (;;) {
            if (p.max_tokens && count >= p.max_tokens) return EMBER_OK;
            GenStep step = session->session->next(*sampler->sampler);
            ++count;
            if (out_count) *out_count = count;
            const std::string text = text_of(step.text, step.end_of_generation || (p.max_tokens && count >= p.max_tokens));
            const bool go_on = !p.on_token || p.on_token(step.token, text.c_str(), text.size(), p.user_data);
            if (step.end_of_generation || stop.stopped()) return EMBER_END_OF_GENERATION;
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
        const abi::ExclusiveUse use_session = abi::enter(session, "ember_session_set_speculation");
        const ember_spec_params p =
            abi::read_params(params, sizeof(ember_spec_params), ember_spec_params_init, "ember_spec_params");
        const int64_t mode = abi::enum_value(p.mode);
        if (mode == EMBER_SPEC_OFF) {
            session->spec.reset();
            session->session->keep_hidden(false);   // (only the MTP draft reads them)
            return EMBER_OK;
        }
        if (mode != EMBER_SPEC_DRAFT && mode != EMBER_SPEC_LOOKUP && mode != EMBER_SPEC_MTP)
            fail(EMBER_ERR_INVALID_ARGUMENT, "unknown speculation mode %lld", (long long)mode);
        if (p.mode == EMBER_SPEC_DRAFT && !p.draft_model)
            fail(EMBER_ERR_INVALID_ARGUMENT, "EMBER_SPEC_DRAFT needs a draft_model");
        spec::SpecOptions o;
        o.draft = p.mode == EMBER_SPEC_DRAFT ? p.draft_model->model.get() : nullptr;
        o.mtp = p.mode == EMBER_SPEC_MTP;
        o.k = p.k;
        o.adaptive = p.adaptive;
        o.k_max = p.k_max;
        o.ngram_max = p.ngram_max;
        // Built before the old one goes, so a failure leaves what was attached.
        session->spec = std::make_unique<spec::Speculator>(*session->session, o,
                                                           p.n_threads ? p.n_threads : session->n_threads);
        if (!o.mtp) session->session->keep_hidden(false);
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
        const abi::ExclusiveUse use_session = abi::claim(session, "ember_session_spec_stats");
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
