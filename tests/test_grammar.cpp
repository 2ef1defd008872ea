// test_grammar.cpp — the GBNF parser and the grammar matcher on small vocabularies made up here: parse
// errors carry line and column; masks equal a token-by-token check; EOS only where the grammar is
// complete; tokens that split UTF-8 characters; left recursion and size limits are errors.
#include "test_util.h"

#include "core/error.hpp"
#include "grammar/grammar.hpp"
#include "sampler/sampler.hpp"

#include <chrono>
#include <cmath>
#include <limits>
#include <random>

#include <string>
#include <vector>

using namespace ember::grammar;

namespace {

std::string error_of(const std::string &gbnf) {
    try {
        parse_gbnf(gbnf);
    } catch (const ember::Error &e) {
        assert_int_equal(e.status(), EMBER_ERR_INVALID_ARGUMENT);
        return e.what();
    }
    return "";
}

bool contains(const std::string &s, const std::string &part) { return s.find(part) != std::string::npos; }

// A vocabulary from pieces; the last token is EOS.
std::shared_ptr<GrammarVocab> vocab_of(std::vector<std::string> pieces) {
    auto v = std::make_shared<GrammarVocab>();
    pieces.push_back("");
    v->n_vocab = static_cast<int32_t>(pieces.size());
    v->eog.push_back(v->n_vocab - 1);
    v->pieces = pieces;
    v->trie = TokenTrie::build(v->pieces);
    return v;
}

std::shared_ptr<CompiledGrammar> compile(const std::string &gbnf, std::shared_ptr<GrammarVocab> v) {
    return std::make_shared<CompiledGrammar>(parse_gbnf(gbnf), v);
}

// Whether text (whole) is a sentence of the grammar.
bool matches(CompiledGrammar &g, const std::string &text) {
    const int32_t s = g.advance_bytes(g.start(), text);
    return s != GrammarAutomaton::kDead && g.accepts(s);
}

// The mask at `state` equals stepping every token through the grammar one by one.
void check_mask(CompiledGrammar &g, int32_t state) {
    auto m = g.mask(state);
    size_t n = 0;
    for (int32_t id = 0; id < g.vocab().n_vocab; ++id) {
        const bool want = g.advance(state, id) != GrammarAutomaton::kDead;
        if (want != m->test(id)) fail_msg("token %d ('%s'): mask says %d", id, g.vocab().pieces[static_cast<size_t>(id)].c_str(), !want);
        n += want;
    }
    assert_int_equal(n, m->n_allowed);
}

} // namespace

static void test_parse_errors(void **) {
    assert_true(contains(error_of(""), "empty"));
    assert_true(contains(error_of("root ::= \"a\"\nx ::= [b"), "line 2, column 7: unterminated character class"));
    assert_true(contains(error_of("root ::= foo"), "undefined rule 'foo'"));
    assert_true(contains(error_of("root ::= \"a\"\nroot ::= \"b\""), "defined twice"));
    assert_true(contains(error_of("start ::= \"a\""), "no rule 'root'"));
    assert_true(contains(error_of("root ::= root \"a\" | \"b\""), "left-recursive"));
    assert_true(contains(error_of("root ::= x* \"a\"\nx ::= \"b\"?"), "left-recursive"));   // nullable under *
    assert_true(contains(error_of("root ::= \"a\"{5000}"), "limit"));
    assert_true(contains(error_of("root ::= \"\\q\""), "unknown escape"));
    assert_true(contains(error_of("root ::= *"), "nothing before it"));
    assert_true(contains(error_of("root ::= \"a\"{3,2}"), "n < m"));
    std::string deep = "root ::= ";
    for (int i = 0; i < 200; ++i) deep += "(";
    assert_true(contains(error_of(deep), "nest deeper"));
}

