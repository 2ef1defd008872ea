// fuzz_grammar_common.hpp — what the grammar fuzz targets share: a small vocabulary and a walk through
// a compiled grammar that checks the matcher's promises.
#pragma once

#include "fuzz_util.hpp"

#include "core/error.hpp"
#include "grammar/grammar.hpp"

#include <chrono>
#include <memory>
#include <string>

namespace ember::fuzz {

// Printable ASCII, a few multi-byte characters and their halves, multi-character JSON pieces; EOS last.
inline std::shared_ptr<const grammar::GrammarVocab> small_vocab() {
    static std::shared_ptr<const grammar::GrammarVocab> v = [] {
        auto g = std::make_shared<grammar::GrammarVocab>();
        for (int c = 0x20; c < 0x7f; ++c) g->pieces.push_back(std::string(1, static_cast<char>(c)));
        for (const char *p : {"\n", "\t", "é", "\xc3", "\xa9", "✓", "\xe2\x9c", "😀", "{\"", "\":", "\",", "\"}", "true",
                              "false", "null", "12", "\\\"", "\\n", "\\u00", "[]", "{}", "\xc0\xa0", "\xed\xa0\x80"})
            g->pieces.push_back(p);
        g->pieces.push_back("");
        g->n_vocab = static_cast<int32_t>(g->pieces.size());
        g->eog.push_back(g->n_vocab - 1);
        g->trie = grammar::TokenTrie::build(g->pieces);
        return std::shared_ptr<const grammar::GrammarVocab>(g);
    }();
    return v;
}

// The bounds every input must stay within, so that a grammar whose matcher state keeps growing, or a
// translation that grows faster than its input, fails the fuzzer (and the replay of its corpus) rather
// than passing as "no crash": the grammar's memory within GrammarLimits::kMaxMatchBytes (charged as it
// is built) and one input within kMaxSecondsPerInput (generous for sanitizer builds: the whole input,
// parse and walk, takes milliseconds in a release build).
constexpr double kMaxSecondsPerInput = 10.0;
class InputBudget {
public:
    void check(grammar::CompiledGrammar *g) const {
        if (g && g->bytes() > grammar::GrammarLimits::kMaxMatchBytes) broken("the grammar holds more than its memory limit");
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
        if (s > kMaxSecondsPerInput) broken("one input took longer than the time limit");
    }

private:
    std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

// Walks up to `steps` tokens, choosing by the bytes of `choices`, and checks at every state that the mask
// equals stepping each token on its own and that EOS is allowed exactly where the grammar accepts.
// Returns the text when the walk ended at EOS, else sets `complete` false.
inline std::string walk(grammar::CompiledGrammar &g, const uint8_t *choices, size_t n_choices, int steps, bool &complete) {
    const grammar::GrammarVocab &v = g.vocab();
    const int32_t eos = v.eog[0];
    int32_t s = g.start();
    std::string text;
    complete = false;
    for (int i = 0; i < steps; ++i) {
        auto m = g.mask(s);
        size_t n = 0;
        int32_t pick = -1;
        const size_t want = n_choices ? choices[static_cast<size_t>(i) % n_choices] : 0;
        for (int32_t id = 0; id < v.n_vocab; ++id) {
            const bool ok = g.advance(s, id) != grammar::GrammarAutomaton::kDead;
            if (ok != m->test(id)) broken("mask differs from stepping the token", v.pieces[static_cast<size_t>(id)].c_str());
            if (ok && (pick < 0 || n <= want)) pick = id;
            n += ok;
        }
        if (n != m->n_allowed) broken("mask count");
        if (m->test(eos) != g.accepts(s)) broken("EOS allowed where the grammar is not complete, or refused where it is");
        if (pick < 0) return text;   // a dead end: a status, not a crash
        if (pick == eos) {
            complete = true;
            return text;
        }
        text += v.pieces[static_cast<size_t>(pick)];
        s = g.advance(s, pick);
    }
    return text;
}

// The same grammar made lazy (the word {" and the token "true" its triggers), fed tokens chosen by the
// bytes of `choices` whether allowed or not: while it waits for a trigger every token is accepted; while
// it constrains, a token is accepted exactly where the mask allows it (a refused one changes nothing).
inline void lazy_walk(grammar::CompiledGrammar &g, const uint8_t *choices, size_t n_choices) {
    const grammar::GrammarVocab &v = g.vocab();
    grammar::GrammarTriggers t;
    t.words = {"{\""};
    for (int32_t id = 0; id < v.n_vocab; ++id)
        if (v.pieces[static_cast<size_t>(id)] == "true") t.tokens.push_back(id);
    g.set_triggers(t);
    grammar::GrammarMatcher m(std::shared_ptr<grammar::CompiledGrammar>(&g, [](grammar::CompiledGrammar *) {}));
    for (size_t i = 0; i < n_choices; ++i) {
        const int32_t id = static_cast<int32_t>(choices[i] % static_cast<uint8_t>(v.n_vocab));
        if (!m.constraining()) {
            m.accept(id);   // throws (a broken promise) if a waiting grammar refused it
            continue;
        }
        const bool allowed = m.mask()->test(id);
        const int32_t before = m.state();
        try {
            m.accept(id);
            if (!allowed) broken("a constraining lazy grammar accepted a token its mask refuses");
        } catch (const Error &e) {
            if (allowed || e.status() != EMBER_ERR_INVALID_ARGUMENT || m.state() != before)
                broken("a constraining lazy grammar refused a token its mask allows, or changed its state");
        }
    }
}

} // namespace ember::fuzz
