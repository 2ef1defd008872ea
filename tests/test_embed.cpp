// test_embed.cpp — embeddings and reranking (docs/embeddings.md) on synthetic BERT files
// (src/testing/synthetic_bert.cpp): the vectors against the double-precision reference
// (src/testing/reference_bert.cpp, written from BERT's definition) and against llama.cpp's for the same
// files (pinned in tests/data/embed_llamacpp.inc), the tokens against llama.cpp's, batching, the pooling
// and Matryoshka options, reranking, and the errors: generation refused, an embedder on a generating
// model refused, over-long texts refused or truncated as asked.
#include "embed_test_texts.hpp"
#include "synthetic_model.hpp"
#include "test_util.h"

#include "core/error.hpp"
#include "embed/embedder.hpp"
#include "engine/engine.hpp"
#include "model/model.hpp"
#include "session/session.hpp"
#include "testing/reference_bert.hpp"
#include "testing/reference_forward.hpp"
#include "testing/synthetic_bert.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

using namespace ember;

namespace {

const std::vector<int32_t> kLlamaTokens[] = {
    {std::begin(kLlamaTokens0), std::end(kLlamaTokens0)}, {std::begin(kLlamaTokens1), std::end(kLlamaTokens1)},
    {std::begin(kLlamaTokens2), std::end(kLlamaTokens2)}, {std::begin(kLlamaTokens3), std::end(kLlamaTokens3)}};

struct Loaded {
    std::vector<uint8_t> bytes;
    gguf::File file;
    std::unique_ptr<Model> model;
};

std::unique_ptr<Loaded> load_bert(const BertSpec &spec) {
    auto l = std::make_unique<Loaded>();
    l->bytes = synthetic_bert_gguf(spec);
    l->file = gguf::File::parse(l->bytes.data(), l->bytes.size());
    char path[] = "/tmp/ember_bert_XXXXXX";
    const int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, l->bytes.data(), l->bytes.size()), (ssize_t)l->bytes.size());
    close(fd);
    l->model = Model::load(path, LoadOptions{});
    unlink(path);
    return l;
}

EmbedOptions cpu_options() {
    EmbedOptions o;
    o.backend = EMBER_BACKEND_CPU;
    o.n_threads = 2;
    return o;
}

// Our WordPiece tokens are llama.cpp's, and embedding adds [CLS] ... [SEP].
void test_tokens_are_llamacpps(void **) {
    auto l = load_bert(BertSpec{});
    const Tokenizer &tok = l->model->tokenizer();
    for (size_t i = 0; i < kTexts; ++i) {
        assert_true(tok.tokenize(kLlamaTexts[i], false, false) == kLlamaTokens[i]);
        const std::vector<int32_t> s = tok.tokenize(kLlamaTexts[i], true, false);
        assert_int_equal(s.front(), 101);
        assert_int_equal(s.back(), 102);
        assert_int_equal(s.size(), kLlamaTokens[i].size() + 2);
    }
    // Normalisation: case, accents, punctuation split off; a word the pieces do not cover is [UNK].
    assert_true(tok.tokenize("HÉLLO, Wörld", false, false) == tok.tokenize("hello , world", false, false));
    assert_true(tok.tokenize("zzzq\xe4\xb8\xad", false, false) == tok.tokenize("zzzq [UNK]", false, true));
}

