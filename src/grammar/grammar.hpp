// grammar.hpp — a grammar bound to a model's vocabulary: which tokens may come next.
//
// CompiledGrammar is shared (an ember_grammar handle, every sampler it is attached to, engine requests):
// its lazily built DFA and its cache of token masks are guarded by one mutex, so any number of matchers
// on any threads may use it. A GrammarMatcher is one sequence's position in the grammar (an int).
//
// Cost: a mask for a grammar state is computed once, by walking the vocabulary's trie through the DFA,
// and then cached (whole-state caching: the DFA state is the complete parse configuration, so its mask
// never changes); a game loop's JSON reaches the same few states over and over, so after the first
// generation most steps only apply a cached bit mask.
#pragma once

#include "grammar/grammar_automaton.hpp"
#include "grammar/token_trie.hpp"

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace ember {
class Tokenizer;
}

namespace ember::grammar {

// One bit per token: may it come next. A mask that allows few tokens (at most an eighth of the
// vocabulary: digits, an enum's words, JSON punctuation) also lists them, so the sampler's stages cost
// O(allowed tokens) there instead of O(vocabulary); a list of every allowed token of a mask inside a
// string would cost more memory than its bits and save nothing (most tokens pass there).
struct TokenMask {
    std::vector<uint64_t> bits;
    std::vector<int32_t> ids;   // the allowed tokens in ascending order when few are allowed, else empty
    size_t n_allowed = 0;
    bool test(int32_t id) const { return (bits[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1u; }
    bool listed() const { return !ids.empty(); }
    static bool lists(size_t n_allowed, size_t n_vocab) { return n_allowed > 0 && n_allowed <= n_vocab / 8; }
};

// The vocabulary's side, built once per model and shared by its grammars.
struct GrammarVocab {
    TokenTrie trie;
    std::vector<std::string> pieces;   // bytes per token ("" for control tokens: never allowed by a grammar)
    std::vector<int32_t> eog;          // end-of-generation tokens: allowed where the grammar is complete
    int32_t n_vocab = 0;
    static std::shared_ptr<const GrammarVocab> from_tokenizer(const Tokenizer &tok);
    bool is_eog(int32_t id) const;
};

// What switches a lazy grammar on (ember_grammar_create_lazy, tool_choice auto): until a trigger
// appears in the generated text the grammar constrains nothing and costs nothing but a look at each
// token's bytes. A word trigger is text: the grammar matches the text from the word's first byte (so a
// word split across tokens, or preceded by other text in its token, is found). A token trigger is a
// token id (a control token such as [TOOL_CALLS], whose text a grammar cannot match): the grammar
// matches what follows it. Once the text matched since the trigger is complete under the grammar, the
// constraint ends and free text resumes until the next trigger; with `once`, the grammar applies once
// and only an end-of-generation token may follow it.
struct GrammarTriggers {
    static constexpr size_t kMaxWords = 16, kMaxWordBytes = 256, kMaxTokens = 16;
    std::vector<std::string> words;
    std::vector<int32_t> tokens;
    bool once = false;
    bool empty() const { return words.empty() && tokens.empty(); }
    // Throws Error(EMBER_ERR_INVALID_ARGUMENT) for an empty or over-long word, a token outside the
    // vocabulary, or more triggers than the limits.
    void check(int32_t n_vocab) const;
};

class CompiledGrammar {
public:
    // Throws Error(EMBER_ERR_INVALID_ARGUMENT) for a grammar beyond the limits.
    // max_automaton_bytes: the automaton's limit (GrammarAutomaton::kMaxBytes, or less in tests).
    CompiledGrammar(GrammarRules rules, std::shared_ptr<const GrammarVocab> vocab,
                    size_t max_automaton_bytes = GrammarAutomaton::kMaxBytes);

    // Makes the grammar lazy (before it is shared: the triggers are read without the lock).
    void set_triggers(GrammarTriggers t);
    const GrammarTriggers &triggers() const { return triggers_; }
    bool lazy() const { return !triggers_.empty(); }

    int32_t start() const { return start_; }
    // The state after token id, or GrammarAutomaton::kDead when the grammar does not allow it. An
    // end-of-generation token is allowed, leaving the state as it is, where the grammar is complete.
    int32_t advance(int32_t state, int32_t token);
    // The state after arbitrary bytes (kDead when not allowed).
    int32_t advance_bytes(int32_t state, const std::string &bytes);
    // The tokens allowed next; cached per state. Shared so a caller may keep it past later calls.
    std::shared_ptr<const TokenMask> mask(int32_t state);
    // The mask of a state if it was computed before (nullptr otherwise): the sampler uses it where it
    // is at hand and checks single tokens' bytes where it is not.
    std::shared_ptr<const TokenMask> cached_mask(int32_t state);
    bool accepts(int32_t state);
    const GrammarVocab &vocab() const { return *vocab_; }

    // Computes ahead the masks of the states that whole tokens reach from the start (and from each prefix
    // of a trigger word, where a call found inside a token begins), breadth first, until
    // every such state has its mask or `max_states` masks or `max_bytes` of them are cached; returns how
    // many it computed. A lazy grammar's first call after its trigger then costs no more than later ones
    // (each new state's mask is a walk of the vocabulary, which would otherwise fall in the middle of
    // decoding); what does not fit is computed when first met, as for any grammar.
    size_t prepare(size_t max_states, size_t max_bytes);

    // Counters for benchmarks and tests.
    struct Stats { uint64_t masks_computed = 0, mask_hits = 0, trie_nodes_visited = 0; size_t dfa_states = 0; };
    Stats stats();

    static constexpr size_t kMaskCacheBytes = size_t(32) << 20;   // the cache is cleared beyond this
    static_assert(GrammarAutomaton::kMaxBytes + kMaskCacheBytes == GrammarLimits::kMaxMatchBytes);

    // What the grammar holds now beside the vocabulary: its automaton and its cached masks.
    size_t bytes();

private:
    // next: where given, receives each state a token allowed here leads to, once (see prepare()).
    std::shared_ptr<const TokenMask> compute_mask(int32_t state, std::vector<int32_t> *next = nullptr);
    void cache_mask(int32_t state, std::shared_ptr<const TokenMask> m);

    std::mutex mutex_;
    GrammarAutomaton dfa_;
    std::shared_ptr<const GrammarVocab> vocab_;
    std::unordered_map<int32_t, std::shared_ptr<const TokenMask>> masks_;
    size_t mask_bytes_ = 0;
    std::vector<int32_t> walk_states_;   // per trie depth, reused
    std::vector<uint32_t> seen_;         // per DFA state: the prepare() round that listed it
    uint32_t seen_round_ = 0;
    Stats stats_;
    int32_t start_;
    GrammarTriggers triggers_;
};

// One sequence's position in a grammar. Of a lazy grammar, also whether it constrains now: before its
// trigger (and after each complete match) it does not, and accept() only looks for the triggers.
class GrammarMatcher {
public:
    explicit GrammarMatcher(std::shared_ptr<CompiledGrammar> g)
        : g_(std::move(g)), state_(g_->start()), constraining_(!g_->lazy()) {}
    // Throws Error(EMBER_ERR_INVALID_ARGUMENT) for a token the grammar does not allow here (the state
    // is unchanged then); while a lazy grammar does not constrain, every token is accepted.
    void accept(int32_t token);
    // mask(), cached_mask(), allows() and complete() describe the grammar's position: ask them only
    // while constraining() (a lazy grammar waiting for its trigger has no position yet).
    bool constraining() const { return constraining_; }
    std::shared_ptr<const TokenMask> mask() { return g_->mask(state_); }
    std::shared_ptr<const TokenMask> cached_mask() { return g_->cached_mask(state_); }
    // Whether the grammar allows `token` next (its bytes stepped through; no mask needed).
    bool allows(int32_t token) { return g_->advance(state_, token) != GrammarAutomaton::kDead; }
    bool complete() { return g_->accepts(state_); }
    void reset();
    CompiledGrammar &grammar() { return *g_; }
    const std::shared_ptr<CompiledGrammar> &shared() const { return g_; }
    int32_t state() const { return state_; }

private:
    // A lazy grammar that does not constrain: looks for a trigger in what `token` adds.
    void watch(int32_t token);

    std::shared_ptr<CompiledGrammar> g_;
    int32_t state_;
    bool constraining_;
    std::string recent_;   // lazy, waiting: the last bytes generated, where a word trigger may have begun
};

} // namespace ember::grammar
