// rerank_pair.cpp — a (query, document) pair's tokens for a reranking model (rerank_pair.hpp).
#include "embed/rerank_pair.hpp"

#include <optional>
#include <string>

namespace ember {

std::vector<int32_t> rerank_pair_tokens(const Model &model, std::string_view query, std::string_view doc) {
    const Tokenizer &tok = model.tokenizer();
    if (std::optional<std::string_view> tmpl = model.gguf().get_string("tokenizer.chat_template.rerank")) {
        // The template's text with its two fields filled in; its special tokens are the template's own.
        std::string text;
        std::string_view t = *tmpl;
        for (size_t i = 0; i < t.size();) {
            if (t.compare(i, 7, "{query}") == 0) text += query, i += 7;
            else if (t.compare(i, 10, "{document}") == 0) text += doc, i += 10;
            else text += t[i++];
        }
        return tok.tokenize(text, false, true);   // the template writes its own special tokens
    }
    std::vector<int32_t> q = tok.tokenize(query, true, false), dd = tok.tokenize(doc, false, false);
    // [CLS] query [SEP] (q already ends with SEP for a WordPiece vocabulary), then document [SEP].
    const int32_t sep = !q.empty() && tok.type(q.back()) == TokenType::CONTROL ? q.back() : tok.eos();
    if (sep >= 0 && (q.empty() || q.back() != sep)) q.push_back(sep);
    q.insert(q.end(), dd.begin(), dd.end());
    if (sep >= 0) q.push_back(sep);
    return q;
}

} // namespace ember
