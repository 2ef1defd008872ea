// connection_loop.cpp — the reading thread, the worker threads, and the hand-over between them.
//
// A connection is owned by one thread at a time: the loop thread while it reads (in watched_), a worker
// while it answers (taken from ready_), and whichever of them holds it closes it. Hand-overs go through
// the two queues under mutex_, so no connection state is shared between threads.
#include "connection_loop.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#if defined(__linux__) && !defined(EMBER_SERVER_USE_POLL)
#include <sys/epoll.h>
#endif

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <system_error>

namespace server {

namespace {

constexpr size_t kReadChunk = 16384;
// A connection closed after its answer is read and discarded for this long (or this much) first, so
// that unread input does not make the close a reset that could destroy the answer in flight.
constexpr std::chrono::milliseconds kLinger{2000};
constexpr size_t kMaxLingerBytes = 1u << 20;
// Deadlines are checked this often (and no wait is longer): their precision.
constexpr int kTickMs = 50;

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

bool would_block(int e) { return e == EAGAIN || e == EWOULDBLOCK || e == EINTR; }

void send_best_effort(int fd, const std::string &bytes) {
    (void)!::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

} // namespace

// ---- RequestStream ------------------------------------------------------------------------------------

bool RequestStream::is_writable() const {
    pollfd p{fd_, POLLOUT, 0};
    int r;
    do r = ::poll(&p, 1, static_cast<int>(write_timeout_.count()));
    while (r < 0 && errno == EINTR);
    return r > 0;
}

ssize_t RequestStream::read(char *ptr, size_t size) {
    const size_t k = std::min(size, end_ - pos_);
    std::memcpy(ptr, in_.data() + pos_, k);
    pos_ += k;
    return static_cast<ssize_t>(k);
}

ssize_t RequestStream::write(const char *ptr, size_t size) {
    for (;;) {
        const ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
        if (n >= 0) return n;
        if (errno == EINTR) continue;
        // The socket is non-blocking (the loop reads it so): wait for room, up to the write timeout.
        if (!would_block(errno) || !is_writable()) {
            failed = true;
            return -1;
        }
    }
}

bool RequestStream::gone() const {
    if (failed) return true;
    char c;
    const ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && !would_block(errno));
}

void RequestStream::get_remote_ip_and_port(std::string &ip, int &port) const {
    sockaddr_storage a{};
    socklen_t l = sizeof a;
    if (::getpeername(fd_, reinterpret_cast<sockaddr *>(&a), &l) == 0) ip_and_port(a, ip, port);
}

void RequestStream::get_local_ip_and_port(std::string &ip, int &port) const {
    sockaddr_storage a{};
    socklen_t l = sizeof a;
    if (::getsockname(fd_, reinterpret_cast<sockaddr *>(&a), &l) == 0) ip_and_port(a, ip, port);
}

// ---- Poller: which sockets have input -----------------------------------------------------------------

#if defined(__linux__) && !defined(EMBER_SERVER_USE_POLL)
class ConnectionLoop::Poller {
public:
    Poller() : ep_(epoll_create1(EPOLL_CLOEXEC)) {
        if (ep_ < 0) throw std::system_error(errno, std::generic_category(), "epoll_create1");
    }
    ~Poller() { ::close(ep_); }
    void add(int fd) {
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.fd = fd;
        epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev);
    }
    void remove(int fd) { epoll_ctl(ep_, EPOLL_CTL_DEL, fd, nullptr); }
    void wait(std::vector<int> *ready, int timeout_ms) {
        epoll_event evs[256];
        const int n = epoll_wait(ep_, evs, 256, timeout_ms);
        ready->clear();
        for (int i = 0; i < n; ++i) ready->push_back(evs[i].data.fd);
    }

private:
    int ep_;
};
#else
// poll(2): linear in the connections per wait, which a sample server can afford.
class ConnectionLoop::Poller {
public:
    void add(int fd) { fds_.push_back(pollfd{fd, POLLIN, 0}); }
    void remove(int fd) {
        auto it = std::find_if(fds_.begin(), fds_.end(), [fd](const pollfd &p) { return p.fd == fd; });
        if (it != fds_.end()) fds_.erase(it);
    }
    void wait(std::vector<int> *ready, int timeout_ms) {
        ready->clear();
        if (::poll(fds_.data(), fds_.size(), timeout_ms) <= 0) return;
        for (const pollfd &p : fds_)
            if (p.revents) ready->push_back(p.fd);
    }

private:
    std::vector<pollfd> fds_;
};
#endif

