// test_engine_embed.cpp — embedding requests on an engine (ember_engine_submit_embed), through the public
// API, on the CPU or on the backend named by the first argument ("vulkan"), on synthetic files
// (src/testing/synthetic_bert.cpp, synthetic.cpp):
//   - an engine on a BERT file (mean and CLS pooling) and on a decoder embedder (qwen3, last pooling)
//     embeds the texts of requests submitted from several threads at once as ember_embed does;
//   - on the same decoder without a pooling type (a generating model), mean and last pooling over its
//     final normed hidden rows give the embedder's vectors of the pooled file, while generations run,
//     and their tokens (greedy and seeded sampled) are those of an engine without embedding requests;
//   - an engine on a BERT cross-encoder scores (query, document) pairs from several threads as ember_rerank
//     does;
//   - the KV blocks of embedded texts are free after their pass (nothing used, nothing cached);
//   - cancel and free mid-way; generation refused on an embedding engine; bad params refused, and a query
//     where it does not fit (or none on a reranking model).
// Bounds: on the CPU the engine's vectors are the embedder's bit for bit (a row does not depend on the other
// rows of its pass); on Vulkan within cosine 0.99999 (passes of other sizes may split work differently).
#include "test_api_util.h"
#include "test_util.h"

#include "data/embed_llamacpp.inc"
#include "ember/ember.h"
#include "testing/synthetic.hpp"
#include "testing/synthetic_bert.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

constexpr size_t kTexts = sizeof kLlamaTexts / sizeof kLlamaTexts[0];
ember_backend_kind g_backend = EMBER_BACKEND_CPU;

struct TempModel {
    std::string path;
    ember_model *model = nullptr;
    explicit TempModel(const std::vector<uint8_t> &bytes) {
        char p[] = "/tmp/ember_engine_embed_XXXXXX";
        const int fd = mkstemp(p);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, bytes.data(), bytes.size()), (ssize_t)bytes.size());
        close(fd);
        path = p;
        if (ember_model_load(path.c_str(), nullptr, &model) != EMBER_OK) fail_msg("load: %s", ember_last_error());
    }
    ~TempModel() {
        ember_model_free(model);
        unlink(path.c_str());
    }
};

ember_engine *engine(const ember_model *m, bool manual, uint32_t n_batch = 0) {
    ember_engine_params p;
    ember_engine_params_init(&p);
    p.backend = g_backend;
    p.n_threads = 2;
    p.n_ctx = 256;
    p.n_seq_max = 4;
    p.manual_step = manual;
    if (n_batch) p.n_batch = n_batch;
    ember_engine *e = nullptr;
    if (ember_engine_create(m, &p, &e) != EMBER_OK) fail_msg("engine: %s", ember_last_error());
    return e;
}

ember_embedder *embedder(const ember_model *m, ember_pooling pooling) {
    ember_embed_params p;
    ember_embed_params_init(&p);
    p.backend = g_backend;
    p.n_threads = 2;
    p.pooling = pooling;
    ember_embedder *e = nullptr;
    if (ember_embedder_create(m, &p, &e) != EMBER_OK) fail_msg("embedder: %s", ember_last_error());
    return e;
}

// The request's vectors once it is done (manual engines are stepped here).
std::vector<float> vectors(ember_engine *e, ember_request *r, bool manual) {
    if (manual) {
        ember_request_state st = EMBER_REQUEST_QUEUED;
        while (st == EMBER_REQUEST_QUEUED || st == EMBER_REQUEST_RUNNING) {
            assert_int_equal(ember_engine_step(e, nullptr), EMBER_OK);
            assert_int_equal(ember_request_poll(r, nullptr, 0, nullptr, &st), EMBER_OK);
        }
    }
    assert_int_equal(ember_request_wait(r, UINT32_MAX), EMBER_OK);
    size_t n = 0;
    if (ember_request_embeddings(r, nullptr, 0, &n) != EMBER_OK) fail_msg("embeddings: %s", ember_last_error());
    std::vector<float> v(n);
    assert_int_equal(ember_request_embeddings(r, v.data(), v.size(), &n), EMBER_OK);
    return v;
}

