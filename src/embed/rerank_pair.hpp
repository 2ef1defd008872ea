// rerank_pair.hpp — the tokens a reranking model scores for one (query, document) pair, formed one way for
// the embedder's ember_rerank and an engine's scoring requests (ember_embed_request_params.query).
#pragma once

#include "model/model.hpp"

#include <cstdint>
#include <string_view>
#include <vector>

namespace ember {

// The model's "rerank" chat template (tokenizer.chat_template.rerank) with {query} and {document} filled
// in where it has one (Qwen3-Reranker; the template writes its own special tokens), else
// [CLS] query [SEP] document [SEP] (BERT cross-encoders' pairs).
std::vector<int32_t> rerank_pair_tokens(const Model &model, std::string_view query, std::string_view doc);

} // namespace ember
