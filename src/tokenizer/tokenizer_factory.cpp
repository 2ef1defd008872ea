// tokenizer_factory.cpp — Tokenizer::from_gguf: picks the tokenizer family from tokenizer.ggml.model.
#include "core/error.hpp"
#include "tokenizer/tokenizer_impl.hpp"
#include "tokenizer/wordpiece.hpp"

namespace ember {

namespace {
constexpr std::string_view kModels[] = {"llama", "gpt2", "gemma4", "bert"};
}

std::vector<std::string_view> Tokenizer::supported_models() { return {std::begin(kModels), std::end(kModels)}; }

std::vector<std::string_view> Tokenizer::supported_pre_tokenizers() {
    std::vector<std::string_view> names;
    for (const tok::PreTokenizerSpec &s : tok::pre_tokenizer_specs()) names.emplace_back(s.name);
    return names;
}

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::File &file) {
    const std::optional<std::string_view> model = file.get_string("tokenizer.ggml.model");
    if (!model) fail(EMBER_ERR_INVALID_MODEL, "missing tokenizer.ggml.model");
    if (*model == kModels[0]) return std::make_unique<tok::SpmTokenizer>(file);
    if (*model == kModels[1]) {
        // Absent or empty: llama.cpp's "default" (which is not GPT-2's regex, though close to it).
        std::string_view pre = file.get_string("tokenizer.ggml.pre").value_or("");
        if (pre.empty()) pre = "default";
        return std::make_unique<tok::BpeTokenizer>(file, *model, pre);
    }
    // Gemma 4: BPE over "▁"-escaped text, whatever tokenizer.ggml.pre says (llama.cpp ignores it too).
    if (*model == kModels[2]) return std::make_unique<tok::BpeTokenizer>(file, *model, "gemma4");
    // BERT's WordPiece (tokenizer.ggml.pre names the model; the normalizer is the same for all).
    if (*model == kModels[3]) return std::make_unique<tok::WordPieceTokenizer>(file);
    fail(EMBER_ERR_UNSUPPORTED,
         "unsupported tokenizer model '%.*s' (tokenizer.ggml.model; supported: llama, gpt2, gemma4, bert)",
         int(std::min<size_t>(model->size(), 100)), model->data());
}

} // namespace ember