ember_embed_request_params text_params(const char *const *texts, size_t n, ember_pooling pooling) {
    ember_embed_request_params p;
    ember_embed_request_params_init(&p);
    p.texts = texts;
    p.n_texts = n;
    p.pooling = pooling;
    return p;
}

// a and b equal: bit for bit on the CPU, within cosine 0.99999 per vector elsewhere (scores within 1e-3).
void expect_same(const float *a, const float *b, size_t n_vec, size_t dim, const char *what) {
    double max_diff = 0, min_cos = 1;
    for (size_t i = 0; i < n_vec; ++i) {
        double ab = 0, aa = 0, bb = 0;
        for (size_t k = 0; k < dim; ++k) {
            const double x = a[i * dim + k], y = b[i * dim + k];
            max_diff = std::max(max_diff, std::fabs(x - y));
            ab += x * y, aa += x * x, bb += y * y;
        }
        min_cos = std::min(min_cos, ab / std::sqrt(aa * bb));
    }
    std::printf("%s: %zu vectors of %zu, max |engine - embedder| %.3g, min cosine %.9f\n", what, n_vec, dim, max_diff, min_cos);
    if (g_backend == EMBER_BACKEND_CPU) assert_true(max_diff == 0.0);
    else if (dim == 1) assert_true(max_diff < 1e-3);   // scores: a cosine of one value says only its sign
    else assert_true(min_cos > 0.99999);
}

// Nothing holds blocks; with only embedding requests run, nothing is cached either (an embedded text's
// blocks are never published). Returns the cached blocks.
uint32_t expect_blocks_free(ember_engine *e, bool embeddings_only = true) {
    ember_engine_stats s;
    ember_engine_stats_init(&s);
    assert_int_equal(ember_engine_get_stats(e, &s), EMBER_OK);
    assert_int_equal(s.n_blocks_used, 0);
    if (embeddings_only) assert_int_equal(s.n_blocks_cached, 0);
    return s.n_blocks_cached;
}

// Four threads, each a request of the texts from its own index on (so passes mix their texts), with the
// query (scoring requests) or without: their results equal `want`, dim floats per text.
void expect_threads_same(ember_engine *e, const char *query, const std::vector<float> &want, size_t dim, const char *what) {
    std::vector<std::vector<float>> got(kTexts);
    std::vector<std::thread> threads;
    for (size_t t = 0; t < kTexts; ++t)
        threads.emplace_back([&, t] {
            ember_embed_request_params p = text_params(kLlamaTexts + t, kTexts - t, EMBER_POOLING_MODEL);
            p.query = query;
            ember_request *r = nullptr;
            if (ember_engine_submit_embed(e, &p, &r) != EMBER_OK) return;
            if (ember_request_embedding_dim(r) == dim) got[t] = vectors(e, r, false);
            ember_request_free(r);
        });
    for (auto &th : threads) th.join();
    for (size_t t = 0; t < kTexts; ++t) {
        assert_int_equal(got[t].size(), (kTexts - t) * dim);
        expect_same(got[t].data(), want.data() + t * dim, kTexts - t, dim, what);
    }
}

// Requests from several threads at once, on encoders (BERT with mean and CLS pooling, nomic-bert,
// gemma-embedding) and a decoder embedder (qwen3, last pooling), equal ember_embed's vectors of the same texts.
void test_concurrent_requests_equal_ember_embed(void **) {
    ember::BertSpec mean, cls, nomic;
    cls.pooling_type = 2;
    nomic.arch = "nomic-bert";
    ember::SyntheticSpec qwen = ember::synthetic_family("qwen3");
    qwen.pooling_type = 3;
    const struct {
        const char *what;
        std::vector<uint8_t> bytes;
    } files[] = {
        {"bert mean", ember::synthetic_bert_gguf(mean)},
        {"bert cls", ember::synthetic_bert_gguf(cls)},
        {"nomic-bert", ember::synthetic_bert_gguf(nomic)},
        {"gemma-embedding", ember::synthetic_model_gguf(ember::synthetic_family("gemma-embedding"))},
        {"qwen3 last", ember::synthetic_model_gguf(qwen)},
    };
    for (const auto &file : files) {
        const std::vector<uint8_t> &bytes = file.bytes;
        TempModel m(bytes);
        ember_embedder *emb = embedder(m.model, EMBER_POOLING_MODEL);
        const size_t dim = ember_embedder_dim(emb);
        std::vector<float> want(kTexts * dim);
        assert_int_equal(ember_embed(emb, kLlamaTexts, nullptr, kTexts, want.data(), want.size()), EMBER_OK);
        ember_engine *e = engine(m.model, false);
        expect_threads_same(e, nullptr, want, dim, file.what);
        expect_blocks_free(e);
        ember_engine_free(e);
        ember_embedder_free(emb);
    }
}

