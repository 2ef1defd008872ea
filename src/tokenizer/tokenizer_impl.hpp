// tokenizer_impl.hpp — what the SPM and BPE tokenizers share (vocabulary, special tokens, the
// tokenize/detokenize skeleton), and the two tokenizer classes. Private to src/tokenizer.
#pragma once

#include "tokenizer/hash_index.hpp"
#include "tokenizer/pretokenize.hpp"
#include "tokenizer/special_trie.hpp"
#include "tokenizer/tokenizer.hpp"

#include <array>
#include <string_view>
#include <vector>

namespace ember::tok {

// A piece of the input: plain text, or a special token that parse_special found written in it.
struct Fragment {
    std::string_view text;
    int32_t special = -1;
};

class TokenizerBase : public Tokenizer {
public:
    TokenizerBase() = default;
    // The token index points into tokens_, so a copy would point into the original.
    TokenizerBase(const TokenizerBase &) = delete;
    TokenizerBase &operator=(const TokenizerBase &) = delete;

    std::vector<int32_t> tokenize(std::string_view text, bool add_special, bool parse_special) const override;
    std::string detokenize(const int32_t *ids, size_t n, bool render_special, bool keep_leading_space) const override;

protected:
    // Reads tokens, token types and the special ids, and builds the lookup tables. `model` is the value of
    // tokenizer.ggml.model; add_bos_default applies when tokenizer.ggml.add_bos_token is absent.
    void load_vocab(const gguf::File &file, std::string_view model, bool add_bos_default);

    // Encodes one plain-text fragment; first_or_after_special says whether it starts the input or
    // follows a special token (SentencePiece puts its space prefix there).
    virtual void encode(std::string_view text, bool first_or_after_special, std::vector<int32_t> &out) const = 0;

    // The piece of a token shown by its text rather than decoded from it: control, unknown and unused
    // tokens (their text only when render_special, else ""), user-defined ones (always). Returns false
    // for the tokens each tokenizer decodes its own way.
    bool special_piece(int32_t id, bool render_special, std::string &out) const;

    // Token id of exactly this text, or -1.
    int32_t find(std::string_view text) const { return ids_.find(text); }
    int32_t find(std::string_view text, uint64_t hash) const { return ids_.find(text, hash); }
    void ids_prefetch(uint64_t hash) const { ids_.prefetch(hash); }

    int32_t unk_ = -1, eot_ = -1, pad_ = -1;
    // SPM with add_space_prefix: detokenize drops the space the tokenizer added at the start.
    bool strip_leading_space_ = false;

private:
    // Cuts out the special tokens written in text: all kinds when parse_special, else only USER_DEFINED.
    std::vector<Fragment> split_special(std::string_view text, bool parse_special) const;

    TokenIndex ids_;   // over tokens_, which never changes once built
    // Tokens parse_special recognizes (leftmost-longest matching).
    SpecialTrie specials_;
    bool has_user_defined_ = false;   // whether any of them is USER_DEFINED (cut out even without parse_special)
    // Per token (empty when none has it): the ASCII whitespace after it in a text goes with it (Phi-3).
    std::vector<bool> rstrip_;
};

// SentencePiece-style: score-driven merges of UTF-8 characters over the "▁"-escaped text.
class SpmTokenizer final : public TokenizerBase {
public:
    explicit SpmTokenizer(const gguf::File &file);
    std::string token_to_piece(int32_t id, bool render_special) const override;

protected:
    void encode(std::string_view text, bool first_or_after_special, std::vector<int32_t> &out) const override;

private:
    // Merges within one word (see encode) of at most kMaxPieceBytes; space_prefix: put "▁" first.
    void encode_word(std::string_view word, bool space_prefix, std::vector<int32_t> &out) const;

    std::vector<float> scores_;
    // No token has a "▁" right after another character, so no merge joins a character to a "▁" after
    // it: the text can be encoded word by word, cut before each space that follows a non-space.
    bool split_at_spaces_ = false;
    std::array<int32_t, 256> byte_tokens_{};   // the <0xAB> token of each byte, or -1
    bool add_space_prefix_ = true;
};

struct BpeSymbol;   // tokenizer_bpe.cpp

// Byte-level BPE (GPT-2 style): regex pre-tokenization, then merges by rank within each piece; or, for
// Gemma 4, the same merges over "▁"-escaped UTF-8 text with <0xAB> byte tokens (PreTokenizerSpec::spm_style).
class BpeTokenizer final : public TokenizerBase {
public:
    // model: tokenizer.ggml.model ("gpt2" or "gemma4"); pre: the pre-tokenizer's name.
    BpeTokenizer(const gguf::File &file, std::string_view model, std::string_view pre);
    std::string token_to_piece(int32_t id, bool render_special) const override;

protected:
    void encode(std::string_view text, bool first_or_after_special, std::vector<int32_t> &out) const override;

private:
    void encode_piece(std::string_view piece, std::vector<int32_t> &out) const;
    // The symbols a piece starts as: one per byte (byte-level), or one per UTF-8 character (spm_style_).
    void initial_symbols(std::string_view piece, std::vector<BpeSymbol> &syms) const;

    PreTokenizer pre_kind_ = PreTokenizer::Gpt2;
    // Llama 3 and Tekken look a whole piece up in the vocabulary before merging (Hugging Face's
    // ignore_merges).
    bool ignore_merges_ = false;
    PairIndex merges_;   // (left id, right id) -> rank and merged token
    std::array<int32_t, 256> byte_tokens_{};   // the token of each byte's alphabet character, or -1
    bool spm_style_ = false;                   // Gemma 4's mode (see the class comment)
    std::array<int32_t, 256> byte_fallback_{}; // spm_style_: the <0xAB> token of each byte, or -1
};

} // namespace ember::tok
