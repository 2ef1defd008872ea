// embeddings.cpp — the embedding server's routes and loop (embeddings.hpp).
#include "embeddings.hpp"

#include "http_server.hpp"
#include "openai_json.hpp"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <numeric>
#include <thread>

namespace server {

namespace {

void send_error(httplib::Response &res, int status, const std::string &message) {
    ApiError e;
    e.http_status = status;
    e.message = message;
    if (status >= 500) e.type = "server_error";
    res.status = status;
    res.set_content(error_body(e), "application/json");
}

// The strings of a field that is a string or an array of strings; false (after the 400) otherwise.
bool strings(const json &body, const char *field, std::vector<std::string> *out, httplib::Response &res) {
    const auto it = body.find(field);
    if (it != body.end() && it->is_string()) {
        out->push_back(it->get<std::string>());
        return true;
    }
    if (it != body.end() && it->is_array() && !it->empty()) {
        for (const json &s : *it) {
            if (!s.is_string()) break;
            out->push_back(s.get<std::string>());
        }
        if (out->size() == it->size()) return true;
    }
    send_error(res, 400, std::string("'") + field + "' must be a string or a non-empty array of strings");
    return false;
}

bool parse(const httplib::Request &req, json *body, httplib::Response &res) {
    *body = json::parse(req.body, nullptr, false);
    if (body->is_discarded() || !body->is_object()) {
        send_error(res, 400, "the request body is not a JSON object");
        return false;
    }
    return true;
}

size_t count_tokens(const ember_model *m, const std::string &text) {
    size_t n = 0;
    ember_tokenize(m, text.data(), text.size(), EMBER_TOKENIZE_ADD_SPECIAL, nullptr, 0, &n);
    return n;
}

// The pooling of a request on a generating model: its "pooling" field ("mean", the default, or "last");
// an embedding model's own otherwise. false (after the 400) for another value.
bool request_pooling(const EmbeddingService &s, const json &body, ember_pooling *out, httplib::Response &res) {
    *out = s.generating ? EMBER_POOLING_MEAN : EMBER_POOLING_MODEL;
    const auto it = body.find("pooling");
    if (it == body.end()) return true;
    if (it->is_string() && it->get<std::string>() == "mean") return *out = EMBER_POOLING_MEAN, true;
    if (it->is_string() && it->get<std::string>() == "last") return *out = EMBER_POOLING_LAST, true;
    if (it->is_string() && it->get<std::string>() == "cls" && !s.generating) return *out = EMBER_POOLING_CLS, true;
    send_error(res, 400, s.generating ? "'pooling' must be \"mean\" or \"last\"" : "'pooling' must be \"mean\", \"cls\" or \"last\"");
    return false;
}

void embeddings(EmbeddingService &s, const httplib::Request &req, httplib::Response &res) {
    json body;
    std::vector<std::string> input;
    if (!parse(req, &body, res) || !strings(body, "input", &input, res)) return;
    if (!s.engine) return send_error(res, 400, "this model ranks documents: use /v1/rerank");
    ember_embed_request_params p;
    ember_embed_request_params_init(&p);
    if (!request_pooling(s, body, &p.pooling, res)) return;
    if (body.contains("dimensions")) {
        // Cut to the dimensions asked for, then L2-normalised (OpenAI's); the engine checks the upper bound.
        const json &d = body["dimensions"];
        if (!d.is_number_integer() || d.get<int64_t>() < 1 || d.get<uint64_t>() > UINT32_MAX)
            return send_error(res, 400, "'dimensions' must be a positive integer");
        p.dimensions = d.get<uint32_t>();
    }
    std::vector<const char *> texts;
    std::vector<size_t> lengths;
    for (const std::string &t : input) texts.push_back(t.data()), lengths.push_back(t.size());
    p.texts = texts.data();
    p.lengths = lengths.data();
    p.n_texts = texts.size();
    ember_request *r = nullptr;
    if (ember_engine_submit_embed(s.engine, &p, &r) != EMBER_OK) return send_error(res, 400, ember_last_error());
    // The engine batches these texts with the other clients' work; a client that hangs up cancels them.
    while (ember_request_wait(r, 100) == EMBER_STOPPED)
        if (HttpServer::client_gone()) ember_request_cancel(r);
    std::vector<float> out(input.size() * ember_request_embedding_dim(r));
    size_t n = 0;
    const ember_status st = ember_request_embeddings(r, out.data(), out.size(), &n);
    if (st != EMBER_OK) {
        ember_status why = st;
        const char *message = nullptr;
        ember_request_error(r, &why, &message);
        const std::string text = message && *message ? message : "the request was cancelled";
        ember_request_free(r);
        if (HttpServer::client_gone()) return HttpServer::close_after_response();
        return send_error(res, why == EMBER_ERR_OUT_OF_MEMORY ? 503 : 500, text);
    }
    const size_t dim = ember_request_embedding_dim(r);
    ember_request_free(r);
    size_t tokens = 0;
    for (const std::string &t : input) tokens += count_tokens(s.model, t);
    json data = json::array();
    for (size_t i = 0; i < input.size(); ++i) {
        const std::vector<float> v(out.begin() + i * dim, out.begin() + (i + 1) * dim);
        data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", v}});
    }
    json r_json = {{"object", "list"}, {"data", data}, {"model", s.model_id},
                   {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
    res.set_content(r_json.dump(), "application/json");
}

void rerank(EmbeddingService &s, const httplib::Request &req, httplib::Response &res) {
    json body;
    std::vector<std::string> docs;
    if (!parse(req, &body, res)) return;
    if (!body.contains("query") || !body["query"].is_string()) return send_error(res, 400, "'query' must be a string");
    if (!strings(body, "documents", &docs, res)) return;
    if (!s.reranker) return send_error(res, 400, "this model embeds texts (/v1/embeddings); it has no ranking head");
    size_t top_n = docs.size();
    if (body.contains("top_n")) {
        if (!body["top_n"].is_number_integer() || body["top_n"].get<int64_t>() < 1)
            return send_error(res, 400, "'top_n' must be a positive integer");
        top_n = std::min(top_n, body["top_n"].get<size_t>());
    }
    const std::string query = body["query"].get<std::string>();
    std::vector<const char *> ptrs;
    for (const std::string &d : docs) ptrs.push_back(d.c_str());
    std::vector<float> scores(docs.size());
    {
        std::lock_guard<std::mutex> lock(s.rerank_mutex);
        if (ember_rerank(s.reranker, query.c_str(), ptrs.data(), ptrs.size(), scores.data()) != EMBER_OK)
            return send_error(res, 400, ember_last_error());
    }
    std::vector<size_t> order(docs.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
    json results = json::array();
    for (size_t i = 0; i < top_n; ++i) results.push_back({{"index", order[i]}, {"relevance_score", scores[order[i]]}});
    res.set_content(json({{"model", s.model_id}, {"results", results}}).dump(), "application/json");
}

} // namespace

void add_embedding_route(HttpServer &svr, EmbeddingService &s) {
    svr.Post("/v1/embeddings", [&s](const httplib::Request &req, httplib::Response &res) { embeddings(s, req, res); });
}

int serve_embeddings(const Options &opt, EmbeddingService &s, const sigset_t *sigs) {
    HttpServer::Limits limits;
    limits.header_timeout = std::chrono::milliseconds(opt.header_timeout_ms);
    limits.body_timeout = std::chrono::milliseconds(opt.body_timeout_ms);
    limits.max_body = opt.max_body;
    limits.threads = opt.http_threads ? opt.http_threads : 8;
    limits.max_connections = opt.max_connections;
    HttpServer svr(limits);
    svr.set_payload_max_length(opt.max_body);
    svr.Get("/v1/models", [&s](const httplib::Request &, httplib::Response &res) {
        res.set_content(json({{"object", "list"}, {"data", {{{"id", s.model_id}, {"object", "model"}, {"owned_by", "ember"}}}}}).dump(),
                        "application/json");
    });
    add_embedding_route(svr, s);
    svr.Post("/v1/rerank", [&s](const httplib::Request &req, httplib::Response &res) { rerank(s, req, res); });
    const int port = svr.bind(opt.host, opt.port);
    if (port <= 0) {
        std::fprintf(stderr, "ember-server: cannot listen on %s:%d\n", opt.host.c_str(), opt.port);
        return 1;
    }
    // Signals as main.cpp takes them: one thread waits for them and stops the listener.
    std::atomic<bool> done{false};
    std::thread watcher([&] {
        const timespec tick{0, 100 * 1000 * 1000};
        bool stopping = false;
        while (!done.load()) {
            if (!stopping && sigtimedwait(sigs, nullptr, &tick) > 0) stopping = true;
            if (stopping) svr.stop(), nanosleep(&tick, nullptr);
        }
    });
    std::fprintf(stderr, "ember-server: model %s, %s\n", opt.model_id.c_str(),
                 s.reranker ? "reranking" : "embeddings batched by an engine");
    std::printf("listening on http://%s:%d\n", opt.host.c_str(), port);
    std::fflush(stdout);
    bool ok = false;
    try {
        ok = svr.listen_after_bind();
    } catch (const std::exception &e) {
        std::fprintf(stderr, "ember-server: %s\n", e.what());
    }
    done = true;
    watcher.join();
    return ok ? 0 : 1;
}

} // namespace server
