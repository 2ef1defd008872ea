// api_grammar.cpp — grammars (GBNF and JSON Schema) and sampler logprobs through the C ABI.
#include "abi/handles.hpp"

#include "grammar/json_schema.hpp"

#include <algorithm>
#include <cstring>
#include <string>

using namespace ember;
using ember::abi::guard;

namespace {

// What a lazy grammar computes ahead at its creation (CompiledGrammar::prepare): the masks of up to 1024
// states, at most 8 MiB of them (a quarter of the grammar's mask cache; 420 masks of a 152k vocabulary).
constexpr size_t kPreparedStates = 1024, kPreparedBytes = size_t(8) << 20;

std::shared_ptr<const grammar::GrammarVocab> vocab_of(const ember_model &m) {
    std::lock_guard<std::mutex> lock(m.grammar_vocab_mutex);
    if (!m.grammar_vocab) m.grammar_vocab = grammar::GrammarVocab::from_tokenizer(m.model->tokenizer());
    return m.grammar_vocab;
}

void triggers_defaults(ember_grammar_triggers *t) {
    std::memset(t, 0, sizeof *t);
    t->struct_size = sizeof *t;
}

grammar::GrammarTriggers read_triggers(const ember_grammar_triggers *user) {
    EMBER_REQUIRE_ARG(user);
    const ember_grammar_triggers t = abi::read_params(user, sizeof(ember_grammar_triggers), triggers_defaults, "ember_grammar_triggers");
    if (!t.words && t.n_words) fail(EMBER_ERR_INVALID_ARGUMENT, "triggers.words is NULL but n_words is %zu", t.n_words);
    if (!t.tokens && t.n_tokens) fail(EMBER_ERR_INVALID_ARGUMENT, "triggers.tokens is NULL but n_tokens is %zu", t.n_tokens);
    if (t.n_words == 0 && t.n_tokens == 0) fail(EMBER_ERR_INVALID_ARGUMENT, "a lazy grammar needs at least one trigger");
    // Counts checked before anything is read: they are the caller's and may be anything.
    if (t.n_words > grammar::GrammarTriggers::kMaxWords || t.n_tokens > grammar::GrammarTriggers::kMaxTokens)
        fail(EMBER_ERR_INVALID_ARGUMENT, "%zu trigger words and %zu tokens, more than %zu of each", t.n_words, t.n_tokens,
             grammar::GrammarTriggers::kMaxWords);
    grammar::GrammarTriggers out;
    for (size_t i = 0; i < t.n_words; ++i) {
        if (!t.words[i]) fail(EMBER_ERR_INVALID_ARGUMENT, "triggers.words[%zu] is NULL", i);
        const size_t n = strnlen(t.words[i], grammar::GrammarTriggers::kMaxWordBytes + 1);
        out.words.emplace_back(t.words[i], n);   // a word too long is refused by check()
    }
    out.tokens.assign(t.tokens, t.tokens + t.n_tokens);
    out.once = t.once;
    return out;
}

ember_status create(const char *fn, const ember_model *model, const char *text, size_t len, ember_grammar **out,
                    bool json_schema, bool lazy = false, const ember_grammar_triggers *triggers = nullptr) {
    if (out) *out = nullptr;
    return guard(fn, [&] {
        EMBER_REQUIRE_ARG(model);
        EMBER_REQUIRE_ARG(out);
        if (!text && len) fail(EMBER_ERR_INVALID_ARGUMENT, "the text is NULL but len is %zu", len);
        // Before the copy: len is the caller's and may be anything.
        if (len > grammar::GrammarLimits::kMaxTextBytes)
            fail(EMBER_ERR_INVALID_ARGUMENT, "the %s is %zu bytes, more than the limit of %zu", json_schema ? "schema" : "grammar",
                 len, grammar::GrammarLimits::kMaxTextBytes);
        const grammar::GrammarTriggers trig = lazy ? read_triggers(triggers) : grammar::GrammarTriggers{};
        const std::string src(text ? text : "", len);
        const std::string gbnf = json_schema ? grammar::json_schema_to_gbnf(std::string_view(src)) : src;
        auto h = std::make_unique<ember_grammar>();
        h->grammar = std::make_shared<grammar::CompiledGrammar>(grammar::parse_gbnf(gbnf), vocab_of(*model));
        if (lazy) {
            h->grammar->set_triggers(trig);
            // A lazy grammar's masks are computed now rather than in its first call's decoding steps:
            // creating it is the moment the app expects to pay for it (a tool grammar is made once per
            // conversation or tool set and kept), while a call that pays is a slower reply.
            h->grammar->prepare(kPreparedStates, kPreparedBytes);
        }
        *out = h.release();
        return EMBER_OK;
    });
}

void copy_logprobs(const TokenLogprob &sampled_in, const std::vector<TokenLogprob> &top_in, ember_token_logprob *sampled,
                   ember_token_logprob *top, size_t capacity, size_t *out_count) {
    if (sampled) *sampled = {sampled_in.id, sampled_in.logprob};
    if (top)
        for (size_t i = 0; i < std::min(capacity, top_in.size()); ++i) top[i] = {top_in[i].id, top_in[i].logprob};
    if (out_count) *out_count = top_in.size();
}

} // namespace

