#include "grammar/grammar.hpp"

#include "core/error.hpp"
#include "tokenizer/tokenizer.hpp"

#include <algorithm>
#include <bit>

namespace ember::grammar {

std::shared_ptr<const GrammarVocab> GrammarVocab::from_tokenizer(const Tokenizer &tok) {
    auto v = std::make_shared<GrammarVocab>();
    v->n_vocab = tok.n_vocab();
    v->pieces.resize(static_cast<size_t>(v->n_vocab));
    for (int32_t id = 0; id < v->n_vocab; ++id) {
        if (tok.is_eog(id)) {
            v->eog.push_back(id);
            continue;   // an end token's piece is not text the grammar matches
        }
        v->pieces[static_cast<size_t>(id)] = tok.token_to_piece(id, false);
    }
    v->trie = TokenTrie::build(v->pieces);
    return v;
}

bool GrammarVocab::is_eog(int32_t id) const { return std::find(eog.begin(), eog.end(), id) != eog.end(); }

CompiledGrammar::CompiledGrammar(GrammarRules rules, std::shared_ptr<const GrammarVocab> vocab, size_t max_automaton_bytes)
    : dfa_(std::move(rules), max_automaton_bytes), vocab_(std::move(vocab)), start_(dfa_.start()) {
    walk_states_.resize(static_cast<size_t>(vocab_->trie.max_depth) + 1);
}

int32_t CompiledGrammar::advance(int32_t state, int32_t token) {
    if (token < 0 || token >= vocab_->n_vocab) return GrammarAutomaton::kDead;
    std::lock_guard<std::mutex> lock(mutex_);
    if (vocab_->is_eog(token)) return dfa_.accepts(state) ? state : GrammarAutomaton::kDead;
    const std::string &p = vocab_->pieces[static_cast<size_t>(token)];
    if (p.empty()) return GrammarAutomaton::kDead;
    for (char c : p) {
        state = dfa_.step(state, static_cast<uint8_t>(c));
        if (state == GrammarAutomaton::kDead) break;
    }
    return state;
}

int32_t CompiledGrammar::advance_bytes(int32_t state, const std::string &bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (char c : bytes) {
        state = dfa_.step(state, static_cast<uint8_t>(c));
        if (state == GrammarAutomaton::kDead) break;
    }
    return state;
}

bool CompiledGrammar::accepts(int32_t state) {
    std::lock_guard<std::mutex> lock(mutex_);
    return dfa_.accepts(state);
}

std::shared_ptr<const TokenMask> CompiledGrammar::cached_mask(int32_t state) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = masks_.find(state);
    if (it == masks_.end()) return nullptr;
    ++stats_.mask_hits;
    return it->second;
}

std::shared_ptr<const TokenMask> CompiledGrammar::mask(int32_t state) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = masks_.find(state);
    if (it != masks_.end()) {
        ++stats_.mask_hits;
        return it->second;
    }
    auto m = compute_mask(state);
    cache_mask(state, m);
    return m;
}

void CompiledGrammar::cache_mask(int32_t state, std::shared_ptr<const TokenMask> m) {
    const size_t bytes = m->bits.size() * sizeof(uint64_t) + m->ids.size() * sizeof(int32_t);
    if (mask_bytes_ + bytes > kMaskCacheBytes) {   // simple bound: start over (the hot states return quickly)
        masks_.clear();
        mask_bytes_ = 0;
    }
    masks_.emplace(state, std::move(m));
    mask_bytes_ += bytes;
}