// A reranking model's engine (a BERT cross-encoder: the CLS row's head) scores each document for the query:
// requests from several threads at once give ember_rerank's scores, pairs formed the same way.
void test_scoring_requests_equal_ember_rerank(void **) {
    ember::BertSpec rank;
    rank.pooling_type = 4;
    TempModel m(ember::synthetic_bert_gguf(rank));
    ember_embedder *emb = embedder(m.model, EMBER_POOLING_MODEL);
    const char *const query = "where is the dragon";
    std::vector<float> want(kTexts);
    assert_int_equal(ember_rerank(emb, query, kLlamaTexts, kTexts, want.data()), EMBER_OK);
    ember_engine *e = engine(m.model, false);
    expect_threads_same(e, query, want, 1, "bert rerank");
    // The scores are not all one value (a test of equal scores would pass on a constant).
    assert_true(*std::min_element(want.begin(), want.end()) < *std::max_element(want.begin(), want.end()));
    expect_blocks_free(e);
    ember_engine_free(e);
    ember_embedder_free(emb);
}

struct Gen {
    std::vector<ember_token> prompt;
    ember_sampler_params sampling;
    bool sampled;
};

// Runs the generations on a manual engine; with embeddings, embedding requests come and go between steps
// (one cancelled mid-way, one freed while queued). Returns each generation's tokens.
std::vector<std::vector<ember_token>> run_generations(const ember_model *gen_model, const std::vector<Gen> &gens, bool embeddings,
                                                      const ember_model *pooled_model, uint32_t *cached) {
    ember_engine *e = engine(gen_model, true, 128);
    std::vector<ember_request *> rs;
    for (const Gen &g : gens) {
        ember_request_params p;
        ember_request_params_init(&p);
        p.prompt = g.prompt.data();
        p.n_prompt = g.prompt.size();
        p.max_tokens = 24;
        p.sampling = g.sampled ? &g.sampling : nullptr;
        ember_request *r = nullptr;
        assert_int_equal(ember_request_submit(e, &p, &r), EMBER_OK);
        rs.push_back(r);
    }
    std::vector<std::vector<ember_token>> out(gens.size());
    std::vector<ember_request *> embeds;
    std::vector<ember_pooling> poolings;
    for (int step = 0;; ++step) {
        if (embeddings && step % 3 == 0 && step < 30) {
            const ember_pooling pooling = step % 2 ? EMBER_POOLING_MEAN : EMBER_POOLING_LAST;
            ember_embed_request_params p = text_params(kLlamaTexts, kTexts, pooling);
            ember_request *r = nullptr;
            if (ember_engine_submit_embed(e, &p, &r) != EMBER_OK) fail_msg("submit_embed: %s", ember_last_error());
            if (step == 6) {
                ember_request_free(r);   // freed before its first pass
            } else {
                embeds.push_back(r);
                poolings.push_back(pooling);
            }
        }
        bool busy = false;
        assert_int_equal(ember_engine_step(e, &busy), EMBER_OK);
        if (embeddings && step == 9) assert_int_equal(ember_request_cancel(embeds.back()), EMBER_OK);
        if (!busy && step >= 30) break;
    }
    for (size_t i = 0; i < rs.size(); ++i) {
        ember_request_state st;
        ember_token buf[64];
        size_t n = 0;
        assert_int_equal(ember_request_poll(rs[i], buf, 64, &n, &st), EMBER_OK);
        assert_int_equal(st, EMBER_REQUEST_DONE);
        out[i].assign(buf, buf + n);
        ember_request_free(rs[i]);
    }
    if (embeddings) {
        // Each done request's vectors are the embedder's of the same file with a pooling type.
        ember_embedder *last = embedder(pooled_model, EMBER_POOLING_LAST), *mean = embedder(pooled_model, EMBER_POOLING_MEAN);
        const size_t dim = ember_embedder_dim(last);
        std::vector<float> want_last(kTexts * dim), want_mean(kTexts * dim);
        assert_int_equal(ember_embed(last, kLlamaTexts, nullptr, kTexts, want_last.data(), want_last.size()), EMBER_OK);
        assert_int_equal(ember_embed(mean, kLlamaTexts, nullptr, kTexts, want_mean.data(), want_mean.size()), EMBER_OK);
        size_t done = 0, cancelled = 0;
        for (size_t i = 0; i < embeds.size(); ++i) {
            ember_request_state st;
            assert_int_equal(ember_request_poll(embeds[i], nullptr, 0, nullptr, &st), EMBER_OK);
            if (st == EMBER_REQUEST_CANCELLED) {
                ++cancelled;
                size_t n = 0;
                assert_int_equal(ember_request_embeddings(embeds[i], nullptr, 0, &n), EMBER_ERR_INVALID_STATE);
            } else {
                assert_int_equal(st, EMBER_REQUEST_DONE);
                assert_int_equal(ember_request_embedding_dim(embeds[i]), dim);
                const std::vector<float> v = vectors(e, embeds[i], true);
                expect_same(v.data(), (poolings[i] == EMBER_POOLING_LAST ? want_last : want_mean).data(), kTexts, dim,
                            poolings[i] == EMBER_POOLING_LAST ? "generating model, last" : "generating model, mean");
                ++done;
            }
            ember_request_free(embeds[i]);
        }
        assert_int_equal(cancelled, 1);
        assert_true(done >= 8);
        ember_embedder_free(last);
        ember_embedder_free(mean);
    }
    *cached = expect_blocks_free(e, false);   // the generations' prompts and outputs, and nothing of the texts
    ember_engine_free(e);
    return out;
}

