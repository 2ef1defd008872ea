// embed_test_texts.hpp — what the embedding tests (test_embed.cpp, test_embed_arch.cpp) share: the texts and
// llama.cpp's pinned outputs for the BERT and qwen3 files (tests/data/embed_llamacpp.inc, written by
// tests/data/gen_embed_llamacpp.sh), the cosine of two vectors, and an embedder's vectors for the texts.
#pragma once

#include "embed/embedder.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "data/embed_llamacpp.inc"

constexpr size_t kTexts = sizeof kLlamaTexts / sizeof kLlamaTexts[0];

template <class A, class B>
double cosine(const A &a, const B &b, size_t n) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < n; ++i) ab += a[i] * double(b[i]), aa += a[i] * double(a[i]), bb += b[i] * double(b[i]);
    return ab / std::sqrt(aa * bb);
}

// The texts' vectors, texts.size() * e.dim() floats, in one call.
inline std::vector<float> embed_all(ember::Embedder &e) {
    std::vector<std::string_view> texts(std::begin(kLlamaTexts), std::end(kLlamaTexts));
    std::vector<float> out(kTexts * e.dim());
    e.embed(texts, out.data());
    return out;
}
