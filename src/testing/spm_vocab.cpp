#include "testing/spm_vocab.hpp"

#include <cstdio>
#include <utility>

namespace ember {

void SpmVocab::add(std::string piece, TokenType type) {
    tokens.push_back(std::move(piece));
    types.push_back(int32_t(type));
}

void SpmVocab::add_byte_tokens() {
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        add(name, TokenType::BYTE);
    }
}

void SpmVocab::write(gguf::Writer &w, size_t first_scored) const {
    std::vector<float> scores(tokens.size(), 0.0f);
    for (size_t i = first_scored; i < scores.size(); ++i) scores[i] = -static_cast<float>(i);
    w.add_string("tokenizer.ggml.model", "llama");
    w.add_array_string("tokenizer.ggml.tokens", tokens);
    w.add_array_f32("tokenizer.ggml.scores", scores);
    w.add_array_i32("tokenizer.ggml.token_type", types);
    w.add_u32("tokenizer.ggml.bos_token_id", 1);
    w.add_u32("tokenizer.ggml.eos_token_id", 2);
    w.add_u32("tokenizer.ggml.unknown_token_id", 0);
}

} // namespace ember