// On a generating model, embedding requests beside running generations: the generations' tokens are
// those of an engine without them (greedy and seeded sampled), and the vectors those of the embedder on
// the same weights with a pooling type. On qwen3, and on gemma3 (window layers: each text gets a window
// table of its own beside its blocks).
void test_generations_unchanged(void **) {
    for (const char *family : {"qwen3", "gemma3"}) {
        ember::SyntheticSpec s = ember::synthetic_family(family);
        TempModel gen(ember::synthetic_model_gguf(s));
        s.pooling_type = 3;
        TempModel pooled(ember::synthetic_model_gguf(s));
        ember_token prompt[64];
        const size_t n_prompt = test_tokenize(gen.model, kLlamaTexts[3], prompt, 64);
        std::vector<Gen> gens(3);
        for (size_t i = 0; i < gens.size(); ++i) {
            gens[i].prompt.assign(prompt, prompt + std::min(n_prompt, 6 + 5 * i));
            ember_sampler_params_init(&gens[i].sampling);
            gens[i].sampling.temperature = 0.9f;
            gens[i].sampling.seed = 42 + i;
            gens[i].sampled = i != 1;
        }
        uint32_t cached_plain = 0, cached_beside = 0;
        const auto plain = run_generations(gen.model, gens, false, nullptr, &cached_plain);
        const auto beside = run_generations(gen.model, gens, true, pooled.model, &cached_beside);
        assert_int_equal(cached_plain, cached_beside);
        for (size_t i = 0; i < gens.size(); ++i) {
            std::printf("%s generation %zu (%s): %zu tokens plain, %zu beside embeddings\n", family, i,
                        gens[i].sampled ? "sampled" : "greedy", plain[i].size(), beside[i].size());
            assert_true(plain[i].size() > 4);
            assert_true(plain[i] == beside[i]);
        }
    }
}

void expect_status(ember_status got, ember_status want, const char *needle) {
    if (got != want) fail_msg("status %d, wanted %d: %s", (int)got, (int)want, ember_last_error());
    if (needle && !std::strstr(ember_last_error(), needle)) fail_msg("'%s' does not say '%s'", ember_last_error(), needle);
}

