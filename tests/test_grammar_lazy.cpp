// test_grammar_lazy.cpp — lazy grammars (grammar.hpp's GrammarTriggers) on a vocabulary made up here: a
// trigger word split across tokens, or inside a token with text before and after it, switches the
// grammar on from the word's first byte; a word whose continuation the grammar refuses stays free text;
// a trigger token starts the grammar after it; a complete match frees the text again, or (once) leaves
// only the end; and until a trigger the sampler draws exactly what it draws without a grammar and the
// grammar computes no mask.
#include "test_util.h"

#include "core/error.hpp"
#include "grammar/grammar.hpp"
#include "sampler/sampler.hpp"

#include <random>
#include <string>
#include <vector>

using namespace ember;
using namespace ember::grammar;

namespace {

// Token ids of the vocabulary below.
enum : int32_t { kHi, kOpenA, kOpenB, kOpenC, kX, kDot, kInside, kRefused, kSpace, kCtl, kEos, kN };

std::shared_ptr<GrammarVocab> vocab() {
    auto v = std::make_shared<GrammarVocab>();
    // " <to" "ol_c" "all>": the word <tool_call> over three tokens, after a space in the first.
    v->pieces = {"Hi", " <to", "ol_c", "all>", "x", ".", "so<tool_call>x", "a<tool_call>Q", " ", "", ""};
    v->n_vocab = kN;
    v->eog.push_back(kEos);
    v->trie = TokenTrie::build(v->pieces);
    return v;
}

std::shared_ptr<CompiledGrammar> lazy(std::vector<std::string> words, std::vector<int32_t> tokens, bool once,
                                      const char *gbnf = "root ::= \"<tool_call>\" \"x\"+ \".\"\n") {
    auto g = std::make_shared<CompiledGrammar>(parse_gbnf(gbnf), vocab());
    GrammarTriggers t;
    t.words = std::move(words);
    t.tokens = std::move(tokens);
    t.once = once;
    g->set_triggers(t);
    return g;
}

template <class F> void expect_error(ember_status status, F f) {
    try {
        f();
    } catch (const Error &e) {
        assert_int_equal(e.status(), status);
        return;
    }
    fail_msg("no error (expected status %d)", status);
}

void accept_all(GrammarMatcher &m, std::initializer_list<int32_t> ids) {
    for (int32_t id : ids) m.accept(id);
}

void test_word_split_across_tokens(void **) {
    GrammarMatcher m(lazy({"<tool_call>"}, {}, false));
    // Before the trigger anything goes, the grammar's text included in pieces.
    accept_all(m, {kHi, kX, kDot, kOpenA, kOpenB});
    assert_false(m.constraining());
    m.accept(kOpenC);   // completes " <tool_call>": the grammar matched "<tool_call>" from its '<'
    assert_true(m.constraining());
    auto mask = m.mask();
    assert_true(mask->test(kX));
    assert_false(mask->test(kHi));
    assert_false(mask->test(kEos));
    expect_error(EMBER_ERR_INVALID_ARGUMENT, [&] { m.accept(kHi); });
    accept_all(m, {kX, kX, kDot});   // complete: free text again, and the word switches it on again
    assert_false(m.constraining());
    accept_all(m, {kHi, kEos, kOpenA, kOpenB, kOpenC});
    assert_true(m.constraining());
    m.reset();
    assert_false(m.constraining());
}

void test_word_inside_a_token(void **) {
    GrammarMatcher m(lazy({"<tool_call>"}, {}, false));
    m.accept(kInside);   // "so<tool_call>x": the grammar has matched "<tool_call>x"
    assert_true(m.constraining());
    assert_true(m.allows(kDot));
    m.accept(kDot);
    assert_false(m.constraining());
    // "a<tool_call>Q": the grammar refuses the word's continuation, so the text stays free.
    m.accept(kRefused);
    assert_false(m.constraining());
    m.accept(kHi);
    assert_false(m.constraining());
    // A control token between the word's pieces breaks it.
    accept_all(m, {kOpenA, kCtl, kOpenB, kOpenC});
    assert_false(m.constraining());
}

void test_token_trigger_and_once(void **) {
    GrammarMatcher m(lazy({}, {kCtl}, true, "root ::= \"x\" \".\"\n"));
    accept_all(m, {kHi, kOpenA, kOpenB, kOpenC, kX, kDot});
    assert_false(m.constraining());
    m.accept(kCtl);
    assert_true(m.constraining());
    accept_all(m, {kX, kDot});
    // once: the match is over and only the end may follow.
    assert_true(m.constraining());
    auto mask = m.mask();
    assert_int_equal(mask->n_allowed, 1);
    assert_true(mask->test(kEos));
}

void test_trigger_limits(void **) {
    auto g = std::make_shared<CompiledGrammar>(parse_gbnf("root ::= \"x\"\n"), vocab());
    GrammarTriggers t;
    t.words = {""};
    expect_error(EMBER_ERR_INVALID_ARGUMENT, [&] { g->set_triggers(t); });
    t.words = {std::string(GrammarTriggers::kMaxWordBytes + 1, 'a')};
    expect_error(EMBER_ERR_INVALID_ARGUMENT, [&] { g->set_triggers(t); });
    t.words.clear();
    t.tokens = {kN};
    expect_error(EMBER_ERR_INVALID_ARGUMENT, [&] { g->set_triggers(t); });
    assert_false(g->lazy());
}

// Until the trigger, a sampler with the lazy grammar draws what one without a grammar draws, for every
// kind of chain, and the grammar does no work (no mask, no trie walk); the trigger then constrains.
void test_sampler_free_until_trigger(void **) {
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    for (const SamplerParams &base : {SamplerParams{1.0f, 0, 1.0f, 0.0f}, SamplerParams{0.8f, 4, 0.9f, 0.05f},
                                      SamplerParams{0.0f}, SamplerParams{1.3f, 3}}) {
        SamplerParams p = base;
        p.seed = 11;
        Sampler plain(p), with(p);
        auto g = lazy({"<tool_call>"}, {}, false);
        with.set_grammar(g);
        for (int step = 0; step < 300; ++step) {
            std::vector<float> logits(kN);
            for (float &x : logits) x = normal(rng);
            logits[kOpenC] = logits[kInside] = -1e9f;   // no trigger comes (kRefused's is refused: free text)
            const int32_t a = plain.sample(logits.data(), logits.size()), b = with.sample(logits.data(), logits.size());
            assert_int_equal(a, b);
            plain.accept(a);
            with.accept(b);
            assert_false(with.constrained());
        }
        const CompiledGrammar::Stats st = g->stats();
        assert_int_equal(st.masks_computed, 0);
        assert_int_equal(st.trie_nodes_visited, 0);
        // The trigger: from now on only the grammar's tokens are drawn.
        with.accept(kOpenA), with.accept(kOpenB), with.accept(kOpenC);
        assert_true(with.constrained());
        std::vector<float> logits(kN, 0.0f);
        logits[kHi] = 50.0f;
        for (int i = 0; i < 20; ++i) {
            const int32_t t = with.sample(logits.data(), logits.size());
            assert_true(t == kX || t == kDot);
        }
    }
}

// prepare(): the masks of every state a call can reach are computed at once, equal to those computed
// when first met, so that driving a whole call computes none; the budgets stop it.
void test_prepared_masks(void **) {
    auto g = lazy({"<tool_call>"}, {}, false);
    const size_t n = g->prepare(1000, size_t(1) << 20);
    assert_true(n >= 3);
    assert_int_equal(g->stats().masks_computed, n);
    auto fresh = lazy({"<tool_call>"}, {}, false);
    GrammarMatcher a(g), b(fresh);
    // The word split across tokens (it begins inside " <to"), then x x x and the closing dot.
    for (int32_t id : {kHi, kOpenA, kOpenB, kOpenC, kX, kX, kX, kDot}) {
        if (a.constraining()) {
            auto cached = a.cached_mask();
            assert_non_null(cached.get());
            auto computed = b.mask();
            assert_true(cached->bits == computed->bits);
            assert_int_equal(cached->n_allowed, computed->n_allowed);
        }
        a.accept(id);
        b.accept(id);
        assert_int_equal(a.constraining(), b.constraining());
    }
    assert_false(a.constraining());   // the call is complete: free text again
    assert_int_equal(g->stats().masks_computed, n);
    // A second prepare finds everything cached.
    assert_int_equal(g->prepare(1000, size_t(1) << 20), 0);
    // Budgets: a number of states, and bytes (one mask of this vocabulary is one 64-bit word).
    assert_int_equal(lazy({"<tool_call>"}, {}, false)->prepare(2, size_t(1) << 20), 2);
    assert_int_equal(lazy({"<tool_call>"}, {}, false)->prepare(1000, 3 * sizeof(uint64_t)), 3);
}

} // namespace

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_word_split_across_tokens),
        cmocka_unit_test(test_word_inside_a_token),
        cmocka_unit_test(test_token_trigger_and_once),
        cmocka_unit_test(test_trigger_limits),
        cmocka_unit_test(test_sampler_free_until_trigger),
        cmocka_unit_test(test_prepared_masks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