namespace ember::abi {
void request_logprobs_out(const TokenLogprob &s, const std::vector<TokenLogprob> &t, ember_token_logprob *sampled,
                          ember_token_logprob *top, size_t capacity, size_t *out_count) {
    copy_logprobs(s, t, sampled, top, capacity, out_count);
}
} // namespace ember::abi

extern "C" {

ember_status ember_grammar_create_gbnf(const ember_model *model, const char *gbnf, size_t len, ember_grammar **out) {
    return create("ember_grammar_create_gbnf", model, gbnf, len, out, false);
}

ember_status ember_grammar_create_json_schema(const ember_model *model, const char *schema, size_t len, ember_grammar **out) {
    return create("ember_grammar_create_json_schema", model, schema, len, out, true);
}

void ember_grammar_triggers_init(ember_grammar_triggers *triggers) {
    if (triggers) triggers_defaults(triggers);
}

ember_status ember_grammar_create_lazy(const ember_model *model, const char *gbnf, size_t len,
                                       const ember_grammar_triggers *triggers, ember_grammar **out) {
    return create("ember_grammar_create_lazy", model, gbnf, len, out, false, true, triggers);
}

ember_status ember_sampler_grammar_constraining(const ember_sampler *sampler, bool *out_constraining) {
    if (out_constraining) *out_constraining = false;
    return guard("ember_sampler_grammar_constraining", [&] {
        EMBER_REQUIRE_ARG(sampler);
        EMBER_REQUIRE_ARG(out_constraining);
        const abi::ExclusiveUse use_sampler = abi::claim(sampler, "ember_sampler_grammar_constraining");
        *out_constraining = sampler->sampler->constrained();
        return EMBER_OK;
    });
}

void ember_grammar_free(ember_grammar *grammar) { delete grammar; }

ember_status ember_grammar_memory(const ember_grammar *grammar, size_t *out_bytes) {
    if (out_bytes) *out_bytes = 0;
    return guard("ember_grammar_memory", [&] {
        EMBER_REQUIRE_ARG(grammar);
        EMBER_REQUIRE_ARG(out_bytes);
        *out_bytes = grammar->grammar->bytes();
        return EMBER_OK;
    });
}

ember_status ember_sampler_set_grammar(ember_sampler *sampler, const ember_grammar *grammar) {
    return guard("ember_sampler_set_grammar", [&] {
        EMBER_REQUIRE_ARG(sampler);
        // From ember_generate's callback the running generation is using the sampler's grammar.
        const abi::ExclusiveUse use_sampler = abi::enter(sampler, "ember_sampler_set_grammar");
        sampler->sampler->set_grammar(grammar ? grammar->grammar : nullptr);
        return EMBER_OK;
    });
}

ember_status ember_sampler_logprobs(const ember_sampler *sampler, ember_token_logprob *sampled, ember_token_logprob *top,
                                    size_t capacity, size_t *out_count) {
    if (out_count) *out_count = 0;
    return guard("ember_sampler_logprobs", [&] {
        EMBER_REQUIRE_ARG(sampler);
        const abi::ExclusiveUse use_sampler = abi::claim(sampler, "ember_sampler_logprobs");
        if (!top && capacity) fail(EMBER_ERR_INVALID_ARGUMENT, "top is NULL but capacity is %zu", capacity);
        const Sampler &s = *sampler->sampler;
        if (s.params().n_logprobs == 0) fail(EMBER_ERR_INVALID_STATE, "the sampler records no logprobs (n_logprobs is 0)");
        if (s.last_logprob().id < 0) fail(EMBER_ERR_INVALID_STATE, "nothing sampled yet");
        copy_logprobs(s.last_logprob(), s.last_top_logprobs(), sampled, top, capacity, out_count);
        return EMBER_OK;
    });
}

} // extern "C"