// Mean and CLS pooling: within float rounding of the fp64 reference and at cosine >= 0.9999 to llama.cpp.
void test_vectors_match_reference_and_llamacpp(void **) {
    for (uint32_t pooling : {1u, 2u}) {
        BertSpec spec;
        spec.pooling_type = pooling;
        auto l = load_bert(spec);
        EmbedOptions o = cpu_options();
        o.normalize = false;
        Embedder e(*l->model, o);
        assert_int_equal(e.dim(), 64);
        const std::vector<float> v = embed_all(e);
        for (size_t i = 0; i < kTexts; ++i) {
            std::vector<int32_t> t = l->model->tokenizer().tokenize(kLlamaTexts[i], true, false);
            const std::vector<double> ref = reference_bert_embedding(l->file, t, false);
            double max_err = 0, max_ref = 0;
            for (size_t k = 0; k < 64; ++k) {
                max_err = std::max(max_err, std::fabs(v[i * 64 + k] - ref[k]));
                max_ref = std::max(max_ref, std::fabs(ref[k]));
            }
            const double c_ref = cosine(ref.data(), v.data() + i * 64, 64);
            const float *llama = (pooling == 1 ? kLlamaMean : kLlamaCls)[i];
            const double c_llama = cosine(llama, v.data() + i * 64, 64);
            std::printf("pooling %u text %zu: max |ours - fp64| %.2e (of %.2f), cosine to fp64 %.8f, to llama.cpp %.8f\n",
                        pooling, i, max_err, max_ref, c_ref, c_llama);
            // F32 weights: the f16 K/V cache rounds like the reference; the rest is float against double.
            assert_true(max_err < 2e-5 * max_ref);
            assert_true(c_ref > 0.999999);
            assert_true(c_llama >= 0.9999);
        }
    }
}

// Normalised vectors have norm 1; Matryoshka keeps the first values, then normalises.
void test_normalize_and_dimensions(void **) {
    auto l = load_bert(BertSpec{});
    EmbedOptions raw_o = cpu_options();
    raw_o.normalize = false;
    Embedder raw(*l->model, raw_o);
    const std::vector<float> r = embed_all(raw);
    EmbedOptions o = cpu_options();
    o.dimensions = 16;
    Embedder cut(*l->model, o);
    assert_int_equal(cut.dim(), 16);
    const std::vector<float> c = embed_all(cut);
    for (size_t i = 0; i < kTexts; ++i) {
        double ss = 0;
        for (size_t k = 0; k < 16; ++k) ss += double(r[i * 64 + k]) * r[i * 64 + k];
        double norm = 0;
        for (size_t k = 0; k < 16; ++k) {
            assert_true(std::fabs(c[i * 16 + k] - r[i * 64 + k] / std::sqrt(ss)) < 1e-6);
            norm += double(c[i * 16 + k]) * c[i * 16 + k];
        }
        assert_true(std::fabs(norm - 1.0) < 1e-5);
    }
    o.dimensions = 65;
    try {
        Embedder bad(*l->model, o);
        fail_msg("dimensions past the width accepted");
    } catch (const Error &e) {
        assert_int_equal(e.status(), EMBER_ERR_INVALID_ARGUMENT);
    }
}

// A text's vector is the same in a batch of many as alone, and in passes of any size.
void test_batched_equals_alone(void **) {
    auto l = load_bert(BertSpec{});
    EmbedOptions o = cpu_options();
    Embedder all(*l->model, o);
    const std::vector<float> together = embed_all(all);
    o.n_batch = 24;   // one or two texts per pass
    Embedder small(*l->model, o);
    for (size_t i = 0; i < kTexts; ++i) {
        float v[64];
        std::vector<std::string_view> one = {kLlamaTexts[i]};
        small.embed(one, v);
        for (size_t k = 0; k < 64; ++k) assert_true(std::fabs(v[k] - together[i * 64 + k]) < 1e-6);
    }
}

