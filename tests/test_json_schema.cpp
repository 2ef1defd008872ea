// test_json_schema.cpp — JSON Schema → grammar: errors name the keyword and a JSON pointer; every
// complete random walk through each case's grammar (over a made-up vocabulary) is JSON that our own
// validator accepts; integer ranges are exact.
#include "test_util.h"

#include "core/error.hpp"
#include "grammar/grammar.hpp"
#include "grammar/json_schema.hpp"
#include "json_schema_validator.hpp"
#include "structured_cases.hpp"

#include <random>
#include <string>
#include <vector>

using namespace ember::grammar;

namespace {

std::pair<ember_status, std::string> error_of(const std::string &schema) {
    try {
        parse_gbnf(json_schema_to_gbnf(schema));
    } catch (const ember::Error &e) {
        return {e.status(), e.what()};
    }
    return {EMBER_OK, ""};
}

bool contains(const std::string &s, const std::string &part) { return s.find(part) != std::string::npos; }

// Whether text (whole) is a sentence of the grammar.
bool matches(CompiledGrammar &g, const std::string &text) {
    const int32_t s = g.advance_bytes(g.start(), text);
    return s != GrammarAutomaton::kDead && g.accepts(s);
}

// Every printable ASCII byte, two multi-byte characters, a few multi-character tokens; EOS last.
std::shared_ptr<GrammarVocab> toy_vocab() {
    auto v = std::make_shared<GrammarVocab>();
    for (int c = 0x20; c < 0x7f; ++c) v->pieces.push_back(std::string(1, static_cast<char>(c)));
    for (const char *p : {"é", "✓", "{\"", "\":", "\"}", "true", "null", "12", "\\\"", "\\n", "wave", "\"value\"", "\n"})
        v->pieces.push_back(p);
    v->pieces.push_back("");
    v->n_vocab = static_cast<int32_t>(v->pieces.size());
    v->eog.push_back(v->n_vocab - 1);
    v->trie = TokenTrie::build(v->pieces);
    return v;
}

// A random walk through the grammar: uniformly among the allowed tokens, except that after a while the
// walk prefers to close (EOS, then closing brackets and quotes) so that it ends. Returns false when it
// did not end within the budget.
bool random_walk(CompiledGrammar &g, std::mt19937 &rng, std::string &out) {
    const GrammarVocab &v = g.vocab();
    const int32_t eos = v.eog[0];
    int32_t s = g.start();
    out.clear();
    for (int step = 0; step < 400; ++step) {
        auto m = g.mask(s);
        if (m->n_allowed == 0) fail_msg("dead end after '%s'", out.c_str());
        std::vector<int32_t> allowed;
        for (int32_t id = 0; id < v.n_vocab; ++id)
            if (m->test(id)) allowed.push_back(id);
        int32_t pick = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
        if (step > 30 && rng() % 5 != 0) {
            for (const char *closing : {"", "]", "}", "\"", "0"}) {
                const int32_t id = *closing ? static_cast<int32_t>(closing[0] - 0x20) : eos;
                if (m->test(id)) { pick = id; break; }
            }
        }
        if (pick == eos) return true;
        out += v.pieces[static_cast<size_t>(pick)];
        s = g.advance(s, pick);
        assert_int_not_equal(s, GrammarAutomaton::kDead);
    }
    return false;
}

} // namespace

static void test_errors(void **) {
    auto e = error_of(R"({"type":"object","properties":{"a":{"type":"string","format":"date"}}})");
    assert_int_equal(e.first, EMBER_ERR_UNSUPPORTED);
    assert_true(contains(e.second, "'/properties/a/format'"));
    assert_true(contains(e.second, "'format' is not supported"));
    e = error_of(R"({"allOf":[{}]})");
    assert_int_equal(e.first, EMBER_ERR_UNSUPPORTED);
    assert_true(contains(e.second, "'/allOf'"));
    e = error_of("{\"type\":\n \"object\",}");
    assert_int_equal(e.first, EMBER_ERR_INVALID_ARGUMENT);
    assert_true(contains(e.second, "line 2, column 11"));
    e = error_of(R"({"$ref":"#/$defs/missing"})");
    assert_int_equal(e.first, EMBER_ERR_INVALID_ARGUMENT);
    assert_true(contains(e.second, "does not resolve"));
    e = error_of(R"({"type":"array","items":{"type":"wat"}})");
    assert_true(contains(e.second, "'/items/type'"));
    e = error_of(R"({"type":"string","pattern":"(a)\\1"})");
    assert_int_equal(e.first, EMBER_ERR_UNSUPPORTED);
    assert_true(contains(e.second, "/pattern"));
    e = error_of(R"({"type":"integer","minimum":5,"maximum":4})");
    assert_true(contains(e.second, "allow no integer"));
    // A definition that refers to itself before any character: left recursion, refused.
    e = error_of(R"({"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}},"$ref":"#/$defs/a"})");
    assert_true(contains(e.second, "left-recursive"));
}

