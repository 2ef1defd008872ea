// http_routes.cpp — request handlers. Every handler runs on one of httplib's worker threads; all of
// them submit into the one engine, which batches whatever is running at each step.
#include "http_routes.hpp"

#include "openai_json.hpp"
#include "sse.hpp"
#include "tool_calls.hpp"

#include <cstdio>
#include <string>

namespace server {

namespace {
void send_error(httplib::Response &res, const ApiError &e) {
    res.status = e.http_status;
    res.set_content(error_body(e), "application/json");
}

ApiError status_error(int status, std::string message, const char *code) {
    ApiError e;
    e.http_status = status;
    e.message = std::move(message);
    e.code = code;
    if (status >= 500) e.type = "server_error";
    return e;
}

void send_json(httplib::Response &res, const json &j) {
    res.set_content(j.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

// Reads the request body through `reader`, decompressed (gzip, deflate, brotli), chunked or not, up to
// max_body bytes as it arrives: a body over the limit is refused as soon as it passes it, whatever its
// Content-Length said or its compression hid (a 16 KB gzip body inflating to 16 MiB took 46 s and
// 700 MiB before). The connection loop has read the body already (its raw bytes up to the same limit:
// beyond it, what is here ends early and HttpServer::body_too_large says so). A refused body is not read
// to its end, so the connection closes after the answer.
bool read_body(const httplib::Request &req, const httplib::ContentReader &reader, size_t max_body, std::string *body,
               httplib::Response &res) {
    auto refuse = [&](int status, std::string message, const char *code) {
        HttpServer::close_after_response();
        send_error(res, status_error(status, std::move(message), code));
        return false;
    };
    const std::string too_large = "the request body is larger than the server's limit of " + std::to_string(max_body) +
                                  " bytes (--max-body; decompressed size)";
    if (req.has_header("Content-Length") && req.get_header_value<uint64_t>("Content-Length") > max_body)
        return refuse(413, too_large, "payload_too_large");
    bool over = false;
    const bool ok = reader([&](const char *data, size_t len) {
        if (len > max_body - body->size()) return over = true, false;
        body->append(data, len);
        return true;
    });
    if (over || (!ok && HttpServer::body_too_large())) return refuse(413, too_large, "payload_too_large");
    if (!ok) {
        if (res.status == 415) return refuse(415, "unsupported Content-Encoding", "unsupported_media_type");
        return refuse(400, "the request body could not be read: malformed, or not sent within the server's time limit "
                           "(--body-timeout)", "http_error");
    }
    return true;
}

void handle_completion(ServerContext &ctx, Endpoint endpoint, const httplib::Request &req, httplib::Response &res,
                       const httplib::ContentReader &reader, size_t max_body) {
    std::string body;
    if (!read_body(req, reader, max_body, &body, res)) return;
    CompletionRequest creq;
    if (auto e = parse_completion_request(body, endpoint, &creq)) return send_error(res, *e);
    ApiError err;
    std::shared_ptr<Generation> g = Generation::start(ctx, creq, &err);
    if (!g) {
        if (err.http_status == 503 && err.code == "server_busy") res.set_header("Retry-After", "1");
        return send_error(res, err);
    }
    const ResponseMeta meta = make_response_meta(endpoint, ctx.model_id());
    // A reply with tools (or reasoning) is parsed into content, reasoning_content and tool_calls.
    std::unique_ptr<ReplyParser> parser = ReplyParser::make(ctx.model(), creq, ctx.chat_template(), g->tool_prefix());
    if (creq.stream) return stream_generation(res, std::move(g), meta, creq.include_usage, std::move(parser));

    // A client that hangs up while it waits has its request cancelled (its slot goes to the next one).
    std::string text;
    const Ending ending = g->wait_all(&text, &HttpServer::client_gone);
    if (ending == Ending::cancelled && HttpServer::client_gone()) return HttpServer::close_after_response();
    if (ending == Ending::failed) return send_error(res, g->failure());
    if (ending == Ending::cancelled)
        return send_error(res, status_error(503, "the request was cancelled: the server is shutting down", "cancelled"));
    const std::vector<TokenLogprobs> lps = g->logprobs();
    json response = completion_response(meta, text, ending == Ending::length ? "length" : "stop", g->usage(),
                                        g->wants_logprobs() ? &lps : nullptr);
    if (parser) {
        ReplyParser::Delta reply = parser->feed(text);
        ReplyParser::Delta rest = parser->finish();
        reply.content += rest.content;
        reply.reasoning += rest.reasoning;
        reply.calls.insert(reply.calls.end(), rest.calls.begin(), rest.calls.end());
        put_reply(&response, reply, parser->made_calls());
    }
    send_json(res, response);
}

struct Route {
    const char *path;
    const char *method;
};
const Route kRoutes[] = {
    {"/v1/models", "GET"},
    {"/v1/chat/completions", "POST"},
    {"/v1/completions", "POST"},
};
} // namespace

void add_routes(HttpServer &svr, ServerContext &ctx, size_t max_body, bool verbose) {
    svr.set_payload_max_length(max_body);   // bodies of other routes (read by httplib itself)

    svr.Get("/v1/models", [&ctx](const httplib::Request &, httplib::Response &res) {
        send_json(res, models_response(ctx.model_id(), ctx.created()));
    });
    // With a content reader: the handler reads the body itself, counting it (read_body).
    svr.Post("/v1/chat/completions",
             [&ctx, max_body](const httplib::Request &req, httplib::Response &res, const httplib::ContentReader &reader) {
                 handle_completion(ctx, Endpoint::chat, req, res, reader, max_body);
             });
    svr.Post("/v1/completions",
             [&ctx, max_body](const httplib::Request &req, httplib::Response &res, const httplib::ContentReader &reader) {
                 handle_completion(ctx, Endpoint::completion, req, res, reader, max_body);
             });

    // A known path with another method: 405 before the body is read. (httplib would answer 404.)
    svr.set_pre_routing_handler([](const httplib::Request &req, httplib::Response &res) {
        for (const Route &r : kRoutes)
            if (req.path == r.path && req.method != r.method && !(req.method == "HEAD" && std::string(r.method) == "GET")) {
                res.set_header("Allow", r.method);
                send_error(res, status_error(405, "method " + req.method + " is not allowed on " + req.path +
                                                      " (use " + r.method + ")", "method_not_allowed"));
                return httplib::Server::HandlerResponse::Handled;
            }
        return httplib::Server::HandlerResponse::Unhandled;
    });

    // Errors httplib produces itself (unknown path, oversized or unreadable body) get a JSON body too;
    // responses a handler already filled are left alone.
    svr.set_error_handler(httplib::Server::HandlerWithResponse([max_body](const httplib::Request &req, httplib::Response &res) {
        if (!res.body.empty() || res.is_chunked_content_provider_) return httplib::Server::HandlerResponse::Unhandled;
        ApiError e;
        switch (res.status) {
        case 404: e = status_error(404, "no such endpoint: " + req.method + " " + req.path, "not_found"); break;
        case 413:
            e = status_error(413, "the request body is larger than the server's limit of " + std::to_string(max_body) +
                                      " bytes (--max-body)", "payload_too_large");
            break;
        default:
            e = status_error(res.status, res.status == 400 ? "malformed HTTP request" : "HTTP error " + std::to_string(res.status),
                             "http_error");
        }
        send_error(res, e);
        return httplib::Server::HandlerResponse::Handled;
    }));

    svr.set_exception_handler([](const httplib::Request &, httplib::Response &res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
            std::rethrow_exception(ep);
        } catch (const std::exception &ex) {
            what = ex.what();
        } catch (...) {
        }
        send_error(res, status_error(500, "internal error: " + what, "internal_error"));
    });

    if (verbose)
        svr.set_logger([](const httplib::Request &req, const httplib::Response &res) {
            std::fprintf(stderr, "ember-server: %s %s -> %d\n", req.method.c_str(), req.path.c_str(), res.status);
        });
}

} // namespace server
