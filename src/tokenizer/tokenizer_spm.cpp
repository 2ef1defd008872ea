// tokenizer_spm.cpp — the SentencePiece-style tokenizer (tokenizer.ggml.model "llama").
//
// The text has its spaces escaped as "▁" (and one "▁" put in front), is cut into UTF-8 characters, and
// adjacent symbols are merged while their concatenation is a vocabulary entry, always taking the
// highest-scoring such pair first (leftmost on ties). What is left that is not a token is spelled with
// byte tokens. This is what llama.cpp does, so its test vectors come out the same.
#include "core/error.hpp"
#include "tokenizer/tokenizer_impl.hpp"
#include "tokenizer/unicode.hpp"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <queue>

namespace ember::tok {

namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";   // U+2581 "▁"

struct Symbol {
    uint32_t start, len;   // bytes of the escaped text; len 0 once merged into the symbol on its left
    int32_t prev, next;
};

struct Bigram {
    float score;
    int32_t left, right;
    uint32_t len;   // bytes the pair covered when queued: a later mismatch means it is stale
};

struct BigramOrder {
    bool operator()(const Bigram &a, const Bigram &b) const {
        return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
};

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

// The byte of a "<0xAB>" token text, or -1.
int byte_token_value(const std::string &t) {
    if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
    const int hi = hex_digit(t[3]), lo = hex_digit(t[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

} // namespace

SpmTokenizer::SpmTokenizer(const gguf::File &file) {
    load_vocab(file, "llama", true);
    pre_ = std::string(file.get_string("tokenizer.ggml.pre").value_or("default"));

    const size_t n = tokens_.size();
    const gguf::Value *scores = file.get_array("tokenizer.ggml.scores");
    if (!scores) fail(EMBER_ERR_INVALID_MODEL, "missing tokenizer.ggml.scores");
    if (scores->count != n)
        fail(EMBER_ERR_INVALID_MODEL, "tokenizer.ggml.scores has %" PRIu64 " entries but tokenizer.ggml.tokens has %zu",
             scores->count, n);
    if (scores->elem_type == gguf::ValueType::STRING || scores->elem_type == gguf::ValueType::ARRAY ||
        !scores->elems)
        fail(EMBER_ERR_INVALID_MODEL, "tokenizer.ggml.scores is an array of %s, expected numbers",
             gguf::value_type_name(scores->elem_type));
    scores_.resize(n);
    if (scores->elem_type == gguf::ValueType::F32) {
        std::memcpy(scores_.data(), scores->elems, n * sizeof(float));
    } else {
        for (size_t i = 0; i < n; ++i) scores_[i] = float(scores->array_float(i));
    }

    add_space_prefix_ = file.get_bool("tokenizer.ggml.add_space_prefix").value_or(true);
    strip_leading_space_ = add_space_prefix_;

    for (int b = 0; b < 256; ++b) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "<0x%02X>", b);
        byte_tokens_[b] = find(hex);
    }

    split_at_spaces_ = true;
    for (const std::string &t : tokens_)
        for (size_t at = t.find(kSpaceMark, 1); at != std::string::npos && split_at_spaces_; at = t.find(kSpaceMark, at + 1))
            if (at < kSpaceMark.size() || t.compare(at - kSpaceMark.size(), kSpaceMark.size(), kSpaceMark) != 0)
                split_at_spaces_ = false;
}

namespace {
bool is_char_start(char c) { return (uint8_t(c) & 0xC0) != 0x80; }
} // namespace

// Merging over the whole text at once took a priority queue as large as the text (45-60 bytes of
// memory per byte, and time growing faster than the text as it outgrew the caches). Words are merged
// one at a time instead: exact where split_at_spaces_ holds (checked against the vocabulary at load),
// and a word is cut every kMaxPieceBytes bytes otherwise (or when longer than that, as a text with no
// spaces is), which only changes the tokens at the cuts.
void SpmTokenizer::encode(std::string_view text, bool first_or_after_special, std::vector<int32_t> &out) const {
    bool prefix = add_space_prefix_ && first_or_after_special;
    size_t start = 0;
    for (size_t i = 1; i <= text.size(); ++i) {
        bool cut = i == text.size();
        if (!cut && split_at_spaces_ && text[i] == ' ' && text[i - 1] != ' ')
            cut = !(i >= kSpaceMark.size() && text.compare(i - kSpaceMark.size(), kSpaceMark.size(), kSpaceMark) == 0);
        if (!cut && i - start >= kMaxPieceBytes && is_char_start(text[i])) cut = true;
        if (!cut) continue;
        encode_word(text.substr(start, i - start), prefix, out);
        prefix = false;
        start = i;
    }
}

void SpmTokenizer::encode_word(std::string_view text, bool space_prefix, std::vector<int32_t> &out) const {
    std::string s;
    s.reserve(text.size() * 2 + 3);
    if (space_prefix) s += kSpaceMark;
    for (char c : text) {
        if (c == ' ') s += kSpaceMark;
        else s += c;
    }

    // One symbol per UTF-8 character; an ill-formed subpart is a symbol of its own and ends up as bytes.
    std::vector<Symbol> syms;
    syms.reserve(s.size());
    const auto *p = reinterpret_cast<const uint8_t *>(s.data());
    for (size_t i = 0; i < s.size();) {
        const size_t len = utf8_decode(p + i, s.size() - i).len;
        const int32_t idx = int32_t(syms.size());
        syms.push_back({uint32_t(i), uint32_t(len), idx - 1, i + len < s.size() ? idx + 1 : -1});
        i += len;
    }
    if (syms.empty()) return;

    std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
    auto try_pair = [&](int32_t l, int32_t r) {
        if (l < 0 || r < 0) return;
        const uint32_t len = syms[l].len + syms[r].len;
        const int32_t id = find(std::string_view(s).substr(syms[l].start, len));
        if (id >= 0) queue.push({scores_[id], l, r, len});
    };
    for (int32_t i = 1; i < int32_t(syms.size()); ++i) try_pair(i - 1, i);

    while (!queue.empty()) {
        const Bigram b = queue.top();
        queue.pop();
        Symbol &left = syms[b.left], &right = syms[b.right];
        if (left.len == 0 || right.len == 0 || left.len + right.len != b.len) continue;
        left.len += right.len;
        right.len = 0;
        left.next = right.next;
        if (right.next >= 0) syms[right.next].prev = b.left;
        try_pair(left.prev, b.left);
        try_pair(b.left, left.next);
    }

    for (int32_t i = 0; i != -1; i = syms[i].next) {
        const std::string_view piece = std::string_view(s).substr(syms[i].start, syms[i].len);
        const int32_t id = find(piece);
        if (id >= 0) {
            out.push_back(id);
            continue;
        }
        // Byte fallback needs every byte of the piece; without it the piece is one unknown token.
        bool all_bytes = true;
        for (char c : piece) all_bytes = all_bytes && byte_tokens_[uint8_t(c)] >= 0;
        if (all_bytes) {
            for (char c : piece) out.push_back(byte_tokens_[uint8_t(c)]);
        } else if (unk_ >= 0) {
            out.push_back(unk_);
        }
    }
}

std::string SpmTokenizer::token_to_piece(int32_t id, bool render_special) const {
    std::string piece;
    if (special_piece(id, render_special, piece)) return piece;
    const std::string &t = tokens_[size_t(id)];
    if (types_[size_t(id)] == TokenType::BYTE)
        if (const int b = byte_token_value(t); b >= 0) return std::string(1, char(b));
    piece.reserve(t.size());
    for (size_t i = 0; i < t.size();) {
        if (t.compare(i, kSpaceMark.size(), kSpaceMark) == 0) {
            piece += ' ';
            i += kSpaceMark.size();
        } else {
            piece += t[i++];
        }
    }
    return piece;
}

} // namespace ember::tok