static void test_sentences(void **) {
    auto v = vocab_of({"a"});
    const char *json_like =
        "root ::= obj\n"
        "obj ::= \"{\" ws ( pair ( \",\" ws pair )* )? \"}\"\n"
        "pair ::= str \":\" ws val ws   # a comment\n"
        "val ::= str | num | obj | \"[\" ws ( val ( \",\" ws val )* )? \"]\"\n"
        "str ::= \"\\\"\" [^\"\\\\]* \"\\\"\"\n"
        "num ::= \"-\"? [0-9]+ (\".\" [0-9]{1,3})?\n"
        "ws ::= [ \\t\\n]*\n";
    auto g = compile(json_like, v);
    assert_true(matches(*g, "{}"));
    assert_true(matches(*g, "{\"a\": 1.25, \"b\":{\"c\":[1,\"x\",{}]}}"));
    assert_true(matches(*g, "{\"é✓😀\": -3}"));   // multi-byte characters in a negated class
    assert_false(matches(*g, "{\"a\": 1.2345}"));   // at most three decimals
    assert_false(matches(*g, "{\"a\": }"));
    assert_false(matches(*g, "{\"a\": 1"));         // a prefix is not complete
    assert_true(g->advance_bytes(g->start(), "{\"a\": 1") != GrammarAutomaton::kDead);

    auto alt = compile("root ::= \"yes\" | \"no\" | [\\x41-\\x43]{2} | \"\\u00e9\"+\n", v);
    assert_true(matches(*alt, "yes"));
    assert_true(matches(*alt, "no"));
    assert_true(matches(*alt, "AC"));
    assert_true(matches(*alt, "ééé"));
    assert_false(matches(*alt, "A"));
    assert_false(matches(*alt, "yesno"));
    // A multi-line rule: alternatives continue after `|`, sequences inside parentheses.
    auto ml = compile("root ::= (\n  \"a\"\n  \"b\"\n) |\n  \"c\"\n", v);
    assert_true(matches(*ml, "ab"));
    assert_true(matches(*ml, "c"));
}

static void test_masks(void **) {
    // Tokens that are prefixes of one another, split multi-byte characters, and an empty control token.
    auto v = vocab_of({"{", "}", "{\"", "\"", "\":", " ", "a", "ab", "abc", "1", "12", "-", ".", "5}", "\xc3", "\xa9",
                       "\xc3\xa9", "\xe2\x9c", "\x93", "\"}", "", "\n", "[", "]", ",", "true"});
    auto g = compile("root ::= \"{\" ( \"\\\"\" [a-cé✓]+ \"\\\":\" \" \"? val )? \"}\"\n"
                     "val ::= \"-\"? [0-9]+ (\".\" [0-9]+)? | \"true\" | \"[\" val (\",\" val)* \"]\"\n", v);
    const int32_t eos = v->n_vocab - 1;
    // Walk a few sentences token by token, checking the mask at every state on the way.
    const std::vector<std::vector<int32_t>> walks = {
        {0, 1},                                  // {}
        {2, 6, 7, 4, 11, 9, 12, 13},             // {"aab": -1.5}
        {2, 14, 15, 16, 17, 18, 4, 5, 25, 1},    // {"é é ✓": true} with é split over two tokens
        {2, 8, 4, 22, 10, 24, 9, 23, 1},         // {"abc":[12,1]}
    };
    for (const auto &walk : walks) {
        int32_t s = g->start();
        for (int32_t tok : walk) {
            check_mask(*g, s);
            assert_false(g->mask(s)->test(eos));   // not complete yet
            s = g->advance(s, tok);
            assert_int_not_equal(s, GrammarAutomaton::kDead);
        }
        check_mask(*g, s);
        auto m = g->mask(s);
        assert_true(m->test(eos));                 // complete: only EOS may follow
        assert_int_equal(m->n_allowed, 1);
    }
    // The control token (empty piece) is never allowed; a byte that cannot start a character is refused.
    assert_int_equal(g->advance(g->start(), 20), GrammarAutomaton::kDead);
    const int32_t in_str = g->advance(g->start(), 2);
    assert_int_equal(g->advance(in_str, 15), GrammarAutomaton::kDead);   // a lone continuation byte
    // After the lead byte of é only é's continuation is allowed; ✓'s lead byte then needs its own.
    const int32_t half = g->advance(in_str, 14);
    auto hm = g->mask(half);
    assert_true(hm->test(15));
    assert_int_equal(hm->n_allowed, 1);
    // Overlong encodings and surrogates are not characters: " " written in 2 or 4 bytes is refused.
    auto sp = compile("root ::= \" \" [^a]\n", v);
    assert_int_equal(sp->advance_bytes(sp->start(), "\xc0\xa0"), GrammarAutomaton::kDead);
    assert_int_equal(sp->advance_bytes(sp->start(), "\xf0\x80\x80\xa0"), GrammarAutomaton::kDead);
    const int32_t after_space = sp->advance_bytes(sp->start(), " ");
    assert_int_equal(sp->advance_bytes(after_space, "\xed\xa0\x80"), GrammarAutomaton::kDead);
    assert_int_equal(sp->advance_bytes(after_space, "\xed\xa0"), GrammarAutomaton::kDead);
    assert_true(sp->accepts(sp->advance_bytes(after_space, "\xf4\x8f\xbf\xbf")));   // U+10FFFF
    assert_int_equal(sp->advance_bytes(after_space, "\xf4\x90"), GrammarAutomaton::kDead);   // beyond it
    // Masks are cached per state.
    const auto before = g->stats();
    g->mask(g->start());
    assert_int_equal(g->stats().masks_computed, before.masks_computed);
    assert_true(g->stats().mask_hits > before.mask_hits);
}

