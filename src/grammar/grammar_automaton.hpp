// grammar_automaton.hpp — runs GrammarRules over bytes, as a lazily built DFA.
//
// The grammar is a pushdown automaton over code points: a configuration is the set of parse stacks
// alive after the text so far, each stack waiting on a character class. Stacks are interned as nodes
// (position in the rules, parent node), so a configuration is a sorted list of node ids and is itself
// interned. Because token bytes are what the sampler sees, a DFA state is a configuration plus a
// partial UTF-8 character (the bits so far and the bytes still missing); its transitions per byte are
// computed on first use and kept, so walking a token's bytes, or a trie of the whole vocabulary, costs
// one table lookup per byte once a state has been seen. The grammar's recursion makes the set of
// configurations unbounded in principle; GrammarLimits::kMaxStackDepth bounds the stacks (deeper
// nesting is not offered) and kMaxBytes the memory: every node, closure, configuration, state and
// transition table is charged when it is made, so the automaton never holds more than that
// (exceeding it is an error, EMBER_ERR_OUT_OF_MEMORY; what was built so far stays valid).
//
// Not thread-safe: CompiledGrammar (grammar.hpp) serializes its use.
#pragma once

#include "grammar/grammar_rules.hpp"

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace ember::grammar {

class GrammarAutomaton {
public:
    static constexpr int32_t kDead = -1;
    // Everything the automaton builds while matching, charged as it is made (heap figures including
    // the containers' per-element overhead). With CompiledGrammar::kMaskCacheBytes this is a grammar's
    // whole memory beside the vocabulary it shares: GrammarLimits::kMaxMatchBytes.
    static constexpr size_t kMaxBytes = size_t(96) << 20;

    // Throws Error(EMBER_ERR_INVALID_ARGUMENT) when the grammar's expansion exceeds the limits.
    // max_bytes: kMaxBytes, or less (tests reach a smaller limit quickly).
    explicit GrammarAutomaton(GrammarRules rules, size_t max_bytes = kMaxBytes);

    int32_t start() const { return start_; }
    // The state after `byte`, or kDead when no parse can take it. Inline for the mask's trie walk: a
    // transition seen before is one table lookup.
    int32_t step(int32_t state, uint8_t byte) {
        const State &st = states_[static_cast<size_t>(state)];
        if (st.table >= 0) {
            if (st.remaining && (byte & 0xC0) != 0x80) return kDead;
            const int32_t t = table_[static_cast<size_t>(st.table) + (st.remaining ? (byte & 0x3Fu) : byte)];
            if (t != kUnknown) return t;
        }
        return step_slow(state, byte);
    }
    // Whether the text so far is a complete sentence of the grammar (no partial character pending).
    bool accepts(int32_t state) const { return states_[static_cast<size_t>(state)].accept; }
    // Whether the text so far can go on (some stack waits on a character).
    bool can_continue(int32_t state) const { return states_[static_cast<size_t>(state)].can_continue; }
    size_t n_states() const { return states_.size(); }
    size_t bytes() const { return bytes_; }
    const GrammarRules &rules() const { return g_; }

private:
    static constexpr uint32_t kNone = UINT32_MAX;
    static constexpr int32_t kUnknown = -2;

    struct Node { uint32_t pos, parent, depth; };
    struct State {
        uint32_t config;
        uint32_t cp;          // bits of the partial character so far
        uint8_t remaining;    // continuation bytes still missing (0: at a character boundary)
        uint8_t len;          // the partial character's length in bytes (its lead byte says)
        bool accept, can_continue;
        int64_t table = -1;   // offset of its transitions in table_ (256 entries, or 64 when partial)
    };

    uint32_t node(uint32_t pos, uint32_t parent);
    void closure_into(uint32_t n, std::vector<uint32_t> &out, uint32_t depth);
    uint32_t config(std::vector<uint32_t> &nodes);   // sorts, dedups, interns
    int32_t advance(uint32_t config, uint32_t cp);   // configuration id after cp, or kDead
    bool partial_ok(uint32_t config, uint32_t cp, uint8_t remaining, uint8_t len) const;
    int32_t state(uint32_t config, uint32_t cp, uint8_t remaining, uint8_t len);
    int32_t compute(int32_t from, uint8_t byte);
    int32_t step_slow(int32_t state, uint8_t byte);
    void charge(size_t bytes);   // throws beyond kMaxBytes, charging nothing
    // Room for n more elements, charged at the capacity the vector grows to (doubling).
    template <class V> void make_room(V &v, size_t n) {
        if (v.size() + n <= v.capacity()) return;
        const size_t cap = std::max(v.capacity() * 2, v.size() + n);
        charge((cap - v.capacity()) * sizeof(typename V::value_type));
        v.reserve(cap);
    }

    GrammarRules g_;
    std::vector<Node> nodes_;                          // node 0: the empty stack (the grammar is complete)
    std::unordered_map<uint64_t, uint32_t> node_ids_;
    std::vector<std::vector<uint32_t>> closure_;       // per node, once computed
    std::vector<uint8_t> closure_state_;               // 0 not yet, 1 in progress, 2 done
    std::vector<std::vector<uint32_t>> configs_;
    std::unordered_map<uint64_t, std::vector<uint32_t>> config_ids_;   // hash → candidates
    std::vector<State> states_;
    std::unordered_map<uint64_t, int32_t> state_ids_;
    std::vector<int32_t> table_;
    int32_t start_ = kDead;
    size_t bytes_ = 0;
    size_t max_bytes_;
};

} // namespace ember::grammar
