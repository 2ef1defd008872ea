// http_server.hpp — httplib's server with the limits a public endpoint needs on each connection.
//
// httplib (0.11) reads each connection on a worker thread, bounding each read by a timeout but not a
// whole request: a client sending a header byte every few seconds held a thread for ever, and more such
// clients than threads left none for anyone else. This server lets httplib accept connections, but
// reads them in one event loop (connection_loop.hpp): the request line and headers get
// `header_timeout` in all (from the request's first byte), the body `body_timeout` (from the end of the
// headers), bodies over `max_body` are cut off where they pass it, and only a request read whole (or
// refused part way) takes a worker thread, which httplib's parser and the routes then run on. A handler
// can ask whether its client is still there (a non-streaming completion whose client hung up is
// cancelled), whether its body was cut off at the limit, and have the connection closed after its
// response.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace server {

class ConnectionLoop;
class RequestStream;

class HttpServer : public httplib::Server {
public:
    struct Limits {
        std::chrono::milliseconds header_timeout{10000};
        std::chrono::milliseconds body_timeout{30000};
        uint64_t max_body = 1u << 20;     // raw body bytes read for a request (the routes count decompressed ones)
        size_t threads = 8;               // workers answering requests
        size_t max_connections = 512;     // open at once; more get 503 and are closed
    };
    explicit HttpServer(Limits limits);

    // Binds to host:port (0: any free port) with a listen backlog of SOMAXCONN; returns the port, or -1.
    int bind(const std::string &host, int port);

    // For a handler, about the connection of the request it is handling (on the calling thread):
    // whether the client has closed its end (or the connection failed). Never blocks.
    static bool client_gone();
    // Whether the request's body was cut off at max_body (what the handler reads of it ends early).
    static bool body_too_large();
    // Closes the connection after this response instead of keeping it alive for another request.
    static void close_after_response();

private:
    bool process_and_close_socket(socket_t sock) override;
    bool serve(RequestStream &strm, bool last);

    Limits limits_;
    ConnectionLoop *loop_ = nullptr;   // made by httplib's listen through new_task_queue, owned by it
};

} // namespace server