static void test_dead_end_and_depth(void **) {
    // "x" is in no token: from the start nothing can continue.
    auto v = vocab_of({"a", "b"});
    auto g = compile("root ::= \"a\" \"x\"\n", v);
    const int32_t s = g->advance(g->start(), 0);
    assert_int_not_equal(s, GrammarAutomaton::kDead);
    assert_int_equal(g->mask(s)->n_allowed, 0);
    // Nesting beyond the stack limit is not offered, rather than growing without bound.
    auto n = compile("root ::= \"(\" root \")\" | \"a\"\n", vocab_of({"(", ")", "a"}));
    int32_t st = n->start();
    for (uint32_t d = 0; d < GrammarLimits::kMaxStackDepth + 10 && st != GrammarAutomaton::kDead; ++d) st = n->advance(st, 0);
    assert_int_equal(st, GrammarAutomaton::kDead);
    // An ambiguous grammar whose parse stacks double with every "(" stops with an error, not a hang.
    auto amb = compile("root ::= \"(\" ( root \")\" | \" \"? root \"]\" ) | \"x\"\n", vocab_of({"(", ")", "]", " ", "x"}));
    try {
        int32_t s2 = amb->start();
        for (int i = 0; i < 40 && s2 != GrammarAutomaton::kDead; ++i) s2 = amb->advance(s2, 0);
        fail_msg("40 nested '(' of an ambiguous grammar were accepted");
    } catch (const ember::Error &e) {
        assert_int_equal(e.status(), EMBER_ERR_OUT_OF_MEMORY);
        assert_true(contains(e.what(), "ambiguous"));
    }
}

// The sampler's shortcuts (greedy: check the best token's bytes; top-k: check the best k, then 4k) and
// its use of cached masks (listed tokens where few are allowed) choose what masking first would:
// compared with a plain sampler on logits whose disallowed tokens are -inf. The reference's masks come
// from a grammar of their own, so the sampler's grammar has a mask cached only where the sampler itself
// needed one (both paths meet) — or, with `cached`, at every state before it samples.
static void test_sampler_shortcuts_exact(void **) {
    // Inside the string most tokens are allowed, so the shortcuts apply often; elsewhere few are.
    auto v = vocab_of({"{", "}", "\"", "a", "ab", "b\"", "\":", ":", " ", "1", "12", "[", "]", ",", "x", "c", "d", "e",
                       "f", "cd", "ef", "g h", "Q", "\n"});
    const char *gbnf = "root ::= \"{\" ( \"\\\"\" [a-h ]{1,12} \"\\\":\" \" \"? ( [0-9]{1,4} | \"[\" [0-9]? \"]\" ) )? \"}\"\n";
    auto ref_g = compile(gbnf, v);
    std::mt19937 rng(7);
    size_t listed = 0, unlisted = 0;
    std::normal_distribution<float> normal(0.0f, 2.0f);
    for (bool cached : {false, true})
    for (float temp : {0.0f, 0.8f}) {
        for (int32_t top_k : {0, 3, 8, 40})
        for (float top_p : {1.0f, 0.9f}) {
            ember::SamplerParams p;
            p.temperature = temp;
            p.top_k = top_k;
            p.top_p = top_p;
            p.seed = 99;
            auto g = compile(gbnf, v);   // no masks computed yet
            ember::Sampler constrained(p), reference(p);
            constrained.set_grammar(g);
            int32_t state = g->start(), ref_state = ref_g->start();   // the same position, numbered by each
            for (int step = 0; step < 1000; ++step) {
                std::vector<float> logits(static_cast<size_t>(v->n_vocab));
                for (float &x : logits) x = normal(rng);
                std::vector<float> masked = logits;
                auto m = ref_g->mask(ref_state);
                if (cached) (g->mask(state)->listed() ? listed : unlisted) += 1;
                for (size_t i = 0; i < masked.size(); ++i)
                    if (!m->test(static_cast<int32_t>(i))) masked[i] = -std::numeric_limits<float>::infinity();
                const int32_t want = reference.sample(masked.data(), masked.size());
                const int32_t got = constrained.sample(logits.data(), logits.size());
                // Pure temperature sampling draws by rejection: the same distribution
                // (test_sampler_rejection_exact), other draws. Its token is still an allowed one.
                const bool rejection = temp > 0 && (top_k == 0 || top_k >= v->n_vocab) && top_p == 1.0f;
                if (rejection && !m->test(got)) fail_msg("step %d: token %d is not allowed", step, got);
                if (!rejection && want != got)
                    fail_msg("temp %g top_k %d top_p %g step %d%s: %d, masking first gives %d", temp, top_k, top_p, step,
                             cached ? " (cached mask)" : "", got, want);
                constrained.accept(got);
                state = g->advance(state, got);
                ref_state = ref_g->advance(ref_state, got);
                if (v->is_eog(got)) {   // complete: start over
                    constrained.reset();
                    reference.reset();
                    state = g->start();
                    ref_state = ref_g->start();
                }
            }
        }
    }
    assert_true(listed > 0 && unlisted > 0);   // both kinds of cached mask were met
}