size_t CompiledGrammar::prepare(size_t max_states, size_t max_bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    max_bytes = std::min(max_bytes, kMaskCacheBytes);
    std::vector<int32_t> queue{start_};
    size_t computed = 0;
    // The states met so far: the DFA grows as the walks step into new states, so seen_ grows with it.
    ++seen_round_;
    auto mark = [&](int32_t s) {
        if (static_cast<size_t>(s) >= seen_.size()) seen_.resize(std::max<size_t>(dfa_.n_states(), size_t(s) + 1) * 2, 0);
        if (seen_[static_cast<size_t>(s)] == seen_round_) return false;
        seen_[static_cast<size_t>(s)] = seen_round_;
        return true;
    };
    mark(start_);
    // A trigger word found inside a token starts the grammar part-way through the word (the matcher
    // steps the word's bytes from its first): every prefix of a word is a place a call may begin.
    for (const std::string &w : triggers_.words) {
        int32_t s = start_;
        for (char c : w) {
            s = dfa_.step(s, static_cast<uint8_t>(c));
            if (s == GrammarAutomaton::kDead) break;
            if (mark(s)) queue.push_back(s);
        }
    }
    for (size_t head = 0; head < queue.size() && computed < max_states; ++head) {
        const int32_t s = queue[head];
        if (masks_.count(s)) continue;
        std::vector<int32_t> next;
        auto m = compute_mask(s, &next);
        const size_t bytes = m->bits.size() * sizeof(uint64_t) + m->ids.size() * sizeof(int32_t);
        if (mask_bytes_ + bytes > max_bytes) break;
        cache_mask(s, std::move(m));
        ++computed;
        for (int32_t t : next)
            if (mark(t)) queue.push_back(t);
    }
    return computed;
}

// One preorder pass over the trie: a node's state is its parent's (at depth - 1) stepped by its byte;
// a dead node skips its subtree.
std::shared_ptr<const TokenMask> CompiledGrammar::compute_mask(int32_t state, std::vector<int32_t> *next) {
    ++stats_.masks_computed;
    auto m = std::make_shared<TokenMask>();
    m->bits.assign((static_cast<size_t>(vocab_->n_vocab) + 63) / 64, 0);
    const TokenTrie &t = vocab_->trie;
    walk_states_[0] = state;
    const size_t n = t.size();
    uint64_t visited = 0;
    for (size_t i = 0; i < n;) {
        ++visited;
        const int32_t s = dfa_.step(walk_states_[t.depth[i] - 1u], t.byte[i]);
        if (s == GrammarAutomaton::kDead) {
            i = t.skip[i];
            continue;
        }
        walk_states_[t.depth[i]] = s;
        if (next && t.tok_begin[i] < t.tok_begin[i + 1] && (next->empty() || next->back() != s)) next->push_back(s);
        for (uint32_t k = t.tok_begin[i]; k < t.tok_begin[i + 1]; ++k) {
            const int32_t id = t.toks[k];
            m->bits[static_cast<size_t>(id) >> 6] |= uint64_t(1) << (id & 63);
            ++m->n_allowed;
        }
        ++i;
    }
    if (dfa_.accepts(state))
        for (int32_t id : vocab_->eog) {
            m->bits[static_cast<size_t>(id) >> 6] |= uint64_t(1) << (id & 63);
            ++m->n_allowed;
        }
    stats_.trie_nodes_visited += visited;
    if (TokenMask::lists(m->n_allowed, static_cast<size_t>(vocab_->n_vocab))) {
        m->ids.reserve(m->n_allowed);
        for (size_t w = 0; w < m->bits.size(); ++w)
            for (uint64_t b = m->bits[w]; b; b &= b - 1)
                m->ids.push_back(static_cast<int32_t>(w * 64 + static_cast<size_t>(std::countr_zero(b))));
    }
    return m;
}

size_t CompiledGrammar::bytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return dfa_.bytes() + mask_bytes_;
}

CompiledGrammar::Stats CompiledGrammar::stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    Stats s = stats_;
    s.dfa_states = dfa_.n_states();
    return s;
}

void GrammarMatcher::accept(int32_t token) {
    if (!constraining_) return watch(token);
    const int32_t next = g_->advance(state_, token);
    if (next == GrammarAutomaton::kDead)
        fail(EMBER_ERR_INVALID_ARGUMENT, "token %d is not allowed by the grammar here", token);
    state_ = next;
    // A lazy grammar's match is over once complete: free text again (`once`: only the end may follow,
    // which the complete state's mask allows).
    if (g_->lazy() && !g_->triggers().once && g_->accepts(state_)) constraining_ = false;
}

void GrammarMatcher::reset() {
    state_ = g_->start();
    constraining_ = !g_->lazy();
    recent_.clear();
}

} // namespace ember::grammar
