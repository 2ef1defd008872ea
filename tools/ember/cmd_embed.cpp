// cmd_embed.cpp — `ember embed` (texts to vectors) and `ember rerank` (documents scored for a query), one
// JSON object on stdout, through the embedder of the public API (docs/embeddings.md).
#include "cli.hpp"

#include <cstdio>
#include <cstring>
#include <memory>

namespace cli {

namespace {

// The embedder for -m MODEL with the options both commands take; nullptr after a message, with *rc the
// exit status (2: usage, 1: the library refused).
ember_embedder *make_embedder(const Args &a, ember_model **model, int *rc) {
    *rc = 2;
    const std::string path = a.has("--model") ? a.str("--model", "") : a.str("-m", "");
    if (path.empty()) {
        usage_error("-m MODEL is required");
        return nullptr;
    }
    *rc = 1;
    *model = load_model(path, false, false);
    if (!*model) return nullptr;
    ember_embed_params p;
    ember_embed_params_init(&p);
    p.n_threads = static_cast<uint32_t>(a.integer(a.has("--threads") ? "--threads" : "-t", 0));
    p.max_tokens = static_cast<uint32_t>(a.integer("--max-tokens", 0));
    p.truncate = a.flag("--truncate");
    p.normalize = a.flag("--normalize");
    p.dimensions = static_cast<uint32_t>(a.integer("--dimensions", 0));
    const std::string pooling = a.str("--pooling", "model");
    if (pooling == "mean") p.pooling = EMBER_POOLING_MEAN;
    else if (pooling == "cls") p.pooling = EMBER_POOLING_CLS;
    else if (pooling == "last") p.pooling = EMBER_POOLING_LAST;
    else if (pooling != "model") {
        *rc = usage_error("--pooling takes model, mean, cls or last");
        return nullptr;
    }
    if (!backend_option(a, &p.backend)) return nullptr;
    ember_embedder *e = nullptr;
    if (const ember_status s = ember_embedder_create(*model, &p, &e); s != EMBER_OK) *rc = fail("embedder", s);
    return e;
}

const std::vector<std::string> kValueOpts = {"-m", "--model", "-t", "--threads", "--max-tokens", "--dimensions",
                                             "--pooling", "--backend", "-q", "--query"};
const std::vector<std::string> kFlagOpts = {"--normalize", "--truncate"};

// A float as JSON (no NaN or infinity there: null).
void print_float(float v) {
    if (v != v || v > 3.4e38f || v < -3.4e38f) std::printf("null");
    else std::printf("%.9g", static_cast<double>(v));
}

} // namespace

int cmd_embed(int argc, char **argv) {
    const Args a = parse(argc, argv, 2, kValueOpts, kFlagOpts);
    if (a.positional.empty()) return usage_error("embed: at least one TEXT is expected");
    ember_model *model = nullptr;
    int rc = 0;
    ember_embedder *e = make_embedder(a, &model, &rc);
    if (!e) {
        ember_model_free(model);
        return rc;
    }
    const size_t n = a.positional.size(), dim = ember_embedder_dim(e);
    std::vector<const char *> texts(n);
    std::vector<size_t> lengths(n);
    for (size_t i = 0; i < n; ++i) texts[i] = a.positional[i].c_str(), lengths[i] = a.positional[i].size();
    std::vector<float> out(n * dim);
    const ember_status s = ember_embed(e, texts.data(), lengths.data(), n, out.data(), out.size());
    if (s == EMBER_OK) {
        std::printf("{\"dim\": %zu, \"embeddings\": [", dim);
        for (size_t i = 0; i < n; ++i) {
            std::printf(i ? ", [" : "[");
            for (size_t k = 0; k < dim; ++k) {
                if (k) std::printf(", ");
                print_float(out[i * dim + k]);
            }
            std::printf("]");
        }
        std::printf("]}\n");
    }
    ember_embedder_free(e);
    ember_model_free(model);
    return s == EMBER_OK ? 0 : fail("embed", s);
}

int cmd_rerank(int argc, char **argv) {
    const Args a = parse(argc, argv, 2, kValueOpts, kFlagOpts);
    const std::string query = a.has("--query") ? a.str("--query", "") : a.str("-q", "");
    if (!a.has("--query") && !a.has("-q")) return usage_error("rerank: -q QUERY is required");
    if (a.positional.empty()) return usage_error("rerank: at least one DOCUMENT is expected");
    ember_model *model = nullptr;
    int rc = 0;
    ember_embedder *e = make_embedder(a, &model, &rc);
    if (!e) {
        ember_model_free(model);
        return rc;
    }
    const size_t n = a.positional.size();
    std::vector<const char *> docs(n);
    for (size_t i = 0; i < n; ++i) docs[i] = a.positional[i].c_str();
    std::vector<float> scores(n);
    const ember_status s = ember_rerank(e, query.c_str(), docs.data(), n, scores.data());
    if (s == EMBER_OK) {
        std::printf("{\"scores\": [");
        for (size_t i = 0; i < n; ++i) {
            if (i) std::printf(", ");
            print_float(scores[i]);
        }
        std::printf("]}\n");
    }
    ember_embedder_free(e);
    ember_model_free(model);
    return s == EMBER_OK ? 0 : fail("rerank", s);
}

} // namespace cli
