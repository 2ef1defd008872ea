// embeddings.cpp — the embedding server's routes and loop (embeddings.hpp).
#include "embeddings.hpp"

#include "http_server.hpp"
#include "openai_json.hpp"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <numeric>
#include <thread>

namespace server {

namespace {

struct Service {
    ember_model *model;
    ember_embedder *embedder;
    std::string model_id;
    std::mutex mutex;   // one request at a time uses the embedder
};

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

void embeddings(Service &s, const httplib::Request &req, httplib::Response &res) {
    json body;
    std::vector<std::string> input;
    if (!parse(req, &body, res) || !strings(body, "input", &input, res)) return;
    if (ember_embedder_is_reranker(s.embedder)) return send_error(res, 400, "this model ranks documents: use /v1/rerank");
    const size_t dim = ember_embedder_dim(s.embedder);
    size_t keep = dim;
    if (body.contains("dimensions")) {
        const json &d = body["dimensions"];
        if (!d.is_number_integer() || d.get<int64_t>() < 1 || d.get<uint64_t>() > dim)
            return send_error(res, 400, "'dimensions' must be an integer from 1 to " + std::to_string(dim));
        keep = d.get<size_t>();
    }
    std::vector<const char *> texts;
    std::vector<size_t> lengths;
    for (const std::string &t : input) texts.push_back(t.data()), lengths.push_back(t.size());
    std::vector<float> out(input.size() * dim);
    size_t tokens = 0;
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        if (ember_embed(s.embedder, texts.data(), lengths.data(), texts.size(), out.data(), out.size()) != EMBER_OK)
            return send_error(res, 400, ember_last_error());
    }
    for (const std::string &t : input) tokens += count_tokens(s.model, t);
    json data = json::array();
    for (size_t i = 0; i < input.size(); ++i) {
        // The vectors come unnormalised: cut to the dimensions asked for, then L2-normalised (OpenAI's).
        const float *v = out.data() + i * dim;
        double ss = 0;
        for (size_t k = 0; k < keep; ++k) ss += double(v[k]) * v[k];
        const double scale = ss > 0 ? 1.0 / std::sqrt(ss) : 1.0;
        std::vector<float> e(keep);
        for (size_t k = 0; k < keep; ++k) e[k] = static_cast<float>(v[k] * scale);
        data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", e}});
    }
    json r = {{"object", "list"}, {"data", data}, {"model", s.model_id},
              {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
    res.set_content(r.dump(), "application/json");
}

void rerank(Service &s, const httplib::Request &req, httplib::Response &res) {
    json body;
    std::vector<std::string> docs;
    if (!parse(req, &body, res)) return;
    if (!body.contains("query") || !body["query"].is_string()) return send_error(res, 400, "'query' must be a string");
    if (!strings(body, "documents", &docs, res)) return;
    if (!ember_embedder_is_reranker(s.embedder))
        return send_error(res, 400, "this model embeds texts (/v1/embeddings); it has no ranking head");
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
        std::lock_guard<std::mutex> lock(s.mutex);
        if (ember_rerank(s.embedder, query.c_str(), ptrs.data(), ptrs.size(), scores.data()) != EMBER_OK)
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

int serve_embeddings(const Options &opt, ember_model *model, ember_embedder *embedder, const sigset_t *sigs) {
    Service s{model, embedder, opt.model_id, {}};
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
    svr.Post("/v1/embeddings", [&s](const httplib::Request &req, httplib::Response &res) { embeddings(s, req, res); });
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
    std::fprintf(stderr, "ember-server: model %s, %s, %zu floats per vector\n", opt.model_id.c_str(),
                 ember_embedder_is_reranker(embedder) ? "reranking" : "embeddings", ember_embedder_dim(embedder));
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
