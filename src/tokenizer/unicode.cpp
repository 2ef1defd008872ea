// unicode.cpp — code point classes, UTF-8 decoding and the GPT-2 byte alphabet.
#include "tokenizer/unicode.hpp"

#include <algorithm>
#include <array>

namespace ember::tok {

namespace {

// \p{P} in ASCII: the rest of the printable non-alphanumerics ($+<=>^`|~) are symbols (\p{S}).
constexpr bool is_ascii_punct(int c) {
    for (const char *p = "!\"#%&'()*,-./:;?@[\\]_{}"; *p; ++p)
        if (*p == c) return true;
    return false;
}

// ASCII is most of the text in practice, so it skips the binary search.
constexpr std::array<CpClass, 128> make_ascii_classes() {
    std::array<CpClass, 128> t{};
    for (int c = 0; c < 128; ++c) {
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) t[c] = CpClass::Letter;
        else if (c >= '0' && c <= '9') t[c] = CpClass::Number;
        else if (c == ' ' || (c >= 0x09 && c <= 0x0D)) t[c] = CpClass::Space;
        else if (is_ascii_punct(c)) t[c] = CpClass::Punct;
        else if (c > 0x20 && c < 0x7F) t[c] = CpClass::Symbol;   // $+<=>^`|~
        else t[c] = CpClass::Other;
    }
    return t;
}
constexpr std::array<CpClass, 128> kAsciiClasses = make_ascii_classes();

constexpr bool is_printable_byte(int b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct ByteAlphabet {
    std::array<uint32_t, 256> to_cp{};
    std::array<int16_t, 0x100 + 68> to_byte{};
    constexpr ByteAlphabet() {
        for (auto &v : to_byte) v = -1;
        uint32_t next = 0x100;
        for (int b = 0; b < 256; ++b) {
            to_cp[b] = is_printable_byte(b) ? uint32_t(b) : next++;
            to_byte[to_cp[b]] = int16_t(b);
        }
    }
};
constexpr ByteAlphabet kByteAlphabet;

} // namespace

CpClass cp_class(uint32_t cp) {
    if (cp < 128) return kAsciiClasses[cp];
    const CpRange *end = kCpRanges + kCpRangeCount;
    const CpRange *r = std::upper_bound(kCpRanges, end, cp,
                                        [](uint32_t c, const CpRange &range) { return c < range.first; });
    if (r == kCpRanges) return CpClass::Other;
    --r;
    return cp <= r->last ? r->cls : CpClass::Other;
}

Utf8Decoded utf8_decode(const uint8_t *s, size_t n) {
    const uint8_t b0 = s[0];
    if (b0 < 0x80) return {Utf8Decoded::Valid, 1, b0};
    int len;
    uint8_t lo = 0x80, hi = 0xBF;   // allowed range of the second byte: excludes overlongs and surrogates
    uint32_t cp;
    if (b0 >= 0xC2 && b0 <= 0xDF) { len = 2; cp = b0 & 0x1F; }
    else if (b0 >= 0xE0 && b0 <= 0xEF) {
        len = 3; cp = b0 & 0x0F;
        if (b0 == 0xE0) lo = 0xA0;
        if (b0 == 0xED) hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        len = 4; cp = b0 & 0x07;
        if (b0 == 0xF0) lo = 0x90;
        if (b0 == 0xF4) hi = 0x8F;
    } else {
        return {Utf8Decoded::Invalid, 1, 0};
    }
    for (int i = 1; i < len; ++i) {
        if (size_t(i) >= n) return {Utf8Decoded::Incomplete, uint8_t(i), 0};
        const uint8_t b = s[i];
        const uint8_t l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (b < l || b > h) return {Utf8Decoded::Invalid, uint8_t(i), 0};
        cp = (cp << 6) | (b & 0x3F);
    }
    return {Utf8Decoded::Valid, uint8_t(len), cp};
}

void utf8_append(std::string &out, uint32_t cp) {
    if (cp < 0x80) {
        out += char(cp);
    } else if (cp < 0x800) {
        out += char(0xC0 | (cp >> 6));
        out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += char(0xE0 | (cp >> 12));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    } else {
        out += char(0xF0 | (cp >> 18));
        out += char(0x80 | ((cp >> 12) & 0x3F));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    }
}

uint32_t byte_to_cp(uint8_t b) { return kByteAlphabet.to_cp[b]; }

int cp_to_byte(uint32_t cp) { return cp < kByteAlphabet.to_byte.size() ? kByteAlphabet.to_byte[cp] : -1; }

} // namespace ember::tok
