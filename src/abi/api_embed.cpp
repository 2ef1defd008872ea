// api_embed.cpp — embeddings and reranking through the C ABI (embed/embedder.hpp does the work).
#include "abi/handles.hpp"
#include "embed/embedder.hpp"

#include <cstring>

using namespace ember;
using ember::abi::guard;

struct ember_embedder {
    std::unique_ptr<ember::Embedder> embedder;
    ember::abi::HandleOwner owner;   // the thread inside a call on it (exclusive_use.hpp)
};

namespace {

ember_embed_params embed_params_defaults() {
    ember_embed_params p;
    std::memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.backend = EMBER_BACKEND_AUTO;
    p.n_batch = 2048;
    p.normalize = true;
    p.pooling = EMBER_POOLING_MODEL;
    return p;
}

void check_out(size_t n, size_t per, size_t capacity) {
    if (n != 0 && (per > SIZE_MAX / n || n * per > capacity))
        fail(EMBER_ERR_INVALID_ARGUMENT, "the output holds %zu floats; %zu texts of %zu need more", capacity, n, per);
}

} // namespace

extern "C" {

void ember_embed_params_init(ember_embed_params *params) {
    if (params) *params = embed_params_defaults();
}

ember_status ember_embedder_create(const ember_model *model, const ember_embed_params *params, ember_embedder **out) {
    if (out) *out = nullptr;
    return guard("ember_embedder_create", [&] {
        EMBER_REQUIRE_ARG(model);
        EMBER_REQUIRE_ARG(out);
        const ember_embed_params p = abi::read_params(params, sizeof(ember_embed_params),
                                                      [](ember_embed_params *d) { *d = embed_params_defaults(); },
                                                      "ember_embed_params");
        const int64_t backend = abi::enum_value(p.backend), pooling = abi::enum_value(p.pooling);
        if (backend < EMBER_BACKEND_AUTO || backend > EMBER_BACKEND_VULKAN)
            fail(EMBER_ERR_INVALID_ARGUMENT, "unknown backend %lld", (long long)backend);
        if (pooling < EMBER_POOLING_MODEL || pooling > EMBER_POOLING_LAST)
            fail(EMBER_ERR_INVALID_ARGUMENT, "unknown pooling %lld", (long long)pooling);
        EmbedOptions o;
        o.backend = p.backend;
        o.n_threads = p.n_threads ? p.n_threads : default_thread_count();
        o.n_batch = p.n_batch;
        o.max_tokens = p.max_tokens;
        o.truncate = p.truncate;
        o.normalize = p.normalize;
        o.dimensions = p.dimensions;
        o.pooling = static_cast<Pooling>(pooling);   // EMBER_POOLING_MODEL is Pooling::None: the model's own
        auto h = std::make_unique<ember_embedder>();
        h->embedder = std::make_unique<Embedder>(*model->model, o);
        *out = h.release();
        return EMBER_OK;
    });
}

void ember_embedder_free(ember_embedder *embedder) { delete embedder; }

size_t ember_embedder_dim(const ember_embedder *embedder) {
    if (!embedder) return 0;
    return embedder->embedder->ranks() ? 1 : embedder->embedder->dim();
}

bool ember_embedder_is_reranker(const ember_embedder *embedder) { return embedder && embedder->embedder->ranks(); }

ember_status ember_embed(ember_embedder *embedder, const char *const *texts, const size_t *lengths, size_t n_texts,
                         float *out, size_t capacity) {
    return guard("ember_embed", [&] {
        EMBER_REQUIRE_ARG(embedder);
        if (n_texts == 0) return EMBER_OK;
        EMBER_REQUIRE_ARG(texts);
        EMBER_REQUIRE_ARG(out);
        const abi::ExclusiveUse use(embedder->owner, "ember_embed", "embedder");
        check_out(n_texts, embedder->embedder->dim(), capacity);
        std::vector<std::string_view> v(n_texts);
        for (size_t i = 0; i < n_texts; ++i) {
            if (!texts[i]) fail(EMBER_ERR_INVALID_ARGUMENT, "text %zu is NULL", i);
            v[i] = lengths ? std::string_view(texts[i], lengths[i]) : std::string_view(texts[i]);
        }
        embedder->embedder->embed(v, out);
        return EMBER_OK;
    });
}

ember_status ember_embed_tokens(ember_embedder *embedder, const ember_token *const *tokens, const size_t *n_tokens,
                                size_t n_texts, float *out, size_t capacity) {
    return guard("ember_embed_tokens", [&] {
        EMBER_REQUIRE_ARG(embedder);
        if (n_texts == 0) return EMBER_OK;
        EMBER_REQUIRE_ARG(tokens);
        EMBER_REQUIRE_ARG(n_tokens);
        EMBER_REQUIRE_ARG(out);
        const abi::ExclusiveUse use(embedder->owner, "ember_embed_tokens", "embedder");
        const size_t per = embedder->embedder->ranks() ? 1 : embedder->embedder->dim();
        check_out(n_texts, per, capacity);
        std::vector<std::vector<int32_t>> v(n_texts);
        for (size_t i = 0; i < n_texts; ++i) {
            if (!tokens[i] && n_tokens[i]) fail(EMBER_ERR_INVALID_ARGUMENT, "tokens %zu is NULL", i);
            v[i].assign(tokens[i], tokens[i] + n_tokens[i]);
        }
        embedder->embedder->embed_tokens(v, out);
        return EMBER_OK;
    });
}

ember_status ember_rerank(ember_embedder *embedder, const char *query, const char *const *docs, size_t n_docs,
                          float *scores) {
    return guard("ember_rerank", [&] {
        EMBER_REQUIRE_ARG(embedder);
        EMBER_REQUIRE_ARG(query);
        if (n_docs == 0) return EMBER_OK;
        EMBER_REQUIRE_ARG(docs);
        EMBER_REQUIRE_ARG(scores);
        const abi::ExclusiveUse use(embedder->owner, "ember_rerank", "embedder");
        std::vector<std::string_view> v(n_docs);
        for (size_t i = 0; i < n_docs; ++i) {
            if (!docs[i]) fail(EMBER_ERR_INVALID_ARGUMENT, "document %zu is NULL", i);
            v[i] = docs[i];
        }
        embedder->embedder->rerank(query, v, scores);
        return EMBER_OK;
    });
}

} // extern "C"