// A generation request on an engine over an embedding or reranking model: refused, naming what it takes.
void expect_generation_refused(ember_engine *e) {
    const ember_token prompt[] = {101, 102};
    ember_request_params gp;
    ember_request_params_init(&gp);
    gp.prompt = prompt;
    gp.n_prompt = 2;
    ember_request *r = nullptr;
    expect_status(ember_request_submit(e, &gp, &r), EMBER_ERR_UNSUPPORTED, "embedding requests");
    assert_null(r);
}

// What is refused, and cancel / free of a request in the middle of its texts.
void test_refusals_and_cancel(void **) {
    ember::BertSpec b;
    TempModel bert(ember::synthetic_bert_gguf(b));
    ember_engine *e = engine(bert.model, true, 0);
    ember_request *r = nullptr;
    // Generation on an embedding engine.
    expect_generation_refused(e);
    const ember_token prompt[] = {101, 102};
    expect_status(ember_engine_pin_prefix(e, prompt, 2), EMBER_ERR_UNSUPPORTED, "embedding model");
    // Bad params.
    ember_embed_request_params p = text_params(kLlamaTexts, kTexts, EMBER_POOLING_MODEL);
    expect_status(ember_engine_submit_embed(nullptr, &p, &r), EMBER_ERR_INVALID_ARGUMENT, nullptr);
    expect_status(ember_engine_submit_embed(e, nullptr, &r), EMBER_ERR_INVALID_ARGUMENT, nullptr);
    expect_status(ember_engine_submit_embed(e, &p, nullptr), EMBER_ERR_INVALID_ARGUMENT, nullptr);
    ember_embed_request_params bad = p;
    bad.struct_size = 8;
    expect_status(ember_engine_submit_embed(e, &bad, &r), EMBER_ERR_INVALID_ARGUMENT, "struct_size");
    bad = p;
    bad.n_texts = 0;
    expect_status(ember_engine_submit_embed(e, &bad, &r), EMBER_ERR_INVALID_ARGUMENT, "at least one text");
    bad = p;
    bad.texts = nullptr;
    expect_status(ember_engine_submit_embed(e, &bad, &r), EMBER_ERR_INVALID_ARGUMENT, "tokens");
    const char *const empty[] = {""};
    const size_t zero[] = {0};
    const ember_token *const no_tokens[] = {nullptr};
    bad = text_params(empty, 1, EMBER_POOLING_MODEL);
    bad.texts = nullptr, bad.tokens = no_tokens, bad.n_tokens = zero;
    expect_status(ember_engine_submit_embed(e, &bad, &r), EMBER_ERR_INVALID_ARGUMENT, "empty text");
    bad = p;
    bad.pooling = (ember_pooling)9;
    expect_status(ember_engine_submit_embed(e, &bad, &r), EMBER_ERR_INVALID_ARGUMENT, "pooling");
    bad = p;
    bad.dimensions = 65;
    expect_status(ember_engine_submit_embed(e, &bad, &r), EMBER_ERR_INVALID_ARGUMENT, "dimensions");
    bad = p;
    bad.max_tokens = 8;   // text 1 is 9 tokens with [CLS] and [SEP]
    expect_status(ember_engine_submit_embed(e, &bad, &r), EMBER_ERR_INVALID_ARGUMENT, "9 tokens is longer");
    bad.truncate = true;
    expect_status(ember_engine_submit_embed(e, &bad, &r), EMBER_OK, nullptr);
    assert_int_equal(vectors(e, r, true).size(), kTexts * 64);
    ember_request_free(r);
    bad.max_tokens = 100000;
    expect_status(ember_engine_submit_embed(e, &bad, &r), EMBER_ERR_INVALID_ARGUMENT, "max_tokens");

    // A request read before it is done, and with too small a buffer; generation calls on it.
    expect_status(ember_engine_submit_embed(e, &p, &r), EMBER_OK, nullptr);
    size_t n = 0;
    expect_status(ember_request_embeddings(r, nullptr, 0, &n), EMBER_ERR_INVALID_STATE, "queued");
    ember_token_logprob lp;
    expect_status(ember_request_logprobs(r, 0, &lp, nullptr, 0, &n), EMBER_ERR_INVALID_STATE, "embedding request");
    const std::vector<float> v = vectors(e, r, true);
    float small[8];
    expect_status(ember_request_embeddings(r, small, 8, &n), EMBER_ERR_INVALID_ARGUMENT, "need");
    assert_int_equal(n, v.size());
    ember_request_free(r);

    // Cancel in the middle: a pass holds 128 tokens (the file's positions), so a request of 40 texts of 16
    // tokens is running with texts left after one step; the next step ends it, and its blocks are free.
    const std::vector<const char *> many(40, kLlamaTexts[2]);
    p = text_params(many.data(), many.size(), EMBER_POOLING_MODEL);
    ember_request *other = nullptr;
    expect_status(ember_engine_submit_embed(e, &p, &r), EMBER_OK, nullptr);
    expect_status(ember_engine_submit_embed(e, &p, &other), EMBER_OK, nullptr);
    assert_int_equal(ember_engine_step(e, nullptr), EMBER_OK);
    ember_request_state st;
    assert_int_equal(ember_request_poll(r, nullptr, 0, nullptr, &st), EMBER_OK);
    assert_int_equal(st, EMBER_REQUEST_RUNNING);
    assert_int_equal(ember_request_cancel(r), EMBER_OK);
    ember_request_free(other);   // freed while queued: it never runs
    bool busy = true;
    for (int i = 0; i < 3 && busy; ++i) assert_int_equal(ember_engine_step(e, &busy), EMBER_OK);
    assert_false(busy);
    assert_int_equal(ember_request_wait(r, 0), EMBER_OK);
    assert_int_equal(ember_request_poll(r, nullptr, 0, nullptr, &st), EMBER_OK);
    assert_int_equal(st, EMBER_REQUEST_CANCELLED);
    expect_status(ember_request_embeddings(r, nullptr, 0, &n), EMBER_ERR_INVALID_STATE, "cancelled");
    ember_request_free(r);
    expect_blocks_free(e);
    // A request freed in the middle of its texts.
    expect_status(ember_engine_submit_embed(e, &p, &r), EMBER_OK, nullptr);
    assert_int_equal(ember_engine_step(e, nullptr), EMBER_OK);
    ember_request_free(r);
    for (int i = 0; i < 3 && busy; ++i) assert_int_equal(ember_engine_step(e, &busy), EMBER_OK);
    expect_blocks_free(e);
    ember_engine_free(e);

    // A generating model: its own pooling (none) and CLS are refused, naming why; embeddings of a
    // generation request are refused.
    ember::SyntheticSpec s = ember::synthetic_family("qwen3");
    TempModel gen(ember::synthetic_model_gguf(s));
    e = engine(gen.model, true, 0);
    p = text_params(kLlamaTexts, kTexts, EMBER_POOLING_MODEL);
    expect_status(ember_engine_submit_embed(e, &p, &r), EMBER_ERR_INVALID_ARGUMENT, "no pooling type");
    p.pooling = EMBER_POOLING_CLS;
    expect_status(ember_engine_submit_embed(e, &p, &r), EMBER_ERR_INVALID_ARGUMENT, "use mean or last");
    ember_request_params gp;
    ember_request_params_init(&gp);
    gp.prompt = kLlamaQwenTokens0;
    gp.n_prompt = 4;
    gp.max_tokens = 2;
    assert_int_equal(ember_request_submit(e, &gp, &r), EMBER_OK);
    expect_status(ember_request_embeddings(r, nullptr, 0, &n), EMBER_ERR_INVALID_STATE, "generation request");
    assert_int_equal(ember_request_embedding_dim(r), 0);
    ember_request_free(r);
    // A query on a generating model.
    p = text_params(kLlamaTexts, kTexts, EMBER_POOLING_MEAN);
    p.query = "where is the dragon";
    expect_status(ember_engine_submit_embed(e, &p, &r), EMBER_ERR_INVALID_ARGUMENT, "query is for a reranking model");
    ember_engine_free(e);
}