// The ranking head: llama.cpp's score for its own pair tokens, and the reference's.
void test_rerank(void **) {
    BertSpec spec;
    spec.pooling_type = 4;
    auto l = load_bert(spec);
    Embedder e(*l->model, cpu_options());
    assert_true(e.ranks());
    const Tokenizer &tok = l->model->tokenizer();
    const std::vector<int32_t> q = tok.tokenize("where is the dragon", false, false);
    std::vector<std::vector<int32_t>> pairs;
    for (size_t i = 0; i < kTexts; ++i) {
        std::vector<int32_t> p = {101};
        p.insert(p.end(), q.begin(), q.end());
        p.push_back(102);
        p.insert(p.end(), kLlamaTokens[i].begin(), kLlamaTokens[i].end());
        pairs.push_back(p);
    }
    std::vector<float> s(kTexts);
    e.embed_tokens(pairs, s.data());
    for (size_t i = 0; i < kTexts; ++i) {
        const double ref = reference_bert_embedding(l->file, pairs[i], false)[0];
        std::printf("rank %zu: ours %.6f fp64 %.6f llama.cpp %.6f\n", i, s[i], ref, kLlamaRank[i]);
        assert_true(std::fabs(s[i] - ref) < 1e-4);
        assert_true(std::fabs(s[i] - kLlamaRank[i]) < 2e-3);
    }
    // rerank() forms [CLS] query [SEP] document [SEP].
    std::vector<std::string_view> docs(std::begin(kLlamaTexts), std::end(kLlamaTexts));
    e.rerank("where is the dragon", docs, s.data());
    for (size_t i = 0; i < kTexts; ++i) {
        std::vector<int32_t> p = pairs[i];
        p.push_back(102);
        assert_true(std::fabs(s[i] - reference_bert_embedding(l->file, p, false)[0]) < 1e-4);
    }
    // A reranker does not embed, and an embedding model does not rerank.
    float v[64];
    try {
        std::vector<std::string_view> one = {"x"};
        e.embed(one, v);
        fail_msg("a reranker embedded");
    } catch (const Error &err) {
        assert_int_equal(err.status(), EMBER_ERR_INVALID_ARGUMENT);
    }
}

// Over-long texts: refused by default (naming the length), cut when asked, keeping [SEP] last.
void test_over_long(void **) {
    auto l = load_bert(BertSpec{});
    EmbedOptions o = cpu_options();
    o.max_tokens = 8;
    Embedder refuse(*l->model, o);
    float v[64];
    std::vector<std::string_view> long_text = {kLlamaTexts[2]};
    try {
        refuse.embed(long_text, v);
        fail_msg("an over-long text was embedded");
    } catch (const Error &e) {
        assert_int_equal(e.status(), EMBER_ERR_INVALID_ARGUMENT);
        assert_non_null(std::strstr(e.what(), "16 tokens"));
    }
    o.truncate = true;
    o.normalize = false;
    Embedder cut(*l->model, o);
    cut.embed(long_text, v);
    std::vector<int32_t> t = l->model->tokenizer().tokenize(kLlamaTexts[2], true, false);
    t.resize(8);
    t.back() = 102;
    const std::vector<double> ref = reference_bert_embedding(l->file, t, false);
    assert_true(cosine(ref.data(), v, 64) > 0.999999);
    // Past the model's positions: refused at creation.
    o.max_tokens = 129;
    try {
        Embedder bad(*l->model, o);
        fail_msg("max_tokens past the positions accepted");
    } catch (const Error &e) {
        assert_int_equal(e.status(), EMBER_ERR_INVALID_ARGUMENT);
    }
}

