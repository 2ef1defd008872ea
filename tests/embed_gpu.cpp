// embed_gpu.cpp (test_embed_gpu) — the embedders on a GPU backend module (its first argument: "cuda" or
// "vulkan") against the CPU's, on synthetic files: BERT-shaped (mean and CLS vectors, a ranking head's
// scores; F32 and Q8_0 matrices), nomic-bert-shaped and EmbeddingGemma-shaped. The texts go several to a
// pass (the bidirectional mask keeps them apart) and one at a time (one block table: the attention's
// shared query tiles); among them a text of three tokens (a pass short enough to be captured as a CUDA
// graph) and one of nearly 100 tokens where the model takes them (more than one 64-key attention split). Each text's vector alone and packed with the
// others must agree on the GPU too. Exits 77 with the reason where that backend is not usable here.
#include "backend_arg.hpp"
#include "embed_test_texts.hpp"
#include "synthetic_model.hpp"
#include "test_util.h"

#include "embed/embedder.hpp"
#include "model/model.hpp"
#include "testing/synthetic.hpp"
#include "testing/synthetic_bert.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace ember;

namespace {

ember_backend_kind g_backend = EMBER_BACKEND_CPU;

EmbedOptions options(ember_backend_kind kind) {
    EmbedOptions o;
    o.backend = kind;
    o.n_threads = 2;
    o.normalize = false;
    return o;
}

// The shared texts, a short one and one of more than 64 tokens (as many of the vocabulary's words as fit
// under `max_tokens`), tokenized with the model's special tokens.
std::vector<std::vector<int32_t>> texts_for(const Model &m, uint32_t max_tokens) {
    const Tokenizer &tok = m.tokenizer();
    std::vector<std::vector<int32_t>> out;
    for (size_t i = 0; i < kTexts; ++i) out.push_back(tok.tokenize(kLlamaTexts[i], true, false));
    out.push_back(tok.tokenize("the", true, false));
    std::string text;
    std::vector<int32_t> longest;
    for (size_t i = 0;; ++i) {
        const std::string &w = synthetic_bert_words()[i % synthetic_bert_words().size()];
        const std::vector<int32_t> t = tok.tokenize(text + " " + w, true, false);
        if (t.size() > std::min<size_t>(max_tokens, 100)) break;
        text += " " + w;
        longest = t;
    }
    assert_true(longest.size() + 4 >= std::min<size_t>(max_tokens, 100));
    out.push_back(longest);
    return out;
}

// The model's vectors (or scores) on the CPU and on the backend under test, packed and one text a pass.
void compare(const char *what, const Model &m) {
    Embedder cpu(m, options(EMBER_BACKEND_CPU)), gpu(m, options(g_backend));
    const std::vector<std::vector<int32_t>> texts = texts_for(m, gpu.max_tokens());
    const size_t per = cpu.ranks() ? 1 : cpu.dim(), n = texts.size();
    std::vector<float> a(n * per), b(n * per), alone(per);
    cpu.embed_tokens(texts, a.data());
    gpu.embed_tokens(texts, b.data());
    for (size_t i = 0; i < n; ++i) {
        const float *x = a.data() + i * per, *y = b.data() + i * per;
        const double c = per == 1 ? 1.0 - std::fabs(x[0] - y[0]) : cosine(x, y, per);
        gpu.embed_tokens({texts[i]}, alone.data());
        double apart = 0;
        for (size_t k = 0; k < per; ++k) apart = std::max(apart, double(std::fabs(alone[k] - y[k])));
        double norm = 0;  // the vector's length (a score: its magnitude)
        for (size_t k = 0; k < per; ++k) norm += double(y[k]) * y[k];
        norm = std::sqrt(norm);
        std::printf("%s text %zu (%zu tokens): %s %.8f; alone vs packed max |diff| %.3g%s\n", what, i, texts[i].size(),
                    per == 1 ? "1 - |score difference| to the CPU" : "cosine to the CPU", c, apart,
                    apart == 0 ? " (the same bits)" : "");
        assert_true(c > 0.99999);
        assert_true(apart <= 1e-5 * std::max(norm, 1.0));
    }
}

void test_bert(void **) {
    for (uint32_t pooling : {1u, 2u, 4u})
        for (DType type : {DType::F32, DType::Q8_0}) {
            BertSpec spec;
            spec.pooling_type = pooling, spec.type = type;
            auto m = load_gguf_bytes(synthetic_bert_gguf(spec));
            char what[64];
            std::snprintf(what, sizeof what, "bert pooling %u %s", pooling, dtype_name(static_cast<uint32_t>(type)));
            compare(what, *m);
        }
}

void test_nomic_bert(void **) {
    BertSpec spec;
    spec.arch = "nomic-bert";
    auto m = load_gguf_bytes(synthetic_bert_gguf(spec));
    compare("nomic-bert", *m);
}

void test_gemma_embedding(void **) {
    auto m = load_synthetic(synthetic_family("gemma-embedding"));
    compare("gemma-embedding", *m);
}

} // namespace

int main(int argc, char **argv) {
    if (argc < 2) {
        std::printf("SKIP: names no GPU backend to compare with the CPU (test_embed_gpu cuda|vulkan)\n");
        return EMBER_TEST_SKIP;
    }
    if (const int rc = test_backend_arg(argc, argv, &g_backend); rc >= 0) return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bert),
        cmocka_unit_test(test_nomic_bert),
        cmocka_unit_test(test_gemma_embedding),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
