// wordpiece.hpp — BERT's WordPiece tokenizer ("bert" vocabularies) and the Unicode tables its text
// normalizer reads. Private to src/tokenizer.
#pragma once

#include "tokenizer/tokenizer_impl.hpp"

#include <cstddef>
#include <cstdint>

namespace ember::tok {

// Generated tables (wordpiece_tables.cpp, tools/gen_wordpiece_tables.py), sorted by code point.
struct CpPair {
    uint32_t cp, mapped;
};
struct CpBaseRange {
    uint32_t first, last, base;
};
extern const CpPair kLowercase[];          // simple lowercase mappings
extern const size_t kLowercaseCount;
extern const CpBaseRange kDecomposed[];    // the first code point of each canonical decomposition
extern const size_t kDecomposedCount;

uint32_t cp_lower(uint32_t cp);
uint32_t cp_decomposed_base(uint32_t cp);

// WordPiece as llama.cpp runs BERT vocabularies, whose GGUF form writes a word's first piece with a "▁"
// in front ("▁the") and a continuation piece bare ("##ing" -> "ing"). The text is normalized (accents
// stripped by decomposing and dropping marks, lowercased, as tokenizer.ggml.normalizer.* say: both by
// default), control characters dropped, and split at white space and around each punctuation mark, ASCII
// symbol and CJK ideograph; each word is "▁" + word, cut greedily into the longest pieces in the
// vocabulary from the left; a word with any part that no piece covers becomes the unknown token.
// add_special puts the CLS token first and the SEP token last.
class WordPieceTokenizer final : public TokenizerBase {
public:
    explicit WordPieceTokenizer(const gguf::File &file);
    std::vector<int32_t> tokenize(std::string_view text, bool add_special, bool parse_special) const override;
    std::string token_to_piece(int32_t id, bool render_special) const override;
    int32_t sep() const { return sep_; }

protected:
    void encode(std::string_view text, bool first_or_after_special, std::vector<int32_t> &out) const override;

private:
    void encode_word(const std::string &word, std::vector<int32_t> &out) const;

    bool lowercase_ = true, strip_accents_ = true;
    size_t max_token_bytes_ = 0;
    int32_t sep_ = -1;
};

} // namespace ember::tok
