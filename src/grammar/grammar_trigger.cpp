// grammar_trigger.cpp — lazy grammars (grammar.hpp's GrammarTriggers): what a matcher does while it
// waits for a trigger. It keeps only the last bytes generated that could still begin a word trigger and
// looks for the words there, so waiting costs a short string search per token and no grammar work.
#include "grammar/grammar.hpp"

#include "core/error.hpp"

#include <algorithm>

namespace ember::grammar {

void GrammarTriggers::check(int32_t n_vocab) const {
    if (words.size() > kMaxWords) fail(EMBER_ERR_INVALID_ARGUMENT, "%zu trigger words, more than %zu", words.size(), kMaxWords);
    if (tokens.size() > kMaxTokens)
        fail(EMBER_ERR_INVALID_ARGUMENT, "%zu trigger tokens, more than %zu", tokens.size(), kMaxTokens);
    for (size_t i = 0; i < words.size(); ++i)
        if (words[i].empty() || words[i].size() > kMaxWordBytes)
            fail(EMBER_ERR_INVALID_ARGUMENT, "trigger word %zu has %zu bytes (1 to %zu)", i, words[i].size(), kMaxWordBytes);
    for (int32_t t : tokens)
        if (t < 0 || t >= n_vocab) fail(EMBER_ERR_INVALID_ARGUMENT, "trigger token %d is outside the vocabulary of %d", t, n_vocab);
}

void CompiledGrammar::set_triggers(GrammarTriggers t) {
    t.check(vocab_->n_vocab);
    triggers_ = std::move(t);
}

void GrammarMatcher::watch(int32_t token) {
    const GrammarTriggers &t = g_->triggers();
    // Where the grammar takes over: from `state` on, constraining unless the match is already over.
    auto take_over = [&](int32_t state) {
        recent_.clear();
        if (state == GrammarAutomaton::kDead) return;   // text the grammar does not allow: it stays free text
        state_ = state;
        constraining_ = t.once || !g_->accepts(state);
    };
    if (std::find(t.tokens.begin(), t.tokens.end(), token) != t.tokens.end()) return take_over(g_->start());
    if (t.words.empty()) return;
    if (token < 0 || token >= g_->vocab().n_vocab) return;
    const std::string &piece = g_->vocab().pieces[static_cast<size_t>(token)];
    if (piece.empty()) {   // a control or end token: text on either side of it is not contiguous
        recent_.clear();
        return;
    }
    recent_ += piece;
    size_t at = std::string::npos, longest = 0;
    for (const std::string &w : t.words) {
        at = std::min(at, recent_.find(w));
        longest = std::max(longest, w.size());
    }
    if (at != std::string::npos) return take_over(g_->advance_bytes(g_->start(), recent_.substr(at)));
    // Only a tail shorter than the longest word can still begin one.
    if (recent_.size() >= longest) recent_.erase(0, recent_.size() - (longest - 1));
}

} // namespace ember::grammar
