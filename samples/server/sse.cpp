// sse.cpp — the event stream of one generation. The provider is called by httplib in a loop until it
// calls sink.done(); each call waits briefly for text (Generation::next), so the loop never spins.
#include "sse.hpp"

#include <chrono>

namespace server {

std::string sse_event(const json &data) {
    return "data: " + data.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

namespace {
const char kDone[] = "data: [DONE]\n\n";
// A comment line, ignored by clients, written when nothing else was for this long (a request waiting
// for a free slot): it keeps proxies from timing the connection out and reveals a client that left.
constexpr std::chrono::seconds kKeepAlive{5};
constexpr std::chrono::milliseconds kPoll{20};

const char *finish_reason(Ending e) { return e == Ending::length ? "length" : "stop"; }

struct StreamState {
    std::shared_ptr<Generation> g;
    ResponseMeta meta;
    bool include_usage;
    std::shared_ptr<ReplyParser> parser;   // may be null: the text goes out as it is
    bool first = true;
    std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();
};
} // namespace

void stream_generation(httplib::Response &res, std::shared_ptr<Generation> g, const ResponseMeta &meta,
                       bool include_usage, std::unique_ptr<ReplyParser> parser) {
    auto st = std::make_shared<StreamState>(StreamState{std::move(g), meta, include_usage, std::move(parser)});
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [st](size_t, httplib::DataSink &sink) {
            std::string piece;
            const Ending e = st->g->next(&piece, kPoll);
            std::string out;
            if (st->first && st->meta.endpoint == Endpoint::chat)  // the role first, as OpenAI does
                out += sse_event(completion_chunk(st->meta, "", nullptr, true));
            if (st->parser) {
                ReplyParser::Delta d = st->parser->feed(piece);
                if (e != Ending::running && e != Ending::failed && e != Ending::cancelled) {
                    ReplyParser::Delta rest = st->parser->finish();
                    d.content += rest.content;
                    d.reasoning += rest.reasoning;
                    if (d.calls.empty()) d.first_call = rest.first_call;
                    d.calls.insert(d.calls.end(), rest.calls.begin(), rest.calls.end());
                }
                if (!d.content.empty() || !d.reasoning.empty() || !d.calls.empty()) out += sse_event(reply_chunk(st->meta, d));
            } else if (!piece.empty()) {
                out += sse_event(completion_chunk(st->meta, piece, nullptr, st->first && out.empty()));
            }
            if (!out.empty()) st->first = false;
            if (e == Ending::failed || e == Ending::cancelled) {
                // Headers are gone already: the error travels as an event, as OpenAI streams do.
                ApiError err = e == Ending::failed ? st->g->failure() : ApiError{503, "the request was cancelled "
                                                                                      "(the server is shutting down)",
                                                                                 "server_error", "cancelled"};
                out += sse_event(json::parse(error_body(err)));
                out += kDone;
            } else if (e != Ending::running) {
                const bool calls = st->parser && st->parser->made_calls() && e == Ending::stop;
                out += sse_event(completion_chunk(st->meta, "", calls ? "tool_calls" : finish_reason(e), st->first));
                if (st->include_usage) out += sse_event(usage_chunk(st->meta, st->g->usage()));
                out += kDone;
            }
            const auto now = std::chrono::steady_clock::now();
            if (out.empty() && now - st->last_write >= kKeepAlive) out = ": keep-alive\n\n";
            if (!out.empty()) {
                if (!sink.write(out.data(), out.size())) {
                    st->g->cancel();  // the client went away
                    return false;
                }
                st->last_write = now;
            }
            if (e != Ending::running) sink.done();
            return true;
        },
        [st](bool success) {
            if (!success) st->g->cancel();
        });
}

} // namespace server