// Pure temperature sampling under a grammar draws by rejection (sampler.cpp): its draws follow the
// allowed tokens' renormalized distribution, both where the first draws are mostly allowed and where
// they keep being refused (then the masked chain draws). Checked by a chi-square test of 40,000 draws
// against the exact probabilities, and by penalties applying before the grammar as in masking first.
static void test_sampler_rejection_exact(void **) {
    auto v = vocab_of({"a", "b", "c", "d", "e", "f", "\"", "x", "y", "z"});
    auto g = compile("root ::= ( \"\\\"\" | \"x\" ) [a-f]* \"\\\"\"\n", v);   // ( "\"" | "x" ) [a-f]* "\""
    const int32_t inside = g->advance_bytes(g->start(), "\"ab");
    struct Case {
        const char *what;
        int32_t state;
        std::vector<float> logits;   // one per token, EOS last
        float repeat_penalty;
    };
    const float lo = -12.0f;   // an allowed token this unlikely is refused again and again
    const std::vector<Case> cases = {
        {"inside the string, most draws allowed", inside, {1.0f, 0.5f, 0.0f, -0.5f, -1.0f, 0.2f, 0.3f, 0.8f, -2.0f, 0.0f, 0.0f}, 1.0f},
        {"at the start, only two very unlikely tokens allowed", g->start(), {2, 2, 2, 2, 2, 2, lo, lo + 1, 2, 2, 2}, 1.0f},
        {"inside, with a repeat penalty", inside, {1.0f, 0.5f, 0.0f, -0.5f, -1.0f, 0.2f, 0.3f, 0.8f, -2.0f, 0.0f, 0.0f}, 3.0f},
    };
    for (const Case &c : cases) {
        ember::SamplerParams p;
        p.temperature = 0.7f;
        p.repeat_penalty = c.repeat_penalty;
        p.seed = 5;
        ember::Sampler s(p);
        s.set_grammar(g);
        for (char ch : std::string("\"ab")) {   // bring the sampler to c.state, with its history
            if (c.state == g->start()) break;
            s.accept(static_cast<int32_t>(std::string("abcdef\"xyz").find(ch)));
        }
        // The exact distribution: the penalized logits, masked, softmax at the temperature.
        auto m = g->mask(c.state);
        std::vector<double> want(c.logits.size(), 0.0);
        double z = 0;
        for (size_t i = 0; i < want.size(); ++i) {
            if (!m->test(static_cast<int32_t>(i))) continue;
            float l = c.logits[i];
            const bool seen = i == 0 || i == 1 || i == 6;   // "a", "b" and the quote were accepted
            if (c.state != g->start() && seen) l = l > 0 ? l / c.repeat_penalty : l * c.repeat_penalty;
            z += want[i] = std::exp(static_cast<double>(l) / p.temperature);
        }
        const int n = 40000;
        std::vector<int> got(want.size(), 0);
        for (int k = 0; k < n; ++k) ++got[static_cast<size_t>(s.sample(c.logits.data(), c.logits.size()))];
        double chi2 = 0;
        int df = -1;
        for (size_t i = 0; i < want.size(); ++i) {
            if (want[i] == 0) {
                if (got[i]) fail_msg("%s: token %zu (not allowed) drawn %d times", c.what, i, got[i]);
                continue;
            }
            const double e = n * want[i] / z;
            chi2 += (got[i] - e) * (got[i] - e) / e;
            ++df;
        }
        // The 1e-6 tail of chi-square with df <= 7 degrees of freedom is below 40: a real bias of a
        // few percent on any token gives hundreds.
        if (chi2 > 40.0) fail_msg("%s: chi-square %.1f with %d degrees of freedom", c.what, chi2, df);
    }
}

