// spm_vocab.hpp — the SentencePiece ("llama") vocabulary of the GGUF files that tests write (library
// ember_testing): <unk>, <s>, </s>, optionally the 256 byte tokens, then the writer's own pieces. One
// writer for the synthetic models (synthetic.cpp) and the fuzz seeds (tests/fuzz/make_seeds.cpp).
#pragma once

#include "gguf/gguf.hpp"
#include "tokenizer/tokenizer.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ember {

struct SpmVocab {
    // Ids 0, 1 and 2: the unknown token, BOS and EOS.
    std::vector<std::string> tokens{"<unk>", "<s>", "</s>"};
    std::vector<int32_t> types{int32_t(TokenType::UNKNOWN), int32_t(TokenType::CONTROL), int32_t(TokenType::CONTROL)};

    void add(std::string piece, TokenType type = TokenType::NORMAL);
    // <0x00>..<0xFF>: any text then tokenizes (bytes without a piece fall back to these), as with real
    // SentencePiece vocabularies, and other runtimes accept the file.
    void add_byte_tokens();
    // Writes tokenizer.ggml.model ("llama"), .tokens, .scores, .token_type and the BOS, EOS and unknown
    // token ids. Token i scores -i from `first_scored` on (the earlier of two pieces wins a merge), 0
    // before it.
    void write(gguf::Writer &w, size_t first_scored = 0) const;
};

} // namespace ember
