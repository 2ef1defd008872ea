// unicode.hpp — the little Unicode the tokenizers need: UTF-8 decoding that never throws, the code point
// classes of the pre-tokenizer regexes, and GPT-2's byte <-> code point alphabet. Private to src/tokenizer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ember::tok {

// \p{L}, \p{N}, \s (White_Space), \p{P}, \p{S}, \p{M}, or anything else. Disjoint, so one lookup answers
// every question the regexes ask. Punct, Symbol and Mark are parts of [^\s\p{L}\p{N}] that a few
// pre-tokenizers tell apart.
enum class CpClass : uint8_t { Other = 0, Letter = 1, Number = 2, Space = 3, Punct = 4, Symbol = 5, Mark = 6 };

struct CpRange {
    uint32_t first, last;
    CpClass cls;
};
extern const CpRange kCpRanges[];   // sorted, non-overlapping (unicode_tables.cpp, generated)
extern const size_t kCpRangeCount;

CpClass cp_class(uint32_t cp);

// Result of decoding one UTF-8 sequence at the start of a byte range.
struct Utf8Decoded {
    enum Kind : uint8_t { Valid, Invalid, Incomplete } kind;
    uint8_t len;   // Valid: bytes of the character; Invalid: bytes to replace by one U+FFFD (the maximal
                   // ill-formed subpart, as Unicode recommends); Incomplete: bytes present so far
    uint32_t cp;   // Valid only
};
// n must be > 0. Incomplete means the bytes so far are a valid prefix that more input could finish.
Utf8Decoded utf8_decode(const uint8_t *s, size_t n);

void utf8_append(std::string &out, uint32_t cp);

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// GPT-2's byte-level alphabet: bytes that are printable stand for themselves (as code points), the other
// 68 are moved to U+0100.. in byte order, so every byte has a visible, non-space character.
uint32_t byte_to_cp(uint8_t b);
// The byte a code point of that alphabet stands for, or -1.
int cp_to_byte(uint32_t cp);

} // namespace ember::tok