// params with one change, refused with EMBER_ERR_INVALID_ARGUMENT naming `needle`.
template <class Change>
void expect_refused(ember_engine *e, ember_embed_request_params p, Change change, const char *needle) {
    change(p);
    ember_request *r = nullptr;
    expect_status(ember_engine_submit_embed(e, &p, &r), EMBER_ERR_INVALID_ARGUMENT, needle);
    assert_null(r);
}

// A reranking model's engine takes scoring requests only: no lone texts (params of an older struct_size
// read as no query), no tokens with the query, no pooling or dimensions of its own, no generation; its
// max_tokens bounds each pair; and a query on an embedding model's engine is refused.
void test_scoring_refusals(void **) {
    ember::BertSpec b;
    b.pooling_type = 4;
    TempModel rank(ember::synthetic_bert_gguf(b));
    ember_engine *e = engine(rank.model, true, 0);
    ember_embed_request_params p = text_params(kLlamaTexts, kTexts, EMBER_POOLING_MODEL);
    expect_refused(e, p, [](ember_embed_request_params &) {}, "is a reranking model");
    p.query = "where is the dragon";
    const auto old_size = [](ember_embed_request_params &q) { q.struct_size = offsetof(ember_embed_request_params, query); };
    expect_refused(e, p, old_size, "is a reranking model");
    expect_refused(e, p, [](ember_embed_request_params &q) { q.dimensions = 1; }, "dimensions");
    expect_refused(e, p, [](ember_embed_request_params &q) { q.pooling = EMBER_POOLING_MEAN; }, "ranking head");
    // max_tokens bounds each pair (query and document): over it refused, or cut with truncate.
    expect_refused(e, p, [](ember_embed_request_params &q) { q.max_tokens = 8; }, "is longer than");
    ember_embed_request_params cut = p;
    cut.max_tokens = 8;
    cut.truncate = true;
    ember_request *r = nullptr;
    expect_status(ember_engine_submit_embed(e, &cut, &r), EMBER_OK, nullptr);
    assert_int_equal(vectors(e, r, true).size(), kTexts);
    ember_request_free(r);
    static const ember_token pair[] = {101, 1000, 102, 1001, 102};
    static const ember_token *const pairs[] = {pair};
    static const size_t n_pair[] = {5};
    expect_refused(e, p, [](ember_embed_request_params &q) { q.texts = nullptr, q.tokens = pairs, q.n_tokens = n_pair, q.n_texts = 1; },
                   "not token sequences");
    expect_generation_refused(e);
    expect_status(ember_engine_submit_embed(e, &p, &r), EMBER_OK, nullptr);
    assert_int_equal(ember_request_embedding_dim(r), 1);
    assert_int_equal(vectors(e, r, true).size(), kTexts);
    ember_request_free(r);
    ember_engine_free(e);

    // An embedding model: a query is refused; an older struct_size reads as no query.
    b.pooling_type = 1;
    TempModel bert(ember::synthetic_bert_gguf(b));
    e = engine(bert.model, true, 0);
    expect_refused(e, p, [](ember_embed_request_params &) {}, "query is for a reranking model");
    old_size(p);
    expect_status(ember_engine_submit_embed(e, &p, &r), EMBER_OK, nullptr);
    assert_int_equal(vectors(e, r, true).size(), kTexts * 64);
    ember_request_free(r);
    ember_engine_free(e);
}

} // namespace

int main(int argc, char **argv) {
    if (argc >= 2 && std::strcmp(argv[1], "vulkan") == 0) {
        g_backend = EMBER_BACKEND_VULKAN;
        size_t n = 0;
        if (ember_backend_devices(EMBER_BACKEND_VULKAN, nullptr, 0, &n) != EMBER_OK || n == 0)
            return std::printf("SKIP: no vulkan backend here: %s\n", ember_last_error()), EMBER_TEST_SKIP;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_requests_equal_ember_embed),
        cmocka_unit_test(test_scoring_requests_equal_ember_rerank),
        cmocka_unit_test(test_generations_unchanged),
        cmocka_unit_test(test_refusals_and_cancel),
        cmocka_unit_test(test_scoring_refusals),
    };
    // On Vulkan (lavapipe, under the validation layer) the backend-dependent parts only.
    const size_t n = g_backend == EMBER_BACKEND_VULKAN ? 3 : sizeof tests / sizeof tests[0];
    return _cmocka_run_group_tests("test_engine_embed", tests, n, nullptr, nullptr);
}
