// fuzz_gbnf.cpp — libFuzzer target: arbitrary GBNF text through the grammar parser and matcher
// (src/grammar/). A grammar comes from an application's user or a server request: untrusted input.
//
// Input: the grammar text; its last 8 bytes also steer a walk through the grammar.
// Promises checked: parsing ends with a grammar or an ember error (never a crash, a hang or unbounded
// memory: the limits in grammar_rules.hpp, checked after each input: InputBudget); for a grammar, every state's token mask equals stepping
// each token on its own, and EOS is allowed exactly where the text is complete; made lazy, the grammar
// accepts every token until a trigger, then exactly the tokens its masks allow.
#include "fuzz_grammar_common.hpp"

#include "core/error.hpp"

#include <string>

using namespace ember;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const fuzz::InputBudget budget;
    const std::string text(reinterpret_cast<const char *>(data), size);
    std::shared_ptr<grammar::CompiledGrammar> g;
    try {
        g = std::make_shared<grammar::CompiledGrammar>(grammar::parse_gbnf(text), fuzz::small_vocab());
    } catch (const Error &) {
        return 0;
    }
    const size_t tail = size < 8 ? size : 8;
    bool complete = false;
    try {
        fuzz::walk(*g, data + size - tail, tail, 24, complete);
        fuzz::lazy_walk(*g, data, size < 64 ? size : 64);
    } catch (const Error &e) {
        // Only the matcher's memory limit may stop a walk.
        if (e.status() != EMBER_ERR_OUT_OF_MEMORY) fuzz::broken("walk threw", e.what());
    }
    budget.check(g.get());
    return 0;
}