// ---- connections ---------------------------------------------------------------------------------------

struct ConnectionLoop::Connection {
    Connection(int fd_, const RequestFramer::Limits &limits) : fd(fd_), framer(limits) {}
    int fd;
    std::string in;   // received and not yet answered: the request being read, and any pipelined after it
    RequestFramer framer;
    enum class Phase { fresh, idle, headers, body, handed_back, draining } phase = Phase::fresh;
    Clock::time_point deadline;
    size_t served = 0;          // requests answered
    size_t request_end = 0;     // bytes of the request handed to a worker
    size_t drained = 0;         // bytes discarded while draining
    bool cut_short = false;     // handed over before its end (refused, malformed, timed out): close after
    bool body_too_large = false;
    bool keep = false;          // the worker's verdict: another request may follow
};

ConnectionLoop::ConnectionLoop(Settings settings, Handler handler)
    : settings_(std::move(settings)), handler_(std::move(handler)), poller_(std::make_unique<Poller>()) {
    if (::pipe(wake_pipe_) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
    for (int fd : wake_pipe_) {
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
        ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
    poller_->add(wake_pipe_[0]);
    loop_thread_ = std::thread(&ConnectionLoop::run_loop, this);
    for (size_t i = 0; i < std::max<size_t>(settings_.workers, 1); ++i) workers_.emplace_back(&ConnectionLoop::run_worker, this);
}

ConnectionLoop::~ConnectionLoop() {
    shutdown();
    ::close(wake_pipe_[0]);
    ::close(wake_pipe_[1]);
}

void ConnectionLoop::wake() { (void)!::write(wake_pipe_[1], "", 1); }

void ConnectionLoop::add(int fd) {
    bool refuse = false;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stopping_ || open_ >= settings_.max_connections) refuse = true;
        else ++open_;
        if (!refuse) handed_back_.push_back(std::make_unique<Connection>(fd, settings_.framing));
    }
    if (refuse) {
        send_best_effort(fd, settings_.busy_response);
        ::close(fd);
        return;
    }
    wake();
}

void ConnectionLoop::shutdown() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stopping_ && !loop_thread_.joinable()) return;
        stopping_ = true;
    }
    work_cv_.notify_all();
    wake();
    if (loop_thread_.joinable()) loop_thread_.join();
    for (std::thread &t : workers_) t.join();
    workers_.clear();
    // What the workers handed back after the loop ended, and requests no worker started.
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto &c : handed_back_) ::close(c->fd);
    handed_back_.clear();
    for (auto &c : ready_) ::close(c->fd);
    ready_.clear();
}

// ---- the loop thread -----------------------------------------------------------------------------------

void ConnectionLoop::run_loop() {
    std::vector<int> ready;
    Clock::time_point next_expiry = Clock::now();
    for (;;) {
        take_handed_back();
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (stopping_) break;
        }
        poller_->wait(&ready, kTickMs);
        for (int fd : ready) {
            if (fd == wake_pipe_[0]) {
                char buf[256];
                while (::read(fd, buf, sizeof buf) > 0) {}
                continue;
            }
            if (static_cast<size_t>(fd) < watched_.size() && watched_[fd]) read_from(*watched_[fd]);
        }
        const Clock::time_point now = Clock::now();
        if (now >= next_expiry) {
            expire(now);
            next_expiry = now + std::chrono::milliseconds(kTickMs);
        }
    }
    for (auto &c : watched_)
        if (c) close_connection(std::move(c));
}

// New sockets and connections the workers are done with: watched again (or shut down and drained).
void ConnectionLoop::take_handed_back() {
    std::vector<std::unique_ptr<Connection>> back;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        back.swap(handed_back_);
    }
    const Clock::time_point now = Clock::now();
    for (auto &c : back) {
        if (c->phase == Connection::Phase::fresh) {
            ::fcntl(c->fd, F_SETFL, ::fcntl(c->fd, F_GETFL) | O_NONBLOCK);
            c->phase = Connection::Phase::idle;
            c->deadline = now + settings_.idle_timeout;   // the first request must start as a kept-alive one
            watch(std::move(c));
            continue;
        }
        if (!c->keep) {
            // The answer is written: end our side, and read what the client still sends until it closes.
            ::shutdown(c->fd, SHUT_WR);
            c->phase = Connection::Phase::draining;
            c->deadline = now + kLinger;
            watch(std::move(c));
            continue;
        }
        c->framer.reset();
        c->cut_short = c->body_too_large = false;
        c->phase = Connection::Phase::idle;
        c->deadline = now + settings_.idle_timeout;
        if (c->in.empty()) {
            watch(std::move(c));
            continue;
        }
        c->phase = Connection::Phase::headers;   // a pipelined request is here already
        c->deadline = now + settings_.header_timeout;
        const int fd = c->fd;
        watch(std::move(c));
        frame(fd);
    }
}

