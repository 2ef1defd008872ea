// api_generate.cpp — pull (one token per call) and streaming generation.
#include "abi/handles.hpp"

#include <cstring>

using namespace ember;
using ember::abi::guard;

extern "C" {

ember_status ember_generate_next(ember_session *session, ember_sampler *sampler, ember_token *out_token,
                                 const char **out_text, size_t *out_text_len) {
    return guard("ember_generate_next", [&] {
        EMBER_REQUIRE_ARG(session);
        EMBER_REQUIRE_ARG(sampler);
        EMBER_REQUIRE_ARG(out_token);
        GenStep step = session->session->next(*sampler->sampler);
        session->text = std::move(step.text);
        *out_token = step.token;
        if (out_text) *out_text = session->text.c_str();
        if (out_text_len) *out_text_len = session->text.size();
        return step.end_of_generation ? EMBER_END_OF_GENERATION : EMBER_OK;
    });
}

void ember_generate_params_init(ember_generate_params *params) {
    if (!params) return;
    std::memset(params, 0, sizeof *params);
    params->struct_size = sizeof *params;
    params->max_tokens = 128;
}

ember_status ember_generate(ember_session *session, ember_sampler *sampler, const ember_generate_params *params,
                            size_t *out_count) {
    if (out_count) *out_count = 0;
    return guard("ember_generate", [&] {
        EMBER_REQUIRE_ARG(session);
        EMBER_REQUIRE_ARG(sampler);
        const ember_generate_params p = abi::read_params(params, sizeof(ember_generate_params), ember_generate_params_init,
                                                         "ember_generate_params");
        size_t count = 0;
        for (;;) {
            if (p.max_tokens && count >= p.max_tokens) return EMBER_OK;
            GenStep step = session->session->next(*sampler->sampler);
            ++count;
            if (out_count) *out_count = count;
            const bool go_on = !p.on_token || p.on_token(step.token, step.text.c_str(), step.text.size(), p.user_data);
            if (step.end_of_generation) return EMBER_END_OF_GENERATION;
            if (!go_on) return EMBER_STOPPED;
        }
    });
}

} // extern "C"
