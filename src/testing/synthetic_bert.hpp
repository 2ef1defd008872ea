// synthetic_bert.hpp — BERT-family GGUF files (bert, nomic-bert) with random weights and a small WordPiece vocabulary of our
// own (library ember_testing): for the embedding tests and the bge-small- and nomic-embed-text-shaped speed
// measurements.
#pragma once

#include "core/dtype.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace ember {

struct BertSpec {
    uint32_t n_vocab = 400;     // >= the vocabulary's own words (about 200); padded with numbered words
    uint32_t n_embd = 64;
    uint32_t n_layer = 2;
    uint32_t n_head = 4;
    uint32_t n_ff = 128;
    uint32_t n_ctx = 128;       // position embeddings
    DType type = DType::F32;    // the matrices: F32, F16 or Q8_0 (norms, biases and position rows F32)
    uint32_t pooling_type = 1;  // 1 mean, 2 cls, 4 rank (adds the classification head cls / cls.output)
    uint64_t seed = 1;
    // "nomic-bert" (nomic-embed-text's layout): rotary positions of base rope_theta instead of the position
    // table (rope_theta 0: rope.freq_base not written), one fused attn_qkv and a gated SiLU FFN, without the
    // biases of those and of attn_output.
    std::string arch = "bert";
    float rope_theta = 1000.0f;
};

// The file's bytes. Vocabulary: [PAD], [unused*], [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103, then
// punctuation, digits, letters and some English words ("▁word") and suffixes (continuations, bare).
std::vector<uint8_t> synthetic_bert_gguf(const BertSpec &spec);

// The words of that vocabulary's text part, for tests that write sentences the vocabulary covers.
const std::vector<std::string> &synthetic_bert_words();

} // namespace ember
