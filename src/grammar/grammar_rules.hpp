// grammar_rules.hpp — a context-free grammar over Unicode code points, as the GBNF parser produces it and
// the matcher (grammar_automaton.hpp) runs it.
//
// Every rule is a list of alternatives; every alternative a sequence of symbols ending in an END symbol.
// A symbol is a character class (a set of code point ranges, possibly negated) or a reference to a rule.
// Groups, repetitions and optionals of the GBNF text are expanded into generated rules, so the matcher
// only ever sees these two kinds. All alternatives live in one flat array `syms`; a position in it is
// what the matcher's stacks point at.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ember::grammar {

struct CharClass {
    std::vector<std::pair<uint32_t, uint32_t>> ranges;   // inclusive, sorted, non-overlapping
    bool negated = false;                                 // matches what the ranges do not
    bool matches(uint32_t cp) const;
    // Whether some code point in [lo, hi] matches (a partial UTF-8 character can still complete).
    bool intersects(uint32_t lo, uint32_t hi) const;
};

struct Sym {
    enum Kind : uint8_t { END, CHAR, REF } kind = END;
    uint32_t id = 0;   // CHAR: index into classes; REF: rule index
};

struct GrammarRules {
    std::vector<Sym> syms;
    std::vector<CharClass> classes;
    std::vector<std::vector<uint32_t>> alts;   // per rule: the positions in syms where its alternatives start
    std::vector<std::string> names;            // per rule (generated rules get "parent_N")
    uint32_t root = 0;
};

// Limits that bound what a grammar (from a user, a schema or a fuzzer) may make the library allocate.
struct GrammarLimits {
    static constexpr size_t kMaxTextBytes = 1u << 20;      // GBNF text
    static constexpr size_t kMaxSymbols = 1u << 18;        // after expanding repetitions
    static constexpr size_t kMaxRules = 1u << 15;
    static constexpr uint32_t kMaxRepeat = 4096;           // the m and n of x{m,n}
    static constexpr uint32_t kMaxNesting = 128;           // parentheses in the text
    static constexpr uint32_t kMaxStackDepth = 256;        // rule calls open at once while matching
    // Parse stacks alive at once: an ambiguous grammar can double them with every character (two
    // alternatives that both begin with the same recursive rule); beyond this, matching fails.
    static constexpr size_t kMaxStacks = 1024;
    // A grammar's memory while matching (its automaton's states and transitions, and its cache of
    // token masks), whatever the text sampled: beyond it sampling fails with EMBER_ERR_OUT_OF_MEMORY.
    // Every allocation that grows with the text matched is charged where it is made, so the time spent
    // matching is bounded with it (work per new state is bounded by kMaxStacks).
    static constexpr size_t kMaxMatchBytes = size_t(128) << 20;
};

// Parses GBNF (llama.cpp's grammar syntax: `name ::= alternatives`, "literals", [classes], [^negated],
// `.`, ( groups ), * + ? {m} {m,} {m,n}, # comments; the rule `root` starts). Throws
// Error(EMBER_ERR_INVALID_ARGUMENT, "line L, column C: ...") for malformed text, undefined or duplicate
// rules, left recursion (which a top-down matcher cannot run), and text beyond GrammarLimits.
GrammarRules parse_gbnf(const std::string &text, const char *root_name = "root");

} // namespace ember::grammar