// Matching memory is bounded per grammar, whatever text is matched: a palindrome grammar's stacks
// remember every byte read, so every new text builds new automaton states (35 bytes of GBNF like this
// grew to 333 MiB before). Under a small limit the walk stops with EMBER_ERR_OUT_OF_MEMORY, the charge
// never passes it, and what was built stays usable.
static void test_matching_memory_bounded(void **) {
    const size_t limit = size_t(2) << 20;
    CompiledGrammar g(parse_gbnf("root ::= \"a\" root \"a\" | \"b\" root \"b\" | \"\"\n"), vocab_of({"a", "b"}), limit);
    assert_true(matches(g, "abba"));
    std::mt19937 rng(7);
    bool stopped = false;
    for (int walk = 0; walk < 10000 && !stopped; ++walk) {
        std::string text;
        for (int i = 0; i < 200; ++i) text += (rng() & 1) ? 'a' : 'b';
        try {
            g.advance_bytes(g.start(), text);
        } catch (const ember::Error &e) {
            assert_int_equal(e.status(), EMBER_ERR_OUT_OF_MEMORY);
            assert_true(contains(e.what(), "limit"));
            stopped = true;
        }
        assert_true(g.bytes() <= limit);
    }
    assert_true(stopped);
    assert_true(g.bytes() > limit / 2);   // the charge counts what is really built
    assert_true(matches(g, "abba"));      // states built before the limit still work
    assert_true(GrammarAutomaton::kMaxBytes + CompiledGrammar::kMaskCacheBytes <= GrammarLimits::kMaxMatchBytes);
}

// Overlong UTF-8 (\xC0\xAF spells '/' in two bytes) and surrogates are not characters: a literal or
// class holding them is malformed, not a way to write another character.
static void test_overlong_literals_refused(void **) {
    assert_true(contains(error_of("root ::= \"\xC0\xAF\"\n"), "invalid UTF-8"));
    assert_true(contains(error_of("root ::= [\xE0\x80\xAF]\n"), "invalid UTF-8"));
    assert_true(contains(error_of("root ::= \"\xED\xA0\x80\"\n"), "invalid UTF-8"));   // U+D800
    assert_true(error_of("root ::= \"\xC3\xA9\"\n").empty());                          // é is fine
}

// Finding the rules that match the empty string is linear in the grammar: a chain of 30,000 rules,
// each referring to the next (the last one empty), took one sweep over all rules per link before.
static void test_nullable_chain_linear(void **) {
    std::string text = "root ::= r0 \"x\"\n";
    const int n = 30000;
    for (int i = 0; i < n; ++i) text += "r" + std::to_string(i) + " ::= " + (i + 1 < n ? "r" + std::to_string(i + 1) : "\"\"") + "\n";
    const auto t0 = std::chrono::steady_clock::now();
    const GrammarRules rules = parse_gbnf(text);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    print_message("a chain of %d rules: parsed in %.3f s\n", n, s);
    assert_int_equal(rules.names.size(), n + 1);
    assert_true(s < 2.0);
    // and a chain that loops back is still found left-recursive
    assert_true(contains(error_of("root ::= a \"x\"\na ::= b\nb ::= c | \"y\"\nc ::= a\n"), "left-recursive"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_sentences),
        cmocka_unit_test(test_masks),
        cmocka_unit_test(test_dead_end_and_depth),
        cmocka_unit_test(test_sampler_shortcuts_exact),
        cmocka_unit_test(test_sampler_rejection_exact),
        cmocka_unit_test(test_matching_memory_bounded),
        cmocka_unit_test(test_overlong_literals_refused),
        cmocka_unit_test(test_nullable_chain_linear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
