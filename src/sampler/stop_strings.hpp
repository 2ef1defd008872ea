// stop_strings.hpp — ends generation at any of a set of strings, across token boundaries, without
// emitting the stop text.
//
// Text goes in as the tokens complete it; what comes out is the text that can no longer be the start
// of a stop string. A suffix that could still grow into one is held back until the next token decides:
// either the stop string completes (the held text and the rest are dropped and stopped() is set) or it
// cannot (the held text comes out). finish() releases what is held when generation ends otherwise.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ember {

class StopStrings {
public:
    StopStrings() = default;
    // Empty strings are ignored. Throws Error(EMBER_ERR_INVALID_ARGUMENT) beyond kMaxCount strings or
    // kMaxBytes bytes each, or for a string that is not valid UTF-8. The text pushed is whole UTF-8
    // characters (Utf8Stream's output), so every match starts and ends at a character boundary and
    // what comes out is whole characters too.
    explicit StopStrings(std::vector<std::string> stops);

    static constexpr size_t kMaxCount = 16, kMaxBytes = 1024;

    // The text now safe to emit. After a stop, returns "" for everything.
    std::string push(std::string_view text);
    // What is held back (at the end of generation, when no stop came).
    std::string finish();
    bool stopped() const { return stopped_; }
    // Starts matching anew: drops what is held and forgets a stop (the strings stay).
    void restart() {
        held_.clear();
        stopped_ = false;
    }
    bool empty() const { return stops_.empty(); }

private:
    std::vector<std::string> stops_;
    std::string held_;
    bool stopped_ = false;
};

} // namespace ember