// A decoder embedder (qwen3 with last-token pooling, Qwen3-Embedding's form): the vector is the last
// token's normed hidden state, so the same file without pooling has logits output.weight · vector —
// checked against the fp64 reference's logits — and llama.cpp's vectors agree.
void test_decoder_embedding(void **) {
    SyntheticSpec spec = synthetic_family("qwen3");   // ember-synth --family qwen3 (--pooling 3), as pinned
    SyntheticSpec pooled = spec;
    pooled.pooling_type = 3;
    auto plain = load_synthetic(spec);
    auto emb = load_synthetic(pooled);
    assert_true(emb->desc().embedding.outputs_hidden && !emb->desc().embedding.encoder);
    EmbedOptions o = cpu_options();
    o.normalize = false;
    Embedder e(*emb, o);
    assert_int_equal(e.dim(), 256);
    const std::vector<int32_t> toks[] = {
        {std::begin(kLlamaQwenTokens0), std::end(kLlamaQwenTokens0)}, {std::begin(kLlamaQwenTokens1), std::end(kLlamaQwenTokens1)},
        {std::begin(kLlamaQwenTokens2), std::end(kLlamaQwenTokens2)}, {std::begin(kLlamaQwenTokens3), std::end(kLlamaQwenTokens3)}};
    const TensorRef *te = plain->desc().tensor(spec.tied_output ? "token_embd.weight" : "output.weight");
    assert_non_null(te);
    assert_int_equal(static_cast<int>(te->type), static_cast<int>(DType::F32));
    const float *w = static_cast<const float *>(te->data);
    for (size_t i = 0; i < kTexts; ++i) {
        assert_true(emb->tokenizer().tokenize(kLlamaTexts[i], false, false) == toks[i]);
        std::vector<int32_t> t = emb->tokenizer().tokenize(kLlamaTexts[i], true, false);
        std::vector<float> v(256);
        e.embed_tokens({t}, v.data());
        const std::vector<double> ref = reference_logits(*plain, t).back();
        double max_err = 0, max_ref = 0;
        for (size_t r = 0; r < ref.size(); ++r) {
            double l = 0;
            for (size_t k = 0; k < 256; ++k) l += double(w[r * 256 + k]) * v[k];
            max_err = std::max(max_err, std::fabs(l - ref[r]));
            max_ref = std::max(max_ref, std::fabs(ref[r]));
        }
        const double c = cosine(kLlamaQwen[i], v.data(), 256);
        std::printf("qwen3 text %zu: max |W·ours - fp64 logits| %.2e (of %.2f), cosine to llama.cpp %.8f\n", i, max_err,
                    max_ref, c);
        assert_true(max_err < 2e-5 * max_ref);
        assert_true(c >= 0.9999);
    }
    // Another pooling on a decoder: over one token, the mean of the rows is the last row.
    o.pooling = Pooling::Mean;
    Embedder mean(*emb, o);
    std::vector<float> m(256), last(256);
    mean.embed_tokens({{toks[1][0]}}, m.data());
    e.embed_tokens({{toks[1][0]}}, last.data());
    for (size_t k = 0; k < 256; ++k) assert_true(std::fabs(m[k] - last[k]) < 1e-6f);
    // ... and over several it is not (a check that the rows pooled are not the last alone).
    mean.embed_tokens({toks[1]}, m.data());
    e.embed_tokens({toks[1]}, last.data());
    assert_true(cosine(m.data(), last.data(), 256) < 0.999);
}

