// tokenizer_wordpiece.cpp — BERT's WordPiece (wordpiece.hpp says what it does and why the GGUF form has
// "▁" in it).
#include "core/error.hpp"
#include "tokenizer/unicode.hpp"
#include "tokenizer/wordpiece.hpp"

#include <algorithm>

namespace ember::tok {

namespace {

constexpr std::string_view kWordStart = "\xE2\x96\x81";   // "▁"

// CJK ideographs, which BERT's normalizer makes words of their own (the blocks its reference
// implementation lists).
bool is_cjk(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
           (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

} // namespace

uint32_t cp_lower(uint32_t cp) {
    if (cp < 128) return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
    const CpPair *end = kLowercase + kLowercaseCount;
    const CpPair *p = std::lower_bound(kLowercase, end, cp, [](const CpPair &a, uint32_t c) { return a.cp < c; });
    return p != end && p->cp == cp ? p->mapped : cp;
}

uint32_t cp_decomposed_base(uint32_t cp) {
    if (cp < 0xC0) return cp;
    const CpBaseRange *end = kDecomposed + kDecomposedCount;
    const CpBaseRange *r = std::upper_bound(kDecomposed, end, cp, [](uint32_t c, const CpBaseRange &x) { return c < x.first; });
    if (r == kDecomposed) return cp;
    --r;
    return cp <= r->last ? r->base : cp;
}

WordPieceTokenizer::WordPieceTokenizer(const gguf::File &file) {
    load_vocab(file, "bert", true);
    // The CLS token starts a text and SEP ends it; BERT files name them (llama.cpp's defaults, 101 and 102,
    // where they do not).
    auto id = [&](const char *key, int32_t fallback) -> int32_t {
        const std::optional<int64_t> v = file.get_int(key);
        const int64_t i = v ? *v : fallback;
        return i >= 0 && i < n_vocab() ? static_cast<int32_t>(i) : -1;
    };
    if (bos_ < 0) bos_ = id("tokenizer.ggml.cls_token_id", 101);
    sep_ = id("tokenizer.ggml.seperator_token_id", 102);
    if (unk_ < 0) unk_ = id("tokenizer.ggml.unknown_token_id", 100);
    if (bos_ < 0 || sep_ < 0 || unk_ < 0)
        fail(EMBER_ERR_INVALID_MODEL, "a WordPiece vocabulary needs CLS, SEP and unknown tokens (ids %d, %d, %d)", bos_,
             sep_, unk_);
    add_bos_ = true;
    add_eos_ = false;
    lowercase_ = file.get_bool("tokenizer.ggml.normalizer.lowercase").value_or(true);
    strip_accents_ = file.get_bool("tokenizer.ggml.normalizer.strip_accents").value_or(lowercase_);
    for (const std::string &t : tokens_) max_token_bytes_ = std::max(max_token_bytes_, t.size());
}

std::vector<int32_t> WordPieceTokenizer::tokenize(std::string_view text, bool add_special, bool parse_special) const {
    std::vector<int32_t> out = TokenizerBase::tokenize(text, add_special, parse_special);
    if (add_special) out.push_back(sep_);
    return out;
}

void WordPieceTokenizer::encode(std::string_view text, bool, std::vector<int32_t> &out) const {
    std::string word;
    auto finish = [&] {
        if (!word.empty()) encode_word(word, out);
        word.clear();
    };
    const auto *s = reinterpret_cast<const uint8_t *>(text.data());
    for (size_t i = 0; i < text.size();) {
        const Utf8Decoded d = utf8_decode(s + i, text.size() - i);
        i += d.len;
        if (d.kind != Utf8Decoded::Valid) continue;   // U+FFFD, which the normalizer drops
        uint32_t cp = strip_accents_ ? cp_decomposed_base(d.cp) : d.cp;
        const CpClass cls = cp_class(cp);
        if (cls == CpClass::Space) {
            finish();
            continue;
        }
        if (cp == 0 || cp == kReplacementChar || cls == CpClass::Other) continue;   // control characters
        if (strip_accents_ && cls == CpClass::Mark) continue;
        const uint32_t c = lowercase_ ? cp_lower(cp) : cp;
        if (cls == CpClass::Punct || (cp < 0x7F && cls == CpClass::Symbol) || is_cjk(cp)) {
            finish();
            utf8_append(word, c);
            finish();
        } else {
            utf8_append(word, c);
        }
        // A very long "word" is cut, as every tokenizer here bounds its work per piece.
        if (word.size() >= kMaxPieceBytes) finish();
    }
    finish();
}

void WordPieceTokenizer::encode_word(const std::string &word, std::vector<int32_t> &out) const {
    const std::string w = std::string(kWordStart) + word;
    const size_t start = out.size(), n = w.size();
    for (size_t i = 0; i < n;) {
        size_t j = std::min(n, i + max_token_bytes_);
        for (; j > i; --j) {
            const int32_t id = find(std::string_view(w).substr(i, j - i));
            if (id >= 0) {
                out.push_back(id);
                break;
            }
        }
        if (j == i) {   // a part no piece covers: the whole word is unknown
            out.resize(start);
            break;
        }
        i = j;
    }
    if (out.size() == start) out.push_back(unk_);
}

std::string WordPieceTokenizer::token_to_piece(int32_t id, bool render_special) const {
    std::string out;
    if (special_piece(id, render_special, out)) return out;
    const std::string &t = tokens_[static_cast<size_t>(id)];
    for (size_t i = 0; i < t.size();) {
        if (t.compare(i, kWordStart.size(), kWordStart) == 0) {
            out += ' ';
            i += kWordStart.size();
        } else {
            out += t[i++];
        }
    }
    return out;
}

} // namespace ember::tok
