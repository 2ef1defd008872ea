// utf8.cpp — Utf8Stream and utf8_sanitize (declared in tokenizer.hpp).
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/unicode.hpp"

namespace ember {

namespace {

// Appends the valid characters of s (invalid subparts as U+FFFD) and returns how many bytes were used:
// all of them, except an incomplete final sequence when hold_tail is set.
size_t sanitize_into(std::string &out, std::string_view s, bool hold_tail) {
    const auto *p = reinterpret_cast<const uint8_t *>(s.data());
    size_t i = 0;
    while (i < s.size()) {
        const tok::Utf8Decoded d = tok::utf8_decode(p + i, s.size() - i);
        if (d.kind == tok::Utf8Decoded::Valid) {
            out.append(s.data() + i, d.len);
        } else if (d.kind == tok::Utf8Decoded::Incomplete && hold_tail) {
            return i;
        } else {
            tok::utf8_append(out, tok::kReplacementChar);
        }
        i += d.len;
    }
    return i;
}

} // namespace

std::string Utf8Stream::push(std::string_view bytes) {
    pending_.append(bytes);
    std::string out;
    const size_t used = sanitize_into(out, pending_, true);
    pending_.erase(0, used);
    return out;
}

std::string Utf8Stream::flush() {
    std::string out;
    sanitize_into(out, pending_, false);
    pending_.clear();
    return out;
}

std::string utf8_sanitize(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    sanitize_into(out, s, false);
    return out;
}

} // namespace ember
