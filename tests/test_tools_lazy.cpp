// test_tools_lazy.cpp — tool_choice auto's lazy grammar on a real model (stories15M, seeded sampling at
// temperature 1.0): while the call opener does not appear the tokens are those drawn without a grammar
// and the grammar computes no mask; once the opener is written (here forced, split over several of the
// model's tokens, since a story model never writes it) 100 of 100 generations end by end-of-generation
// with a call the parser reads and whose arguments validate against the tool's schema, the text before
// it being content. A fifth of each in sanitizer builds, so the test takes seconds.
#include "tools_model_fixture.hpp"

#include "core/error.hpp"
#include "grammar/grammar.hpp"
#include "json_schema_validator.hpp"
#include "model/model.hpp"
#include "session/session.hpp"
#include "tools/tool_grammar.hpp"
#include "tools/tool_parser.hpp"

#include <string>
#include <vector>

using namespace ember;
using namespace ember::tools;
using namespace tools_fixture;

namespace {

// tool_choice auto's grammar for stories15M, whose vocabulary has no control token for any opener (so
// each opener is a trigger word).
std::shared_ptr<grammar::CompiledGrammar> auto_grammar(Format format, bool parallel) {
    const ToolGrammar tg = tool_grammar(format, npc_tools(), ToolChoice::Auto, "", parallel);
    assert_true(tg.prefix.empty());
    assert_true(tg.trigger_tokens.empty());
    auto g = std::make_shared<grammar::CompiledGrammar>(grammar::parse_gbnf(tg.gbnf), g_fx->vocab);
    grammar::GrammarTriggers t;
    t.words = tg.trigger_words;
    t.once = tg.once;
    g->set_triggers(t);
    return g;
}

const std::string &piece(int32_t id) { return g_fx->vocab->pieces[static_cast<size_t>(id)]; }

SamplerParams seeded(uint64_t seed) {
    SamplerParams p;
    p.temperature = 1.0f;
    p.seed = seed;
    return p;
}

// Free text: with the lazy grammar attached the same tokens as without it, and no grammar work.
void test_free_text_is_unconstrained(void **) {
    for (Format f : {Format::Hermes, Format::Llama3}) {
        auto g = auto_grammar(f, true);
        for (uint64_t seed = 1; seed <= 3; ++seed) {
            std::vector<int32_t> runs[2];
            for (int with = 0; with < 2; ++with) {
                restart();
                Sampler sampler(seeded(seed));
                if (with) sampler.set_grammar(g);
                for (int i = 0; i < 60; ++i) {
                    GenStep step = g_fx->session->next(sampler);
                    runs[with].push_back(step.token);
                    if (with) assert_false(sampler.constrained());
                    if (step.end_of_generation) break;
                }
            }
            if (runs[0] != runs[1]) fail_msg("%s, seed %llu: the lazy grammar changed free text", format_name(f), (unsigned long long)seed);
        }
        const grammar::CompiledGrammar::Stats st = g->stats();
        assert_int_equal(st.masks_computed, 0);
        assert_int_equal(st.trie_nodes_visited, 0);
    }
}

// Free text, then the opener (forced, as the model's tokenizer splits it), then sampling until the end.
void calls_after_trigger(Format format, const std::string &opener, bool parallel, int samples) {
    const int n = samples / kDivisor;
    const std::vector<Tool> tools = npc_tools();
    auto g = auto_grammar(format, parallel);
    const std::vector<int32_t> forced = g_fx->model->tokenizer().tokenize(opener, false, false);
    assert_true(forced.size() >= 2);   // the trigger spans tokens
    size_t n_calls = 0;
    for (int i = 0; i < n; ++i) {
        restart();
        Session &s = *g_fx->session;
        Sampler sampler(seeded(900 + static_cast<uint64_t>(i)));
        sampler.set_grammar(g);
        std::string text;
        for (int k = 0; k < 6; ++k) {
            GenStep step = s.next(sampler);
            if (step.end_of_generation) break;
            text += piece(step.token);
        }
        const std::string free_text = text;
        for (size_t k = 0; k < forced.size(); ++k) {
            if (sampler.constrained()) fail_msg("constrained before the opener was complete");
            sampler.accept(forced[k]);
            text += piece(forced[k]);
        }
        s.feed(forced.data(), forced.size());
        if (!sampler.constrained()) fail_msg("%s: the opener did not switch the grammar on: '%s'", format_name(format), text.c_str());
        // once (not parallel): the reply ends after the call. Otherwise free text resumes after it
        // (and the generation is stopped there).
        bool ended = false;
        for (int k = 0; k < 1000 && !ended; ++k) {
            GenStep step = s.next(sampler);
            ended = step.end_of_generation || (parallel && !sampler.constrained());
            if (!step.end_of_generation) text += piece(step.token);
        }
        if (!ended) fail_msg("%s, sample %d: no end within 1000 tokens: %s", format_name(format), i, text.c_str());
        ToolCallParser parser(format, {});
        parser.feed(text);
        parser.finish();
        const ParseResult &r = parser.result();
        if (r.malformed || r.calls.empty() || (!parallel && r.calls.size() != 1))
            fail_msg("%s, sample %d: '%s' gave %zu calls, content '%s'", format_name(format), i, text.c_str(), r.calls.size(),
                     r.content.c_str());
        // The text before the call is content (the parser trims the whitespace around it).
        const size_t b = free_text.find_first_not_of(" \n"), e = free_text.find_last_not_of(" \n");
        const std::string core = b == std::string::npos ? "" : free_text.substr(b, e + 1 - b);
        if (r.content.find(core) == std::string::npos)
            fail_msg("%s, sample %d: the text before the call '%s' is not content ('%s')", format_name(format), i,
                     free_text.c_str(), r.content.c_str());
        for (const ToolCall &c : r.calls) {
            expect_valid_call(tools, c);
        }
        n_calls += r.calls.size();
    }
    print_message("%s auto: %d of %d generations made valid calls after the opener, %zu calls\n", format_name(format), n, n,
                  n_calls);
}

void test_calls_after_trigger(void **) {
    calls_after_trigger(Format::Hermes, "<tool_call>", false, 100);
    calls_after_trigger(Format::Hermes, "<tool_call>", true, 5);
    calls_after_trigger(Format::Mistral, "[TOOL_CALLS]", true, 5);
    calls_after_trigger(Format::Granite, "<|tool_call|>", false, 5);
}

// An opener whose token goes on with text the call's grammar refuses ("<tool_call" then a token ">x..."
// where the grammar wants "\n") leaves the text free: the sampler would not have refused that token, and
// the parser keeps the unparsable call as content (malformed), as without a grammar.
void test_malformed_call_is_content(void **) {
    auto g = auto_grammar(Format::Hermes, true);
    const Tokenizer &tok = g_fx->model->tokenizer();
    int32_t refused = -1;
    for (int32_t id = 0; id < g_fx->vocab->n_vocab && refused < 0; ++id)
        if (piece(id).size() >= 2 && piece(id)[0] == '>' && piece(id)[1] != '\n') refused = id;
    assert_true(refused >= 0);
    std::vector<int32_t> ids = tok.tokenize("Then <tool_call", false, false);
    ids.push_back(refused);
    for (int32_t id : tok.tokenize("{oops} he left.", false, false)) ids.push_back(id);
    grammar::GrammarMatcher m(g);
    std::string text;
    for (int32_t id : ids) {
        m.accept(id);
        assert_false(m.constraining());
        text += piece(id);
    }
    ToolCallParser parser(Format::Hermes, {});
    parser.feed(text);
    parser.finish();
    assert_true(parser.result().malformed);
    assert_true(parser.result().calls.empty());
    assert_true(parser.result().content.find("<tool_call" + piece(refused)) != std::string::npos);
}

} // namespace

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_free_text_is_unconstrained),
        cmocka_unit_test(test_calls_after_trigger),
        cmocka_unit_test(test_malformed_call_is_content),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