void ConnectionLoop::watch(std::unique_ptr<Connection> c) {
    const int fd = c->fd;
    if (watched_.size() <= static_cast<size_t>(fd)) watched_.resize(static_cast<size_t>(fd) + 1);
    watched_[fd] = std::move(c);
    poller_->add(fd);
}

std::unique_ptr<ConnectionLoop::Connection> ConnectionLoop::unwatch(int fd) {
    poller_->remove(fd);
    return std::move(watched_[fd]);
}

void ConnectionLoop::close_connection(std::unique_ptr<Connection> c) {
    poller_->remove(c->fd);
    ::close(c->fd);
    std::lock_guard<std::mutex> lock(mutex_);
    --open_;
}

void ConnectionLoop::read_from(Connection &c) {
    const int fd = c.fd;
    char buf[kReadChunk];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && would_block(errno)) return;
    if (c.phase == Connection::Phase::draining) {
        c.drained += n > 0 ? static_cast<size_t>(n) : 0;
        if (n <= 0 || c.drained > kMaxLingerBytes) close_connection(unwatch(fd));
        return;
    }
    if (n <= 0) return close_connection(unwatch(fd));   // the client left (before its request was whole)
    c.in.append(buf, static_cast<size_t>(n));
    if (c.phase == Connection::Phase::idle) {
        c.phase = Connection::Phase::headers;
        c.deadline = Clock::now() + settings_.header_timeout;
    }
    frame(fd);
}

// Where the request being read stands; a whole one (or one refused part way) goes to a worker.
void ConnectionLoop::frame(int fd) {
    Connection &c = *watched_[fd];
    const RequestFramer::State s = c.framer.scan(c.in);
    if (c.phase == Connection::Phase::headers && c.framer.headers_done()) {
        c.phase = Connection::Phase::body;
        c.deadline = Clock::now() + settings_.body_timeout;
        if (c.framer.wants_continue() && s == RequestFramer::State::incomplete)
            send_best_effort(fd, "HTTP/1.1 100 Continue\r\n\r\n");
    }
    switch (s) {
    case RequestFramer::State::incomplete:
        return;
    case RequestFramer::State::complete:
        break;
    case RequestFramer::State::body_too_large:
        c.body_too_large = true;
        c.cut_short = true;
        break;
    case RequestFramer::State::headers_too_large:
    case RequestFramer::State::malformed:
        c.cut_short = true;
        break;
    }
    c.request_end = c.framer.end();
    to_worker(unwatch(fd));
}

void ConnectionLoop::to_worker(std::unique_ptr<Connection> c) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        ready_.push_back(std::move(c));
    }
    work_cv_.notify_one();
}

void ConnectionLoop::expire(Clock::time_point now) {
    for (auto &slot : watched_) {
        if (!slot || now < slot->deadline) continue;
        Connection &c = *slot;
        if (c.phase == Connection::Phase::body) {
            // The body did not come in time: the worker answers from what did (the route says why).
            c.cut_short = true;
            c.request_end = c.in.size();
            to_worker(unwatch(c.fd));
        } else {
            // Idle, headers not whole in time (no answer: there is no request to answer), or drained enough.
            close_connection(unwatch(c.fd));
        }
    }
}

// ---- the workers ---------------------------------------------------------------------------------------

void ConnectionLoop::run_worker() {
    for (;;) {
        std::unique_ptr<Connection> c;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            work_cv_.wait(lock, [&] { return stopping_ || !ready_.empty(); });
            if (stopping_) return;
            c = std::move(ready_.front());
            ready_.pop_front();
        }
        RequestStream strm(c->fd, c->in, c->request_end, settings_.write_timeout);
        strm.body_too_large = c->body_too_large;
        const bool last = c->cut_short || c->served + 1 >= settings_.keep_alive_max;
        bool keep = false;
        try {
            keep = handler_(strm, last);
        } catch (...) {
            // httplib turns a handler's exceptions into 500s; this is anything else (memory): close.
        }
        c->keep = keep && !last && !strm.close_requested && !strm.failed;
        ++c->served;
        c->in.erase(0, c->request_end);
        c->phase = Connection::Phase::handed_back;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            handed_back_.push_back(std::move(c));
        }
        wake();
    }
}

} // namespace server
