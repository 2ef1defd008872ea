// http_server.cpp — the connection loop of HttpServer: keep-alive, whole-request deadlines.
#include "http_server.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace server {

namespace {

using Clock = std::chrono::steady_clock;

// Waits until fd is ready for `events` or `until` passes, or the server stops listening (checked every
// 100 ms, so that a shutdown does not wait for slow clients); true when ready (or in error: the next
// call reports it).
bool wait_ready(int fd, short events, Clock::time_point until, const std::atomic<socket_t> *listening) {
    for (;;) {
        if (listening && *listening == INVALID_SOCKET) return false;
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
        if (left <= 0) return false;
        pollfd p{fd, events, 0};
        const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 100)));
        if (r > 0) return true;
        if (r < 0 && errno != EINTR) return true;
    }
}

void ip_and_port(const sockaddr_storage &a, std::string &ip, int &port) {
    char buf[INET6_ADDRSTRLEN] = "";
    if (a.ss_family == AF_INET) {
        const auto *v4 = reinterpret_cast<const sockaddr_in *>(&a);
        inet_ntop(AF_INET, &v4->sin_addr, buf, sizeof buf);
        port = ntohs(v4->sin_port);
    } else if (a.ss_family == AF_INET6) {
        const auto *v6 = reinterpret_cast<const sockaddr_in6 *>(&a);
        inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof buf);
        port = ntohs(v6->sin6_port);
    }
    ip = buf;
}

// One connection, read with a deadline for the request being read (headers, then body) and written
// with the write timeout per call. Buffered: httplib reads request lines a byte at a time.
class DeadlineStream : public httplib::Stream {
public:
    DeadlineStream(int fd, std::chrono::milliseconds write_timeout, const std::atomic<socket_t> *listening)
        : fd_(fd), write_timeout_(write_timeout), listening_(listening) {}

    void set_deadline(Clock::time_point t) { deadline_ = t; }
    bool gone() const {
        if (failed_) return true;
        char c;
        const ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
    }
    bool close_requested = false;

    bool is_readable() const override { return pos_ < len_ || wait_ready(fd_, POLLIN, deadline_, listening_); }
    // Writes go on while stopping: a response being written (a stream's last events) is finished.
    bool is_writable() const override { return wait_ready(fd_, POLLOUT, Clock::now() + write_timeout_, nullptr); }

    ssize_t read(char *ptr, size_t size) override {
        if (pos_ == len_) {
            if (!wait_ready(fd_, POLLIN, deadline_, listening_)) return failed_ = true, -1;   // too long, or stopping
            ssize_t n;
            do n = ::recv(fd_, buf_, sizeof buf_, 0);
            while (n < 0 && errno == EINTR);
            if (n <= 0) return failed_ = true, n;
            pos_ = 0;
            len_ = static_cast<size_t>(n);
        }
        const size_t k = std::min(size, len_ - pos_);
        std::memcpy(ptr, buf_ + pos_, k);
        pos_ += k;
        return static_cast<ssize_t>(k);
    }

    ssize_t write(const char *ptr, size_t size) override {
        if (!is_writable()) return failed_ = true, -1;
        ssize_t n;
        do n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        if (n < 0) failed_ = true;
        return n;
    }

    void get_remote_ip_and_port(std::string &ip, int &port) const override {
        sockaddr_storage a{};
        socklen_t l = sizeof a;
        if (::getpeername(fd_, reinterpret_cast<sockaddr *>(&a), &l) == 0) ip_and_port(a, ip, port);
    }
    void get_local_ip_and_port(std::string &ip, int &port) const override {
        sockaddr_storage a{};
        socklen_t l = sizeof a;
        if (::getsockname(fd_, reinterpret_cast<sockaddr *>(&a), &l) == 0) ip_and_port(a, ip, port);
    }
    socket_t socket() const override { return fd_; }

    bool buffered() const { return pos_ < len_; }

private:
    int fd_;
    std::chrono::milliseconds write_timeout_;
    const std::atomic<socket_t> *listening_;
    Clock::time_point deadline_ = Clock::now();
    mutable bool failed_ = false;
    char buf_[4096];
    size_t pos_ = 0, len_ = 0;
};

// The connection (and its limits) whose request this thread is handling.
struct Current {
    DeadlineStream *stream = nullptr;
    std::chrono::milliseconds body_timeout{0};
};
thread_local Current t_current;

} // namespace

void HttpServer::body_starts() {
    if (t_current.stream) t_current.stream->set_deadline(Clock::now() + t_current.body_timeout);
}

bool HttpServer::client_gone() { return t_current.stream && t_current.stream->gone(); }

void HttpServer::close_after_response() {
    if (t_current.stream) t_current.stream->close_requested = true;
}

bool HttpServer::process_and_close_socket(socket_t sock) {
    DeadlineStream strm(sock, std::chrono::milliseconds(write_timeout_sec_ * 1000 + write_timeout_usec_ / 1000), &svr_sock_);
    t_current = Current{&strm, limits_.body_timeout};
    bool ret = false;
    // Keep-alive as httplib does it: up to keep_alive_max_count_ requests, each of which must start within
    // keep_alive_timeout_sec_ of the previous one's end.
    for (size_t count = keep_alive_max_count_; count > 0 && svr_sock_ != INVALID_SOCKET; --count) {
        if (!strm.buffered() &&
            !wait_ready(sock, POLLIN, Clock::now() + std::chrono::seconds(keep_alive_timeout_sec_), &svr_sock_))
            break;
        strm.set_deadline(Clock::now() + limits_.header_timeout);
        bool connection_closed = false;
        ret = process_request(strm, count == 1, connection_closed, nullptr);
        if (!ret || connection_closed || strm.close_requested) break;
    }
    t_current = Current{};
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return ret;
}

} // namespace server
