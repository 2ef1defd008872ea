// grammar_cache.hpp — the grammars of response_format schemas and of tool_choice, compiled once per
// distinct schema text or tool set and kept for later requests (a grammar caches the token masks of the
// states it has met, so clients asking for the same shape again get warm masks: a client sends the same
// tools with every turn of a conversation, and a tool call's first tokens cost the grammar's building
// of its masks only once).
//
// Bounded in bytes, not only in entries: a grammar grows while requests match it (up to the library's
// per-grammar limit, ember_grammar_memory), so the cache measures its grammars whenever one is added or
// a request using one ends, and drops the least recently used until the total (schema text included)
// is within budget. A grammar that has grown past a single entry's share is not kept at all: a client
// cannot park hostile grammars in the server's memory. Compiling happens outside the cache's lock, so a
// slow schema holds up no other request.
#pragma once

#include <ember/ember.h>

#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace server {

class GrammarCache {
public:
    struct Limits {
        size_t max_bytes = size_t(128) << 20;       // every grammar and schema kept, together
        size_t max_entry_bytes = size_t(32) << 20;  // one grammar beyond this is dropped when measured
        size_t max_entries = 32;
    };
    GrammarCache(const ember_model *model, Limits limits) : model_(model), limits_(limits) {}

    // The grammar for `schema`, compiled if it is not cached; nullptr (with the library's message in
    // *message) when the schema is refused.
    std::shared_ptr<ember_grammar> get(const std::string &schema, std::string *message);
    // The grammar kept under `key`, made by `make` if it is not cached (make returns a status and the
    // grammar; the library's message goes to *message when it fails, and nullptr is returned). A key
    // that is no schema text starts with a byte no JSON text starts with.
    using Make = std::function<ember_status(ember_grammar **)>;
    std::shared_ptr<ember_grammar> get(const std::string &key, std::string *message, const Make &make);
    // A request that used the grammar kept under `key` has ended: measures it again and trims the cache.
    void used(const std::string &key);
    // Bytes charged now (for tests and logs).
    size_t bytes();

private:
    struct Entry {
        std::shared_ptr<ember_grammar> grammar;
        size_t bytes = 0;                               // as last measured, schema text included
        std::list<std::string>::iterator lru;           // position in lru_ (front: most recent)
    };
    static size_t measure(const std::string &key, const ember_grammar *g);
    void trim_locked();   // drops oversized entries, then the least recent until within budget
    void erase_locked(std::unordered_map<std::string, Entry>::iterator it);

    const ember_model *model_;
    const Limits limits_;
    std::mutex mutex_;
    std::unordered_map<std::string, Entry> entries_;
    std::list<std::string> lru_;
    size_t bytes_ = 0;
};

} // namespace server
