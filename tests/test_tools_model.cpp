// test_tools_model.cpp — tool_choice on a real model: seeded generations sampled at temperature 1.0 on
// stories15M under tool_choice required and named end by end-of-generation and parse into calls (the
// parser of the same format) whose arguments validate against their tool's schema
// (tests/json_schema_validator.hpp): 100 of 100 for Hermes/Qwen required, fewer for the other formats
// and for parallel calls (a fifth of each in sanitizer builds), so the test takes seconds, not minutes.
#include "tools_model_fixture.hpp"

#include "core/error.hpp"
#include "grammar/grammar.hpp"
#include "json_schema_validator.hpp"
#include "model/model.hpp"
#include "session/session.hpp"
#include "tools/tool_grammar.hpp"
#include "tools/tool_parser.hpp"

#include <chrono>
#include <string>
#include <vector>

using namespace ember;
using namespace ember::tools;
using namespace tools_fixture;
using grammar::JsonValue;

namespace {

constexpr uint32_t kMaxTokens = 1000;

bool generate(const std::shared_ptr<grammar::CompiledGrammar> &g, uint64_t seed, std::string &text) {
    restart();
    Session &s = *g_fx->session;
    SamplerParams p;
    p.temperature = 1.0f;
    p.seed = seed;
    Sampler sampler(p);
    sampler.set_grammar(g);
    text.clear();
    for (uint32_t i = 0; i < kMaxTokens; ++i) {
        GenStep step = s.next(sampler);
        text += step.text;
        if (step.end_of_generation) return true;
    }
    return false;
}

void run(Format format, ToolChoice choice, const std::string &name, bool parallel, int samples) {
    const int kSamples = samples / kDivisor;
    const std::vector<Tool> tools = npc_tools();
    const ToolGrammar tg = tool_grammar(format, tools, choice, name, parallel);
    auto g = std::make_shared<grammar::CompiledGrammar>(grammar::parse_gbnf(tg.gbnf), g_fx->vocab);
    const auto t0 = std::chrono::steady_clock::now();
    size_t n_calls = 0;
    for (int i = 0; i < kSamples; ++i) {
        std::string text;
        if (!generate(g, 500 + static_cast<uint64_t>(i), text))
            fail_msg("%s, sample %d: no end of generation within %u tokens: %s", format_name(format), i, kMaxTokens, text.c_str());
        ToolCallParser parser(format, {});
        parser.feed(tg.prefix + text);
        parser.finish();
        const ParseResult &r = parser.result();
        if (r.malformed || r.calls.empty() || !r.content.empty() || (!parallel && r.calls.size() != 1))
            fail_msg("%s, sample %d: '%s' gave %zu calls, content '%s'", format_name(format), i, text.c_str(), r.calls.size(),
                     r.content.c_str());
        for (const ToolCall &c : r.calls) {
            if (choice == ToolChoice::Named && c.name != name) fail_msg("a call to %s, not %s", c.name.c_str(), name.c_str());
            expect_valid_call(tools, c);
        }
        n_calls += r.calls.size();
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    print_message("%s %s%s: %d of %d generations valid, %zu calls (%.1f s)\n", format_name(format),
                  choice == ToolChoice::Named ? name.c_str() : "required", parallel ? " (parallel)" : "", kSamples,
                  kSamples, n_calls, s);
}

void test_required(void **) {
    run(Format::Hermes, ToolChoice::Required, "", false, 100);
    run(Format::Llama3, ToolChoice::Required, "", false, 20);
    run(Format::Mistral, ToolChoice::Required, "", true, 10);
}

void test_named(void **) {
    run(Format::Hermes, ToolChoice::Named, "walk", false, 20);
    run(Format::GptOss, ToolChoice::Named, "say", false, 20);
    run(Format::Granite, ToolChoice::Named, "open_door", false, 20);
}

} // namespace

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_required),
        cmocka_unit_test(test_named),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
