#include "grammar_cache.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace server {

size_t GrammarCache::measure(const std::string &key, const ember_grammar *g) {
    size_t bytes = 0;
    if (ember_grammar_memory(g, &bytes) != EMBER_OK) bytes = 0;
    return bytes + key.size() * 2;   // the key, and its copy in the recency list
}

std::shared_ptr<ember_grammar> GrammarCache::get(const std::string &schema, std::string *message) {
    return get(schema, message, [&](ember_grammar **g) {
        return ember_grammar_create_json_schema(model_, schema.data(), schema.size(), g);
    });
}

std::shared_ptr<ember_grammar> GrammarCache::get(const std::string &key, std::string *message, const Make &make) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = entries_.find(key);
        if (it != entries_.end()) {
            lru_.splice(lru_.begin(), lru_, it->second.lru);
            return it->second.grammar;
        }
    }
    // Not under the lock: a grammar may take a while, and other requests' lookups must not wait for it.
    // Two requests with the same new key may both compile it; the first one stored is kept.
    ember_grammar *g = nullptr;
    if (make(&g) != EMBER_OK) {
        *message = ember_last_error();
        return nullptr;
    }
    std::shared_ptr<ember_grammar> shared(g, ember_grammar_free);
    const size_t bytes = measure(key, g);
    if (bytes > limits_.max_entry_bytes) return shared;   // served, not kept
    std::lock_guard<std::mutex> lock(mutex_);
    auto [it, added] = entries_.try_emplace(key);
    if (!added) return it->second.grammar;
    lru_.push_front(key);
    it->second = Entry{shared, bytes, lru_.begin()};
    bytes_ += bytes;
    trim_locked();
    return shared;
}

void GrammarCache::used(const std::string &key) {
    bool trimmed = false;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = entries_.find(key);
        if (it == entries_.end()) return;
        const size_t now = measure(key, it->second.grammar.get());
        bytes_ += now - it->second.bytes;   // unsigned arithmetic: wraps back correctly when it shrank
        it->second.bytes = now;
        const size_t before = entries_.size();
        trim_locked();
        trimmed = entries_.size() != before;
    }
#if defined(__GLIBC__)
    // A dropped grammar's memory (large tables) goes back to the system, not only to malloc's free lists,
    // so the server's footprint returns to where it was once a burst of large grammars has passed.
    if (trimmed) malloc_trim(0);
#else
    (void)trimmed;
#endif
}

size_t GrammarCache::bytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return bytes_;
}

void GrammarCache::erase_locked(std::unordered_map<std::string, Entry>::iterator it) {
    bytes_ -= it->second.bytes;
    lru_.erase(it->second.lru);
    entries_.erase(it);   // requests still using the grammar keep their own references
}

void GrammarCache::trim_locked() {
    for (auto it = entries_.begin(); it != entries_.end();) {
        auto next = std::next(it);
        if (it->second.bytes > limits_.max_entry_bytes) erase_locked(it);
        it = next;
    }
    while (!lru_.empty() && (bytes_ > limits_.max_bytes || entries_.size() > limits_.max_entries))
        erase_locked(entries_.find(lru_.back()));
}

} // namespace server