static void test_random_walks_validate(void **) {
    auto v = toy_vocab();
    std::mt19937 rng(1234);
    for (const auto &c : structured_cases::kSchemas) {
        const JsonValue schema = parse_json(c.schema);
        const std::string gbnf = json_schema_to_gbnf(schema);
        CompiledGrammar g(parse_gbnf(gbnf), v);
        int complete = 0;
        std::string example;
        for (int walk = 0; walk < 50; ++walk) {
            std::string text;
            if (!random_walk(g, rng, text)) continue;
            ++complete;
            if (text.size() > example.size()) example = text;
            JsonValue doc;
            try {
                doc = parse_json(text);
            } catch (const ember::Error &e) {
                fail_msg("%s: '%s' is not JSON: %s\n%s", c.name, text.c_str(), e.what(), gbnf.c_str());
            }
            const std::string why = test_schema::validate(doc, schema, schema);
            if (!why.empty()) fail_msg("%s: '%s' does not validate: %s\n%s", c.name, text.c_str(), why.c_str(), gbnf.c_str());
        }
        print_message("%s: %d of 50 walks complete, all valid; the longest: %s\n", c.name, complete, example.c_str());
        assert_true(complete >= 40);
    }
}

static void test_integer_ranges_exact(void **) {
    auto v = toy_vocab();
    const struct { const char *schema; long lo, hi; } cases[] = {
        {R"({"type":"integer","minimum":-37,"maximum":1234})", -37, 1234},
        {R"({"type":"integer","exclusiveMinimum":9,"exclusiveMaximum":100})", 10, 99},
        {R"({"type":"integer","minimum":-1200,"maximum":-5})", -1200, -5},
        {R"({"type":"integer","minimum":0,"maximum":0})", 0, 0},
    };
    for (const auto &c : cases) {
        CompiledGrammar g(parse_gbnf(json_schema_to_gbnf(std::string(c.schema))), v);
        for (long x = -1500; x <= 1500; ++x) {
            const int32_t s = g.advance_bytes(g.start(), std::to_string(x));
            const bool ok = s != GrammarAutomaton::kDead && g.accepts(s);
            if (ok != (x >= c.lo && x <= c.hi)) fail_msg("%s: %ld %s", c.schema, x, ok ? "accepted" : "refused");
        }
        for (const char *bad : {"007", "-0", "+5", "00"}) {   // no leading zeros, no "-0", no "+"
            const int32_t s = g.advance_bytes(g.start(), bad);
            assert_false(s != GrammarAutomaton::kDead && g.accepts(s));
        }
    }
    // Number bounds with integer limits: 0.5 and 1 are in [0, 1], 1.5 is not.
    CompiledGrammar n(parse_gbnf(json_schema_to_gbnf(std::string(R"({"type":"number","minimum":0,"maximum":1})"))), v);
    for (const char *ok : {"0", "0.5", "1", "1.0", "0.999"}) {
        const int32_t s = n.advance_bytes(n.start(), ok);
        assert_true(s != GrammarAutomaton::kDead && n.accepts(s));
    }
    for (const char *bad : {"1.5", "2", "-0.5", "01"}) {
        const int32_t s = n.advance_bytes(n.start(), bad);
        assert_false(s != GrammarAutomaton::kDead && n.accepts(s));
    }
}

