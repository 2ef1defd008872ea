// http_server.hpp — httplib's server with the limits a public endpoint needs on each connection.
//
// httplib (0.11) bounds each read by a timeout, not a whole request: a client sending a header byte
// every few seconds holds a worker thread for ever, and 16 such connections left no thread for anyone
// else. This server reads each connection through its own stream, which gives the request line and
// headers `header_timeout` in all (from the request's first byte) and the body `body_timeout` (from
// the end of the headers, when the route's handler starts reading it), and closes the connection when
// either passes. It also lets a handler ask whether its client is still there (a non-streaming
// completion whose client hung up is cancelled) and close the connection after its response (a body
// refused part way).
#pragma once

#include <httplib.h>

#include <chrono>

namespace server {

class HttpServer : public httplib::Server {
public:
    struct Limits {
        std::chrono::milliseconds header_timeout{10000};
        std::chrono::milliseconds body_timeout{30000};
    };
    explicit HttpServer(Limits limits) : limits_(limits) {}

    // For a handler, about the connection of the request it is handling (on the calling thread):
    // starts the body's time limit (call it before reading the body).
    static void body_starts();
    // Whether the client has closed its end (or the connection failed). Never blocks.
    static bool client_gone();
    // Closes the connection after this response instead of keeping it alive for another request.
    static void close_after_response();

private:
    bool process_and_close_socket(socket_t sock) override;
    Limits limits_;
};

} // namespace server
