// test_structured_model.cpp — structured output on a real model: for every case of structured_cases.hpp
// (nested objects, arrays, enums, numbers, recursion, alternatives) and a recursive GBNF grammar, 50
// generations (10 in sanitizer builds) sampled at temperature 1.0 on stories15M all end by end-of-generation and parse and
// validate (our own validator, tests/json_schema_validator.hpp; for the GBNF a checker of its own).
#include "test_util.h"

#include "core/error.hpp"
#include "grammar/grammar.hpp"
#include "grammar/json_schema.hpp"
#include "json_schema_validator.hpp"
#include "model/model.hpp"
#include "session/session.hpp"
#include "structured_cases.hpp"

#include <chrono>
#include <functional>
#include <string>
#include <vector>

using namespace ember;
using namespace ember::grammar;

namespace {

// In sanitizer builds (tests/CMakeLists.txt) 10: there the point is the memory checks, and 50 samples
// of each case took 7 of CI's minutes under ASan on a slow machine.
#if defined(EMBER_TEST_SANITIZED)
constexpr int kSamples = 10;
#else
constexpr int kSamples = 50;
#endif
constexpr uint32_t kMaxTokens = 1500;

struct Fixture {
    std::unique_ptr<Model> model;
    std::unique_ptr<Session> session;
    std::vector<float> prompt_logits;
    uint32_t n_prompt = 0;
    std::shared_ptr<const GrammarVocab> vocab;
};
Fixture *g_fx;

int setup(void **) {
    const char *path = test_find_model("stories15M-q8_0.gguf", "stories15M/stories15M-q8_0.gguf");
    test_require(path, "stories15M-q8_0.gguf");
    g_fx = new Fixture;
    g_fx->model = Model::load(path, LoadOptions{});
    SessionOptions o;
    o.n_ctx = 2048;
    g_fx->session = std::make_unique<Session>(*g_fx->model, o);
    const auto prompt = g_fx->model->tokenizer().tokenize("Once upon a time", true, false);
    g_fx->session->feed(prompt.data(), prompt.size());
    g_fx->n_prompt = static_cast<uint32_t>(prompt.size());
    g_fx->prompt_logits.assign(g_fx->session->logits(), g_fx->session->logits() + g_fx->session->n_vocab());
    g_fx->vocab = GrammarVocab::from_tokenizer(g_fx->model->tokenizer());
    return 0;
}

int teardown(void **) {
    delete g_fx;
    return 0;
}

// One sampled generation from the prompt under the grammar; false if it ran out of tokens.
bool generate(const std::shared_ptr<CompiledGrammar> &g, uint64_t seed, std::string &text) {
    Session &s = *g_fx->session;
    s.truncate(g_fx->n_prompt, g_fx->prompt_logits.data());
    s.text_of(g_fx->model->tokenizer().eos());   // an end token flushes what the previous sample left in the text stream
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

void run_case(const char *name, const std::shared_ptr<CompiledGrammar> &g,
              const std::function<std::string(const std::string &)> &check) {
    const auto t0 = std::chrono::steady_clock::now();
    std::string longest;
    for (int i = 0; i < kSamples; ++i) {
        std::string text;
        if (!generate(g, 1000 + static_cast<uint64_t>(i), text))
            fail_msg("%s, sample %d: no end of generation within %u tokens: %s", name, i, kMaxTokens, text.c_str());
        const std::string why = check(text);
        if (!why.empty()) fail_msg("%s, sample %d: '%s': %s", name, i, text.c_str(), why.c_str());
        if (text.size() > longest.size()) longest = text;
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    print_message("%s: %d samples valid (%.1f s); the longest: %s\n", name, kSamples, s, longest.c_str());
}

} // namespace

static void test_schemas_sampled(void **) {
    for (const auto &c : structured_cases::kSchemas) {
        const JsonValue schema = parse_json(c.schema);
        auto g = std::make_shared<CompiledGrammar>(parse_gbnf(json_schema_to_gbnf(schema)), g_fx->vocab);
        run_case(c.name, g, [&](const std::string &text) -> std::string {
            try {
                return test_schema::validate(parse_json(text), schema, schema);
            } catch (const Error &e) {
                return std::string("not JSON: ") + e.what();
            }
        });
    }
}

// Balanced, well-formed arithmetic: checked by a recursive-descent reader of its own.
namespace arith {
bool expr(const std::string &s, size_t &i, int depth);
bool term(const std::string &s, size_t &i, int depth) {
    if (i < s.size() && s[i] == '(') {
        ++i;
        if (!expr(s, i, depth + 1) || i >= s.size() || s[i] != ')') return false;
        ++i;
        return true;
    }
    const size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i > start && i - start <= 3;
}
bool expr(const std::string &s, size_t &i, int depth) {
    if (depth > 300 || !term(s, i, depth)) return false;
    while (i < s.size() && (s[i] == '+' || s[i] == '*')) {
        ++i;
        if (!term(s, i, depth)) return false;
    }
    return true;
}
} // namespace arith

static void test_recursive_gbnf_sampled(void **) {
    const char *gbnf = "root ::= expr\n"
                       "expr ::= term ( [+*] term ){0,3}\n"
                       "term ::= [0-9]{1,3} | \"(\" expr \")\"\n";
    auto g = std::make_shared<CompiledGrammar>(parse_gbnf(gbnf), g_fx->vocab);
    run_case("arithmetic", g, [](const std::string &text) -> std::string {
        size_t i = 0;
        return arith::expr(text, i, 0) && i == text.size() ? "" : "not a well-formed expression";
    });
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schemas_sampled),
        cmocka_unit_test(test_recursive_gbnf_sampled),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