// On the Vulkan module (lavapipe in CI, under the validation layer), where there is one: a decoder
// embedder's vectors and BERT's vectors and scores agree with the CPU's.
void test_vulkan(void **) {
    if (!backend_find(EMBER_BACKEND_VULKAN)) {
        std::printf("no Vulkan device or module here: this part is skipped\n");
        return;
    }
    SyntheticSpec spec = synthetic_family("qwen3");
    spec.pooling_type = 3;
    auto m = load_synthetic(spec);
    EmbedOptions o = cpu_options();
    Embedder cpu(*m, o);
    o.backend = EMBER_BACKEND_VULKAN;
    Embedder vk(*m, o);
    std::vector<std::string_view> texts(std::begin(kLlamaTexts), std::end(kLlamaTexts));
    std::vector<float> a(kTexts * 256), b(kTexts * 256);
    cpu.embed(texts, a.data());
    vk.embed(texts, b.data());
    for (size_t i = 0; i < kTexts; ++i) {
        const double c = cosine(a.data() + i * 256, b.data() + i * 256, 256);
        std::printf("vulkan text %zu: cosine to the CPU %.8f\n", i, c);
        assert_true(c > 0.99999);
    }
    // BERT (the encoder ops: layer_norm, gelu, add_pos_rows, and the SEQUENCE mask): mean and CLS vectors,
    // and a ranking head's scores, as the CPU's.
    for (uint32_t pooling : {1u, 2u, 4u}) {
        BertSpec bs;
        bs.pooling_type = pooling;
        auto l = load_bert(bs);
        EmbedOptions co = cpu_options(), vo = co;
        vo.backend = EMBER_BACKEND_VULKAN;
        Embedder bc(*l->model, co), bv(*l->model, vo);
        std::vector<std::vector<int32_t>> toks;
        for (size_t i = 0; i < kTexts; ++i) toks.push_back(l->model->tokenizer().tokenize(kLlamaTexts[i], true, false));
        const size_t per = bc.ranks() ? 1 : bc.dim();
        std::vector<float> x(kTexts * per), y(kTexts * per);
        bc.embed_tokens(toks, x.data());
        bv.embed_tokens(toks, y.data());
        for (size_t i = 0; i < kTexts; ++i) {
            const double c = per == 1 ? 1.0 - std::fabs(x[i] - y[i]) : cosine(x.data() + i * per, y.data() + i * per, per);
            std::printf("vulkan bert pooling %u text %zu: %s %.8f\n", pooling, i, per == 1 ? "1 - |score difference|" : "cosine to the CPU", c);
            assert_true(c > 0.99999);
        }
    }
}

// An encoder does not generate (an engine on it only embeds, one on a reranker only scores), and a generating
// model does not embed in an embedder.
void test_wrong_model_errors(void **) {
    auto l = load_bert(BertSpec{});
    try {
        Session s(*l->model, SessionOptions{});
        fail_msg("a session on an encoder");
    } catch (const Error &e) {
        assert_int_equal(e.status(), EMBER_ERR_UNSUPPORTED);
        assert_non_null(std::strstr(e.what(), "embedding model"));
    }
    // An engine on it takes embedding requests (test_engine_embed), not prompts to generate from.
    EngineOptions eo;
    eo.backend = EMBER_BACKEND_CPU;
    eo.manual_step = true;
    Engine en(*l->model, eo);
    const int32_t prompt[] = {101, 102};
    try {
        en.check_prompt(prompt, 2);
        fail_msg("a prompt for generation accepted by an engine on an encoder");
    } catch (const Error &e) {
        assert_int_equal(e.status(), EMBER_ERR_UNSUPPORTED);
        assert_non_null(std::strstr(e.what(), "takes embedding requests"));
    }
    // A reranking model's engine scores pairs (test_engine_embed); it does not generate either.
    BertSpec rank;
    rank.pooling_type = 4;
    auto r = load_bert(rank);
    Engine ranking(*r->model, eo);
    try {
        ranking.check_prompt(prompt, 2);
        fail_msg("a prompt for generation accepted by an engine on a reranking model");
    } catch (const Error &e) {
        assert_int_equal(e.status(), EMBER_ERR_UNSUPPORTED);
        assert_non_null(std::strstr(e.what(), "pooling rank"));
    }
    SyntheticSpec dec;
    auto m = load_synthetic(dec);
    try {
        Embedder e(*m, cpu_options());
        fail_msg("an embedder on a generating model");
    } catch (const Error &e) {
        assert_int_equal(e.status(), EMBER_ERR_UNSUPPORTED);
        assert_non_null(std::strstr(e.what(), "pooling"));
    }
}

} // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokens_are_llamacpps),
        cmocka_unit_test(test_vectors_match_reference_and_llamacpp),
        cmocka_unit_test(test_normalize_and_dimensions),
        cmocka_unit_test(test_batched_equals_alone),
        cmocka_unit_test(test_rerank),
        cmocka_unit_test(test_over_long),
        cmocka_unit_test(test_decoder_embedding),
        cmocka_unit_test(test_vulkan),
        cmocka_unit_test(test_wrong_model_errors),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
