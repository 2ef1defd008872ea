#include "sampler/stop_strings.hpp"

#include "core/error.hpp"
#include "tokenizer/tokenizer.hpp"

#include <algorithm>

namespace ember {

StopStrings::StopStrings(std::vector<std::string> stops) {
    for (std::string &s : stops) {
        if (s.empty()) continue;
        if (s.size() > kMaxBytes) fail(EMBER_ERR_INVALID_ARGUMENT, "a stop string is %zu bytes, more than %zu", s.size(), kMaxBytes);
        // The text matched is whole UTF-8 characters; a stop string that is not (a lone continuation
        // byte, half a character) could end it inside one.
        if (utf8_sanitize(s) != s) fail(EMBER_ERR_INVALID_ARGUMENT, "a stop string is not valid UTF-8 (stop strings match whole characters)");
        stops_.push_back(std::move(s));
    }
    if (stops_.size() > kMaxCount) fail(EMBER_ERR_INVALID_ARGUMENT, "%zu stop strings, more than %zu", stops_.size(), kMaxCount);
}

std::string StopStrings::push(std::string_view text) {
    if (stopped_) return {};
    if (stops_.empty()) return std::string(text);
    held_.append(text);
    // The earliest complete stop string ends generation; the text before it is emitted.
    size_t first = std::string::npos;
    for (const std::string &s : stops_) first = std::min(first, held_.find(s));
    if (first != std::string::npos) {
        std::string out = held_.substr(0, first);
        held_.clear();
        stopped_ = true;
        return out;
    }
    // Hold back the longest suffix that is a proper prefix of some stop string.
    size_t keep = 0;
    for (const std::string &s : stops_)
        for (size_t k = std::min(s.size() - 1, held_.size()); k > keep; --k)
            if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
                keep = k;
                break;
            }
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
}

std::string StopStrings::finish() {
    std::string out;
    out.swap(held_);
    return stopped_ ? std::string() : out;
}

} // namespace ember
