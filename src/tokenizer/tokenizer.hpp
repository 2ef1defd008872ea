// tokenizer.hpp — text <-> token ids, built from a GGUF file's tokenizer.ggml.* metadata.
//
// Two families: SentencePiece-style ("llama": score-driven merges of the "▁"-escaped text with byte
// fallback) and byte-level BPE ("gpt2": a pre-tokenizer splits the text, then ranked merges), with the
// pre-tokenizers Tokenizer::supported_pre_tokenizers() lists (tokenizer.ggml.pre; SPM ignores it).
// A Tokenizer is immutable after construction and safe to use from any number of threads.
#pragma once

#include "gguf/gguf.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ember {

// Token attributes as GGUF's tokenizer.ggml.token_type numbers them.
enum class TokenType : int32_t {
    UNDEFINED = 0, NORMAL = 1, UNKNOWN = 2, CONTROL = 3, USER_DEFINED = 4, UNUSED = 5, BYTE = 6,
};

class Tokenizer {
public:
    // Throws Error(EMBER_ERR_INVALID_MODEL) for missing/inconsistent tokenizer metadata (naming the key)
    // and Error(EMBER_ERR_UNSUPPORTED) for an unknown tokenizer.ggml.model or .pre (naming it).
    static std::unique_ptr<Tokenizer> from_gguf(const gguf::File &file);
    virtual ~Tokenizer() = default;

    // What from_gguf accepts: the tokenizer.ggml.model values ("llama", "gpt2", "gemma4") and the
    // tokenizer.ggml.pre values of "gpt2" vocabularies, in a fixed order (the factory's own tables, so
    // documentation checked against them stays true).
    static std::vector<std::string_view> supported_models();
    static std::vector<std::string_view> supported_pre_tokenizers();

    // add_special: BOS (and EOS) as tokenizer.ggml.add_bos_token / add_eos_token say (defaults: SPM adds
    // BOS, BPE as the pre-tokenizer's family does). parse_special: text matching a CONTROL or UNKNOWN
    // token's text becomes that token (leftmost match first, the longest text among those starting
    // there); otherwise such text is tokenized as plain text. Text matching a USER_DEFINED token always
    // becomes that token (these stand for literal text; llama.cpp and Hugging Face do the same). With SPM, text that follows a special token
    // gets the space prefix again, as at the start (llama.cpp does the same).
    // Limits (docs/reliability.md): text longer than kMaxTextBytes is refused (EMBER_ERR_INVALID_ARGUMENT);
    // merges run within pieces of at most kMaxPieceBytes (a "word" longer than that, which no natural
    // text has, is cut into such pieces at character boundaries), so time is linear in the text and the
    // memory besides the output is bounded per piece.
    virtual std::vector<int32_t> tokenize(std::string_view text, bool add_special, bool parse_special) const = 0;
    static constexpr size_t kMaxTextBytes = size_t{16} << 20;
    static constexpr size_t kMaxPieceBytes = size_t{64} << 10;

    // The bytes a token stands for ("▁" -> ' ', <0xAB> -> one byte, GPT-2 byte-level chars -> bytes).
    // CONTROL, UNKNOWN and UNUSED tokens give "" unless render_special (then their text); USER_DEFINED
    // tokens always give their text as it is. id must be < n_vocab() (checked by the caller).
    virtual std::string token_to_piece(int32_t id, bool render_special) const = 0;

    // Concatenated pieces. For SPM models with add_space_prefix, the one space the tokenizer put before
    // the text is removed from the piece of the first token (the first after BOS when ids start with BOS)
    // unless keep_leading_space. Bytes are passed through as they are (the ABI layer replaces invalid
    // UTF-8).
    virtual std::string detokenize(const int32_t *ids, size_t n, bool render_special, bool keep_leading_space) const = 0;

    int32_t n_vocab() const { return static_cast<int32_t>(tokens_.size()); }
    int32_t bos() const { return bos_; }   // -1 if none
    int32_t eos() const { return eos_; }   // -1 if none
    bool is_eog(int32_t id) const;         // EOS, EOT, and tokens like <|im_end|>, <|endoftext|>, <|eot_id|>
    bool add_bos() const { return add_bos_; }
    bool add_eos() const { return add_eos_; }
    TokenType type(int32_t id) const { return types_[static_cast<size_t>(id)]; }
    const std::string &text(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }
    const std::string &model_name() const { return model_; }   // "llama", "gpt2" or "gemma4"
    const std::string &pre_name() const { return pre_; }

protected:
    std::vector<std::string> tokens_;
    std::vector<TokenType> types_;
    std::vector<int32_t> eog_ids_;
    std::string model_, pre_;
    int32_t bos_ = -1, eos_ = -1;
    bool add_bos_ = false, add_eos_ = false;
};

// Assembles a byte stream into whole UTF-8 characters: push() returns the complete characters so far and
// holds back an incomplete tail; invalid sequences come out as U+FFFD. Used for streaming generation.
class Utf8Stream {
public:
    std::string push(std::string_view bytes);
    std::string flush();   // whatever is held back (an incomplete tail becomes U+FFFD)
    void reset() { pending_.clear(); }

private:
    std::string pending_;
};

// Replaces invalid UTF-8 in s with U+FFFD.
std::string utf8_sanitize(std::string_view s);

} // namespace ember
