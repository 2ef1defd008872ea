// connection_loop.hpp — reads every request whole on one thread, and hands only complete requests to
// the HTTP worker threads.
//
// With the reading on the workers, each connection held a thread from its first byte to its request's
// end, so more slow clients than threads (a header byte every few seconds) made every other client wait
// up to the header timeout. Here one thread watches all connections (epoll on Linux, poll elsewhere),
// reads what each has sent without blocking, finds where its request ends (request_framer.hpp) within
// the header and body deadlines, and only then queues it for a worker. A worker holds a connection only
// while it answers a request; the connection then comes back to the loop for the next one (keep-alive),
// or is shut down and drained before it is closed (so that the client reads the whole answer).
//
// It is the TaskQueue of httplib's accept loop (HttpServer makes it): httplib hands each accepted socket
// to enqueue(), whose task calls HttpServer::process_and_close_socket, which calls add(). shutdown()
// (httplib's, once the listening socket is closed) stops reading, lets the workers finish the requests
// they are answering, and closes every connection.
#pragma once

#include "request_framer.hpp"

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace server {

using Clock = std::chrono::steady_clock;

// One request as a worker sees it: its bytes (framed by the loop) to read, the socket to answer on.
// Reads never block: past the request's bytes they return 0. Writes wait for the socket to drain up to
// the write timeout per call.
class RequestStream : public httplib::Stream {
public:
    RequestStream(int fd, const std::string &in, size_t end, std::chrono::milliseconds write_timeout)
        : fd_(fd), in_(in), end_(end), write_timeout_(write_timeout) {}

    bool is_readable() const override { return pos_ < end_; }
    bool is_writable() const override;
    ssize_t read(char *ptr, size_t size) override;
    ssize_t write(const char *ptr, size_t size) override;
    void get_remote_ip_and_port(std::string &ip, int &port) const override;
    void get_local_ip_and_port(std::string &ip, int &port) const override;
    socket_t socket() const override { return fd_; }

    // The client closed its end (or the connection failed). Never blocks.
    bool gone() const;

    bool body_too_large = false;    // the loop refused the body at the limit: what is here is cut short
    bool close_requested = false;   // close after this response (set by the handler)
    bool failed = false;            // a write failed

private:
    int fd_;
    const std::string &in_;
    size_t end_, pos_ = 0;
    std::chrono::milliseconds write_timeout_;
};

class ConnectionLoop : public httplib::TaskQueue {
public:
    struct Settings {
        std::chrono::milliseconds header_timeout{10000};   // request line and headers, from the first byte
        std::chrono::milliseconds body_timeout{30000};     // the body, from the end of the headers
        std::chrono::milliseconds idle_timeout{5000};      // a kept-alive connection's next request to start
        std::chrono::milliseconds write_timeout{5000};     // each write of an answer
        size_t keep_alive_max = 5;                         // requests per connection
        RequestFramer::Limits framing;
        size_t max_connections = 512;                      // more are answered `busy_response` and closed
        size_t workers = 8;
        std::string busy_response;                         // a whole HTTP response (503)
    };
    // Answers one request on a worker thread; `last`: the connection's last request (Connection: close).
    // Returns whether the connection may carry another request.
    using Handler = std::function<bool(RequestStream &, bool last)>;

    ConnectionLoop(Settings settings, Handler handler);
    ~ConnectionLoop() override;

    // httplib's TaskQueue: enqueue runs the accept loop's task at once (it only calls add()); shutdown
    // stops everything (above).
    void enqueue(std::function<void()> fn) override { fn(); }
    void shutdown() override;

    // A newly accepted socket; the loop owns it from here (closes it too when over max_connections).
    void add(int fd);

    struct Connection;

private:
    class Poller;
    // The loop thread's:
    void run_loop();
    void take_handed_back();
    void read_from(Connection &c);
    void frame(int fd);
    void expire(Clock::time_point now);
    void watch(std::unique_ptr<Connection> c);
    std::unique_ptr<Connection> unwatch(int fd);
    void close_connection(std::unique_ptr<Connection> c);
    void to_worker(std::unique_ptr<Connection> c);
    // A worker's:
    void run_worker();
    void wake();

    Settings settings_;
    Handler handler_;
    std::unique_ptr<Poller> poller_;
    int wake_pipe_[2] = {-1, -1};

    // The loop thread's connections, by socket (only the loop thread touches these).
    std::vector<std::unique_ptr<Connection>> watched_;   // indexed by fd

    std::mutex mutex_;
    std::condition_variable work_cv_;
    std::deque<std::unique_ptr<Connection>> ready_;      // complete requests for the workers
    std::vector<std::unique_ptr<Connection>> handed_back_;   // new sockets, and connections workers are done with
    bool stopping_ = false;
    size_t open_ = 0;                                    // connections open (all of the above)

    std::thread loop_thread_;
    std::vector<std::thread> workers_;
};

} // namespace server
