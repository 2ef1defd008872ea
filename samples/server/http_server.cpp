// http_server.cpp — HttpServer on the connection loop: httplib accepts, the loop reads, httplib's
// request parser and the routes run on the loop's workers.
#include "http_server.hpp"

#include "connection_loop.hpp"
#include "openai_json.hpp"

#include <sys/socket.h>
#include <unistd.h>

namespace server {

namespace {

// The request this thread is answering.
thread_local RequestStream *t_current = nullptr;

std::string busy_response() {
    ApiError e;
    e.http_status = 503;
    e.type = "server_error";
    e.code = "server_busy";
    e.message = "the server has as many connections open as it takes (--max-connections); try again";
    const std::string body = error_body(e);
    return "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

} // namespace

HttpServer::HttpServer(Limits limits) : limits_(limits) {
    // httplib's listen asks for its task queue once it listens, after every setting is made.
    new_task_queue = [this] {
        ConnectionLoop::Settings s;
        s.header_timeout = limits_.header_timeout;
        s.body_timeout = limits_.body_timeout;
        s.idle_timeout = std::chrono::seconds(keep_alive_timeout_sec_);
        s.write_timeout = std::chrono::milliseconds(write_timeout_sec_ * 1000 + write_timeout_usec_ / 1000);
        s.keep_alive_max = keep_alive_max_count_;
        s.framing.max_body = limits_.max_body;
        s.max_connections = limits_.max_connections;
        s.workers = limits_.threads;
        s.busy_response = busy_response();
        loop_ = new ConnectionLoop(std::move(s), [this](RequestStream &strm, bool last) { return serve(strm, last); });
        return loop_;
    };
}

int HttpServer::bind(const std::string &host, int port) {
    const int bound = port == 0 ? bind_to_any_port(host) : (bind_to_port(host, port) ? port : -1);
    // httplib listens with a backlog of 5: a burst of connections beyond it waits for SYN retries (1 s,
    // 3 s, ...) though the loop accepts at once. A second listen() sets a new backlog.
    if (bound > 0) ::listen(svr_sock_, SOMAXCONN);
    return bound;
}

bool HttpServer::process_and_close_socket(socket_t sock) {
    // Called by the accept loop's task (ConnectionLoop::enqueue runs it at once): the loop takes the socket.
    if (loop_) loop_->add(sock);
    else ::close(sock);
    return true;
}

bool HttpServer::serve(RequestStream &strm, bool last) {
    t_current = &strm;
    bool connection_closed = false;
    const bool ok = process_request(strm, last, connection_closed, nullptr);
    t_current = nullptr;
    return ok && !connection_closed && svr_sock_ != INVALID_SOCKET;
}

bool HttpServer::client_gone() { return t_current && t_current->gone(); }

bool HttpServer::body_too_large() { return t_current && t_current->body_too_large; }

void HttpServer::close_after_response() {
    if (t_current) t_current->close_requested = true;
}

} // namespace server
