// request_framer.hpp — where one HTTP/1.1 request ends in the bytes a connection has sent so far.
//
// The connection loop (connection_loop.hpp) reads every request whole before a worker thread sees it,
// so it must know where a request ends without parsing it: the request line, the headers up to their
// blank line, then a body framed as httplib frames it (Transfer-Encoding: chunked, else
// Content-Length, else none). httplib then parses the same bytes on the worker. Where the two could
// disagree (a malformed request), the worker reads the request's bytes and no more: httplib answers
// 400 or fails to read, and the connection is closed; no thread waits on a client.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace server {

class RequestFramer {
public:
    struct Limits {
        size_t max_header_bytes = 64 * 1024;   // request line and headers together
        uint64_t max_body = 1u << 20;          // body bytes (chunked: data bytes; framing counts too, see .cpp)
    };
    enum class State {
        incomplete,          // more bytes are needed
        complete,            // the request is the first end() bytes
        headers_too_large,   // no blank line within max_header_bytes
        body_too_large,      // Content-Length or the chunked data over max_body (the headers are complete)
        malformed,           // chunked framing httplib would refuse too (end(): what was looked at)
    };

    explicit RequestFramer(Limits limits) : limits_(limits) {}

    // Starts on a new request at the beginning of the buffer.
    void reset();
    // Looks at the request at the start of `in` (everything received so far; earlier calls saw a prefix
    // of it). Once the headers are complete, an `Expect: 100-continue` line is removed from `in` (the
    // loop answers it: see wants_continue) so that httplib does not answer it a second time.
    State scan(std::string &in);

    bool headers_done() const { return headers_end_ != 0; }
    // The headers asked for "100 Continue" before the body, and the body is not refused already.
    bool wants_continue() const { return wants_continue_; }
    // Bytes of the request (complete), or looked at so far (for a request handed over incomplete).
    size_t end() const { return pos_; }

private:
    State scan_headers(std::string &in);
    State scan_chunked(const std::string &in);

    Limits limits_;
    size_t pos_ = 0;            // next byte to look at
    size_t headers_end_ = 0;    // offset after the blank line (0: not found yet)
    enum class Body { none, length, chunked } body_ = Body::none;
    uint64_t body_length_ = 0;  // Content-Length
    bool wants_continue_ = false;
    // Chunked body: where the parser stands, the data bytes so far and the current chunk's remainder.
    enum class Chunk { size_line, data, data_end, trailer } chunk_ = Chunk::size_line;
    uint64_t chunk_left_ = 0;
    uint64_t chunk_data_ = 0;
};

} // namespace server
