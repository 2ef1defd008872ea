// test_embed_arch.cpp — the embedding architectures beside BERT (docs/embeddings.md): nomic-bert
// (nomic-embed-text) and gemma-embedding (EmbeddingGemma), on synthetic files (ember-synth --preset
// nomic-bert-tiny and gemma-embedding-tiny): the tokens against llama.cpp's, the vectors against the
// double-precision reference (src/testing/reference_bert.cpp) and against llama.cpp's for the same files
// (pinned in tests/data/embed_arch_llamacpp.inc), Matryoshka on nomic, EmbeddingGemma's dense projections
// and its bound on text length, and the files refused: nomic-bert without its rotary base, gemma-embedding
// with dense tensors or feature counts that do not fit. On Vulkan both agree with the CPU.
#include "embed_test_texts.hpp"
#include "synthetic_model.hpp"
#include "test_util.h"

#include "backend/backend.hpp"
#include "core/error.hpp"
#include "embed/embedder.hpp"
#include "model/model.hpp"
#include "testing/reference_bert.hpp"
#include "testing/synthetic_bert.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

using namespace ember;

namespace {

#include "data/embed_arch_llamacpp.inc"

const std::vector<int32_t> kNomicTokens[] = {
    {std::begin(kNomicTokens0), std::end(kNomicTokens0)}, {std::begin(kNomicTokens1), std::end(kNomicTokens1)},
    {std::begin(kNomicTokens2), std::end(kNomicTokens2)}, {std::begin(kNomicTokens3), std::end(kNomicTokens3)}};
const std::vector<int32_t> kGemmaTokens[] = {
    {std::begin(kGemmaTokens0), std::end(kGemmaTokens0)}, {std::begin(kGemmaTokens1), std::end(kGemmaTokens1)},
    {std::begin(kGemmaTokens2), std::end(kGemmaTokens2)}, {std::begin(kGemmaTokens3), std::end(kGemmaTokens3)}};

// A file's bytes, parsed (for the reference) and loaded.
struct Loaded {
    std::vector<uint8_t> bytes;
    gguf::File file;
    std::unique_ptr<Model> model;
    explicit Loaded(std::vector<uint8_t> b) : bytes(std::move(b)) {
        file = gguf::File::parse(bytes.data(), bytes.size());
        model = load_gguf_bytes(bytes);
    }
};

BertSpec nomic_spec() {
    BertSpec s;   // ember-synth --preset nomic-bert-tiny, as pinned
    s.arch = "nomic-bert";
    return s;
}

EmbedOptions raw_cpu() {
    EmbedOptions o;
    o.backend = EMBER_BACKEND_CPU;
    o.n_threads = 2;
    o.normalize = false;
    return o;
}

// Each text's vector within float rounding of the fp64 reference and at cosine >= 0.9999 to llama.cpp's.
void check_vectors(const char *what, const Loaded &l, const std::vector<float> &v, size_t dim, const float *llama,
                   double rel_bound) {
    for (size_t i = 0; i < kTexts; ++i) {
        const std::vector<int32_t> t = l.model->tokenizer().tokenize(kLlamaTexts[i], true, false);
        const std::vector<double> ref = reference_bert_embedding(l.file, t, false);
        assert_int_equal(ref.size(), dim);
        double max_err = 0, max_ref = 0;
        for (size_t k = 0; k < dim; ++k) {
            max_err = std::max(max_err, std::fabs(v[i * dim + k] - ref[k]));
            max_ref = std::max(max_ref, std::fabs(ref[k]));
        }
        const double c_ref = cosine(ref.data(), v.data() + i * dim, dim);
        const double c_llama = cosine(llama + i * dim, v.data() + i * dim, dim);
        std::printf("%s text %zu: max |ours - fp64| %.2e (of %.2f), cosine to fp64 %.8f, to llama.cpp %.8f\n", what, i,
                    max_err, max_ref, c_ref, c_llama);
        assert_true(max_err < rel_bound * max_ref);
        assert_true(c_ref > 0.999999);
        assert_true(c_llama >= 0.9999);
    }
}

// A file with one byte pattern replaced by another of the same length (a shape or a value in the header).
std::vector<uint8_t> patched(std::vector<uint8_t> bytes, const std::vector<uint8_t> &from, const std::vector<uint8_t> &to) {
    auto it = std::search(bytes.begin(), bytes.end(), from.begin(), from.end());
    assert_true(it != bytes.end());
    std::copy(to.begin(), to.end(), it);
    return bytes;
}

std::vector<uint8_t> le32(uint32_t v) { return {uint8_t(v), uint8_t(v >> 8), uint8_t(v >> 16), uint8_t(v >> 24)}; }
std::vector<uint8_t> le64(uint64_t v) {
    std::vector<uint8_t> b = le32(static_cast<uint32_t>(v));
    for (uint8_t c : le32(static_cast<uint32_t>(v >> 32))) b.push_back(c);
    return b;
}
// The bytes of a GGUF string (u64 length, then the text) followed by the byte lists in `tail`.
std::vector<uint8_t> gguf_key(const std::string &s, std::initializer_list<std::vector<uint8_t>> tail) {
    std::vector<uint8_t> b = le64(s.size());
    for (char c : s) b.push_back(static_cast<uint8_t>(c));
    for (const std::vector<uint8_t> &t : tail)
        for (uint8_t c : t) b.push_back(c);
    return b;
}

void expect_refused(const std::vector<uint8_t> &bytes, const char *names) {
    try {
        load_gguf_bytes(bytes);
        fail_msg("a bad file loaded (%s)", names);
    } catch (const Error &e) {
        std::printf("refused: %s\n", e.what());
        assert_int_equal(e.status(), EMBER_ERR_INVALID_MODEL);
        assert_non_null(std::strstr(e.what(), names));
    }
}

// nomic-bert: llama.cpp's WordPiece tokens, [CLS] ... [SEP] around them, vectors as the reference's and
// llama.cpp's; Matryoshka cuts and normalises.
void test_nomic(void **) {
    Loaded l(synthetic_bert_gguf(nomic_spec()));
    const Tokenizer &tok = l.model->tokenizer();
    for (size_t i = 0; i < kTexts; ++i) {
        assert_true(tok.tokenize(kLlamaTexts[i], false, false) == kNomicTokens[i]);
        const std::vector<int32_t> s = tok.tokenize(kLlamaTexts[i], true, false);
        assert_int_equal(s.front(), 101);
        assert_int_equal(s.back(), 102);
    }
    assert_true(l.model->desc().embedding.encoder && l.model->desc().embedding.pooling == Pooling::Mean);
    Embedder e(*l.model, raw_cpu());
    assert_int_equal(e.dim(), 64);
    const std::vector<float> v = embed_all(e);
    check_vectors("nomic-bert", l, v, 64, &kNomicMean[0][0], 2e-5);

    EmbedOptions o = raw_cpu();
    o.normalize = true, o.dimensions = 24;
    Embedder cut(*l.model, o);
    const std::vector<float> c = embed_all(cut);
    for (size_t i = 0; i < kTexts; ++i) {
        double ss = 0;
        for (size_t k = 0; k < 24; ++k) ss += double(v[i * 64 + k]) * v[i * 64 + k];
        for (size_t k = 0; k < 24; ++k) assert_true(std::fabs(c[i * 24 + k] - v[i * 64 + k] / std::sqrt(ss)) < 1e-6);
    }
}

// Rotary positions at work: the same tokens in another order give another vector (mean pooling of a
// model without positions would not tell them apart).
void test_nomic_positions(void **) {
    Loaded l(synthetic_bert_gguf(nomic_spec()));
    Embedder e(*l.model, raw_cpu());
    std::vector<float> a(64), b(64);
    e.embed_tokens({{101, 202, 203, 102}}, a.data());
    e.embed_tokens({{101, 203, 202, 102}}, b.data());
    assert_true(cosine(a.data(), b.data(), 64) < 0.9999);
}

void test_nomic_refused_without_rope_base(void **) {
    BertSpec s = nomic_spec();
    s.rope_theta = 0;   // rope.freq_base not written
    expect_refused(synthetic_bert_gguf(s), "nomic-bert.rope.freq_base");
}

// gemma-embedding: tokens as llama.cpp's, vectors (mean pooling, then dense_2 and dense_3) as the
// reference's and llama.cpp's; without the dense tensors the vector is the pooled hidden state, another one.
void test_gemma_embedding(void **) {
    const SyntheticSpec spec = synthetic_family("gemma-embedding");   // ember-synth --preset gemma-embedding-tiny
    Loaded l(synthetic_model_gguf(spec));
    for (size_t i = 0; i < kTexts; ++i) assert_true(l.model->tokenizer().tokenize(kLlamaTexts[i], false, false) == kGemmaTokens[i]);
    assert_true(l.model->desc().embedding.encoder && l.model->desc().embedding.pooling == Pooling::Mean);
    Embedder e(*l.model, raw_cpu());
    assert_int_equal(e.dim(), 256);
    const std::vector<float> v = embed_all(e);
    check_vectors("gemma-embedding", l, v, 256, &kGemmaMean[0][0], 1e-4);

    SyntheticSpec plain = spec;
    plain.dense_features = 0;
    Loaded p(synthetic_model_gguf(plain));
    Embedder pe(*p.model, raw_cpu());
    const std::vector<float> pv = embed_all(pe);
    for (size_t i = 0; i < kTexts; ++i) {
        const std::vector<int32_t> t = p.model->tokenizer().tokenize(kLlamaTexts[i], true, false);
        const std::vector<double> ref = reference_bert_embedding(p.file, t, false);
        assert_true(cosine(ref.data(), pv.data() + i * 256, 256) > 0.999999);
        assert_true(cosine(v.data() + i * 256, pv.data() + i * 256, 256) < 0.99);
    }
}

// A bidirectional window is symmetric (window / 2 either side), which the backends' mask does not have:
// texts are bounded to window / 2 + 1 tokens (65 for the window of 128), where every token sees every other.
void test_gemma_embedding_text_bound(void **) {
    Loaded l(synthetic_model_gguf(synthetic_family("gemma-embedding")));
    EmbedOptions o = raw_cpu();
    Embedder e(*l.model, o);
    assert_int_equal(e.max_tokens(), 65);
    std::vector<int32_t> t = {1};
    for (int i = 0; i < 65; ++i) t.push_back(260 + i % 40);
    std::vector<float> v(256);
    try {
        e.embed_tokens({t}, v.data());
        fail_msg("a text past the bound was embedded");
    } catch (const Error &err) {
        assert_int_equal(err.status(), EMBER_ERR_INVALID_ARGUMENT);
    }
    t.resize(65);
    e.embed_tokens({t}, v.data());
    assert_true(cosine(reference_bert_embedding(l.file, t, false).data(), v.data(), 256) > 0.999999);
    o.max_tokens = 66;
    try {
        Embedder bad(*l.model, o);
        fail_msg("max_tokens past the bound accepted");
    } catch (const Error &err) {
        assert_int_equal(err.status(), EMBER_ERR_INVALID_ARGUMENT);
    }
}

// Dense tensors of the wrong shape, and feature counts that disagree with them, are refused by name.
void test_gemma_embedding_bad_dense(void **) {
    const std::vector<uint8_t> good = synthetic_model_gguf(synthetic_family("gemma-embedding"));
    load_gguf_bytes(good);
    // dense_3.weight [512, 256] written as [256, 512] (the same bytes); its tensor record: name, n_dims, dims.
    expect_refused(patched(good, gguf_key("dense_3.weight", {le32(2), le64(512), le64(256)}),
                           gguf_key("dense_3.weight", {le32(2), le64(256), le64(512)})),
                   "dense_3.weight");
    // dense_2_feat_out (type u32 = 4) 512, as the tensor's rows, rewritten as 500.
    const std::string key = "gemma-embedding.dense_2_feat_out";
    const std::vector<uint8_t> kf = gguf_key(key, {le32(4), le32(512)}), kt = gguf_key(key, {le32(4), le32(500)});
    expect_refused(patched(good, kf, kt), "gemma-embedding.dense_2_feat_out");
}

// Vulkan (lavapipe in CI, validation layer on), where there is a device: both architectures' vectors
// agree with the CPU's (four texts packed in one pass: the SEQUENCE mask keeps them apart).
void test_vulkan(void **) {
    if (!backend_find(EMBER_BACKEND_VULKAN)) {
        std::printf("no Vulkan device or module here: this part is skipped\n");
        return;
    }
    Loaded g(synthetic_model_gguf(synthetic_family("gemma-embedding"))), n(synthetic_bert_gguf(nomic_spec()));
    for (const Model *m : {g.model.get(), n.model.get()}) {
        EmbedOptions o = raw_cpu();
        Embedder cpu(*m, o);
        o.backend = EMBER_BACKEND_VULKAN;
        Embedder vk(*m, o);
        const std::vector<float> a = embed_all(cpu), b = embed_all(vk);
        for (size_t i = 0; i < kTexts; ++i) {
            const double c = cosine(a.data() + i * cpu.dim(), b.data() + i * cpu.dim(), cpu.dim());
            std::printf("vulkan %s text %zu: cosine to the CPU %.8f\n", m->arch().c_str(), i, c);
            assert_true(c > 0.99999);
        }
    }
}

} // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nomic),
        cmocka_unit_test(test_nomic_positions),
        cmocka_unit_test(test_nomic_refused_without_rope_base),
        cmocka_unit_test(test_gemma_embedding),
        cmocka_unit_test(test_gemma_embedding_text_bound),
        cmocka_unit_test(test_gemma_embedding_bad_dense),
        cmocka_unit_test(test_vulkan),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
