// reference_bert.hpp — exact (double-precision) encoders and their pooling, for the embedding tests
// (library ember_testing): BERT (post-norm layers, GELU, learned positions and token types), nomic-bert
// (BERT's layers with rotary positions of the NEOX kind, a fused QKV and a gated SiLU FFN) and
// gemma-embedding (Gemma 3's layers attending both ways, the window layers' window symmetric: window / 2
// positions either side; then the dense projections after the pooling). Written from the models'
// definitions and the GGUF names, not from src/model. Weights are read as stored (dequantized to double);
// K and V are rounded to f16 as the default KV cache does; everything else is double.
#pragma once

#include "gguf/gguf.hpp"

#include <cstdint>
#include <vector>

namespace ember {

// Each token's last hidden state (n_tokens rows of n_embd), one text at positions 0..n-1, attending both ways.
std::vector<std::vector<double>> reference_bert_hidden(const gguf::File &file, const std::vector<int32_t> &tokens);
// The text's output as the file's pooling says: mean / CLS / last-token vector (L2-normalised when `normalize`), or for a
// ranking model (pooling 4) the classification head's score as a vector of one.
std::vector<double> reference_bert_embedding(const gguf::File &file, const std::vector<int32_t> &tokens, bool normalize);

} // namespace ember