static void test_json_reader(void **) {
    const JsonValue v = parse_json(R"({"a":[1,-2.5e3,"x\u00e9\ud83d\ude00\n"],"b":{"c":null,"d":true}})");
    assert_int_equal(v.type, JsonValue::OBJECT);
    assert_string_equal(v.get("a")->items[2].text.c_str(), "xé😀\n");
    assert_true(v.get("a")->items[1].number == -2500.0);
    assert_false(v.get("a")->items[1].integer);
    assert_string_equal(v.dump().c_str(), R"({"a":[1,-2.5e3,"xé😀\n"],"b":{"c":null,"d":true}})");
    for (const char *bad : {"", "{", "[1,]", "01", "\"\\x\"", "{\"a\" 1}", "1 2", "\"\\ud800\"", "\"\xc3\"", "\"\xff\"",
                             "\"\xed\xa0\x80\""}) {
        try {
            parse_json(bad);
            fail_msg("'%s' parsed", bad);
        } catch (const ember::Error &e) {
            assert_int_equal(e.status(), EMBER_ERR_INVALID_ARGUMENT);
        }
    }
    std::string deep(200, '[');
    try {
        parse_json(deep);
        fail_msg("deep nesting parsed");
    } catch (const ember::Error &e) {
        assert_true(contains(e.what(), "too deep"));
    }
}

// Translating a schema costs time and text linear in its size: objects of many optional properties,
// and many subschemas whose rules share a name, gave GBNF growing with the square of their count
// (8,000 optional properties, a 239 KB schema, made 3.5 GB). Four times the schema must give about four
// times the GBNF.
static void test_translation_linear(void **) {
    auto optional_props = [](int n) {
        std::string s = R"({"type":"object","properties":{)";
        for (int i = 0; i < n; ++i) s += (i ? "," : "") + std::string("\"p") + std::to_string(i) + "\":{\"type\":\"integer\"}";
        return s + "}}";
    };
    auto arrays = [](int n) {
        std::string s = R"({"anyOf":[)";
        // every array's rule is named after the property "a": one hint shared by all
        for (int i = 0; i < n; ++i) s += (i ? "," : "") + std::string(R"({"properties":{"a":{"type":"array","items":{"type":"null"}}}})");
        return s + "]}";
    };
    for (auto make : {+optional_props, +arrays}) {
        const size_t small = json_schema_to_gbnf(std::string_view(make(250))).size();
        const size_t large = json_schema_to_gbnf(std::string_view(make(1000))).size();
        print_message("GBNF of 250 and 1000 members: %zu and %zu bytes\n", small, large);
        assert_true(large < 5 * small);
    }
    // 1,000 optional properties give a grammar that matches; 8,000 (239 KB) are refused at once, saying
    // why (the matcher would follow the run of optional members deeper than it allows).
    const std::string gbnf = json_schema_to_gbnf(std::string_view(optional_props(1000)));
    assert_true(gbnf.size() < GrammarLimits::kMaxTextBytes);
    CompiledGrammar g(parse_gbnf(gbnf), toy_vocab());
    assert_true(matches(g, R"({"p999":5})") && matches(g, R"({"p3":1,"p998":2})") && matches(g, "{}"));
    const auto e = error_of(optional_props(8000));
    assert_int_equal(e.first, EMBER_ERR_UNSUPPORTED);
    assert_true(contains(e.second, "optional properties in a row"));
}

// A $ref's array index beyond any array does not resolve (10^22 threw std::out_of_range from stoull:
// EMBER_ERR_INTERNAL).
static void test_ref_index_out_of_range(void **) {
    auto e = error_of(R"({"$defs":{"a":[{"type":"null"}]},"$ref":"#/$defs/a/10000000000000000000000"})");
    assert_int_equal(e.first, EMBER_ERR_INVALID_ARGUMENT);
    assert_true(contains(e.second, "does not resolve"));
    e = error_of(R"({"$defs":{"a":[{"type":"null"}]},"$ref":"#/$defs/a/0"})");
    assert_int_equal(e.first, EMBER_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_random_walks_validate),
        cmocka_unit_test(test_integer_ranges_exact),
        cmocka_unit_test(test_json_reader),
        cmocka_unit_test(test_translation_linear),
        cmocka_unit_test(test_ref_index_out_of_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
