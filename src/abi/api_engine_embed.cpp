// api_engine_embed.cpp — embedding requests (and a reranking model's scoring requests, texts with a query)
// on an engine through the C ABI (engine/engine_embed.cpp does
// the work; the request handle and its lifecycle are api_engine.cpp's).
#include "abi/handles.hpp"
#include "embed/rerank_pair.hpp"

#include <cstddef>
#include <cstring>

using namespace ember;
using ember::abi::guard;

namespace {

ember_embed_request_params embed_request_params_defaults() {
    ember_embed_request_params p;
    std::memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.pooling = EMBER_POOLING_MODEL;
    p.normalize = true;
    return p;
}

// The texts as token sequences: tokenized with the model's special tokens, or the caller's tokens as given.
std::vector<std::vector<int32_t>> request_texts(const Model &model, const ember_embed_request_params &p) {
    if (p.n_texts == 0) fail(EMBER_ERR_INVALID_ARGUMENT, "an embedding request needs at least one text (n_texts is 0)");
    if (!p.texts && (!p.tokens || !p.n_tokens))
        fail(EMBER_ERR_INVALID_ARGUMENT, "an embedding request needs texts, or tokens and n_tokens");
    if (p.query && !p.texts)
        fail(EMBER_ERR_INVALID_ARGUMENT, "a query scores documents given as texts, not token sequences "
             "(tokens): leave texts set, or query NULL");
    std::vector<std::vector<int32_t>> out(p.n_texts);
    for (size_t i = 0; i < p.n_texts; ++i) {
        if (p.texts) {
            if (!p.texts[i]) fail(EMBER_ERR_INVALID_ARGUMENT, "text %zu is NULL", i);
            const std::string_view t = p.lengths ? std::string_view(p.texts[i], p.lengths[i]) : std::string_view(p.texts[i]);
            // With a query, each text is a document: the pair's tokens, as ember_rerank forms them.
            out[i] = p.query ? rerank_pair_tokens(model, p.query, t) : model.tokenizer().tokenize(t, true, false);
        } else {
            if (!p.tokens[i] && p.n_tokens[i]) fail(EMBER_ERR_INVALID_ARGUMENT, "tokens %zu is NULL", i);
            out[i].assign(p.tokens[i], p.tokens[i] + p.n_tokens[i]);
        }
    }
    return out;
}

} // namespace

extern "C" {

void ember_embed_request_params_init(ember_embed_request_params *params) {
    if (params) *params = embed_request_params_defaults();
}

ember_status ember_engine_submit_embed(ember_engine *engine, const ember_embed_request_params *params, ember_request **out) {
    if (out) *out = nullptr;
    return guard("ember_engine_submit_embed", [&] {
        EMBER_REQUIRE_ARG(engine);
        EMBER_REQUIRE_ARG(params);
        EMBER_REQUIRE_ARG(out);
        // The struct's first version ends before query: such a struct_size reads as no query.
        const ember_embed_request_params p = abi::read_params(params, offsetof(ember_embed_request_params, query),
                                                              [](ember_embed_request_params *d) { *d = embed_request_params_defaults(); },
                                                              "ember_embed_request_params");
        const int64_t pooling = abi::enum_value(p.pooling);
        if (pooling < EMBER_POOLING_MODEL || pooling > EMBER_POOLING_LAST)
            fail(EMBER_ERR_INVALID_ARGUMENT, "unknown pooling %lld", (long long)pooling);
        Engine &e = *engine->engine;
        Engine::EmbedRequestOptions o;
        o.pooling = {static_cast<Pooling>(pooling), p.dimensions, p.normalize};   // EMBER_POOLING_MODEL: Pooling::None
        o.max_tokens = p.max_tokens;
        o.truncate = p.truncate;
        o.pairs = p.query != nullptr;
        auto r = std::make_shared<Request>();
        r->embed = e.embed_work(request_texts(e.model(), p), o);
        auto h = std::make_unique<ember_request>();
        r->handle = h.get();
        h->request = r;
        e.submit_embed(r);
        *out = h.release();
        return EMBER_OK;
    });
}

size_t ember_request_embedding_dim(const ember_request *request) {
    if (!request || !request->request->embed) return 0;
    return request->request->embed->pooling.per_text();
}

ember_status ember_request_embeddings(ember_request *request, float *out, size_t capacity, size_t *out_count) {
    if (out_count) *out_count = 0;
    return guard("ember_request_embeddings", [&] {
        EMBER_REQUIRE_ARG(request);
        EMBER_REQUIRE_ARG(out_count);
        if (!out && capacity) fail(EMBER_ERR_INVALID_ARGUMENT, "out is NULL but capacity is %zu", capacity);
        Request &r = *request->request;
        if (!r.embed) fail(EMBER_ERR_INVALID_STATE, "a generation request has no embeddings (ember_engine_submit_embed makes those)");
        const std::vector<float> &v = r.embed->vectors;   // written by the engine before the request became DONE
        {
            std::lock_guard<std::mutex> lock(r.mutex);
            if (r.state != EMBER_REQUEST_DONE)
                fail(EMBER_ERR_INVALID_STATE, "the embedding request is %s, not done",
                     r.state == EMBER_REQUEST_QUEUED    ? "queued"
                     : r.state == EMBER_REQUEST_RUNNING ? "running"
                     : r.state == EMBER_REQUEST_FAILED  ? "failed (ember_request_error says why)"
                                                        : "cancelled");
        }
        *out_count = v.size();
        if (!out) return EMBER_OK;
        if (capacity < v.size())
            fail(EMBER_ERR_INVALID_ARGUMENT, "the output holds %zu floats; the request's %zu texts of %u need %zu", capacity,
                 r.embed->texts.size(), r.embed->pooling.per_text(), v.size());
        std::copy(v.begin(), v.end(), out);
        return EMBER_OK;
    });
}

} // extern "C"
