// request_framer.cpp — request framing as httplib (0.11) reads it: the blank line that ends the headers
// is "\r\n" (a line ending in a bare "\n" is skipped, not an end), header names match case-insensitively
// and the first of a repeated header counts, Content-Length is read with strtoull and chunk sizes with
// strtoul (base 16), and a chunked body ends with a zero-size chunk and trailer lines up to "\r\n".
#include "request_framer.hpp"

#include <algorithm>
#include <cstdlib>
#include <strings.h>
#include <string_view>

namespace server {

namespace {

// A chunk-size or trailer line longer than this is malformed (httplib's own line limit is 8 KiB).
constexpr size_t kMaxChunkLine = 8192;

bool equals_ci(std::string_view a, std::string_view b) {
    return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

} // namespace

void RequestFramer::reset() { *this = RequestFramer(limits_); }

RequestFramer::State RequestFramer::scan(std::string &in) {
    if (!headers_done()) {
        const State s = scan_headers(in);
        if (!headers_done() || s != State::incomplete) return s;
    }
    switch (body_) {
    case Body::none:
        pos_ = headers_end_;
        return State::complete;
    case Body::length:
        if (in.size() - headers_end_ >= body_length_) {
            pos_ = headers_end_ + static_cast<size_t>(body_length_);
            return State::complete;
        }
        pos_ = in.size();
        return State::incomplete;
    case Body::chunked:
        return scan_chunked(in);
    }
    return State::malformed;
}

// Finds the blank line; once found, reads the three headers framing needs. Returns incomplete (with
// headers_done() once the headers are in), or a final state.
RequestFramer::State RequestFramer::scan_headers(std::string &in) {
    const size_t line_end = in.find('\n');
    if (line_end == std::string::npos)
        return in.size() > limits_.max_header_bytes ? (pos_ = in.size(), State::headers_too_large) : State::incomplete;
    // httplib answers a request line not ending in CRLF with 400 at once: hand it over as it is.
    if (line_end == 0 || in[line_end - 1] != '\r') {
        pos_ = headers_end_ = line_end + 1;
        return State::complete;
    }
    // The blank line: "\r\n" right after a line's "\n" (the request line's included). pos_ remembers how
    // far earlier calls looked.
    const size_t from = std::max(line_end, pos_ >= 2 ? pos_ - 2 : 0);
    const size_t blank = in.find("\n\r\n", from);
    if (blank == std::string::npos || blank + 3 > limits_.max_header_bytes) {
        pos_ = in.size();
        return in.size() > limits_.max_header_bytes ? State::headers_too_large : State::incomplete;
    }
    headers_end_ = blank + 3;

    std::string transfer_encoding, content_length;
    bool has_te = false, has_cl = false;
    size_t expect_begin = 0, expect_len = 0;
    for (size_t b = line_end + 1; b < blank + 1;) {
        const size_t e = in.find('\n', b);   // within the headers: the blank line's "\n" at most
        const size_t next = e + 1;
        if (e == b || in[e - 1] != '\r') {   // a line without CR: httplib skips it
            b = next;
            continue;
        }
        const std::string_view line(in.data() + b, e - 1 - b);
        b = next;
        const size_t colon = line.find(':');
        if (colon == std::string_view::npos) continue;
        const std::string_view name = line.substr(0, colon);
        std::string_view value = line.substr(colon + 1);
        while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
        if (value.empty()) continue;   // httplib drops a header with no value
        if (!has_te && equals_ci(name, "Transfer-Encoding")) has_te = true, transfer_encoding = value;
        else if (!has_cl && equals_ci(name, "Content-Length")) has_cl = true, content_length = value;
        else if (!expect_len && equals_ci(name, "Expect") && value == "100-continue")
            expect_begin = static_cast<size_t>(line.data() - in.data()), expect_len = next - expect_begin;
    }

    bool too_large = false;
    if (has_te && equals_ci(transfer_encoding, "chunked")) {
        body_ = Body::chunked;
    } else if (has_cl) {
        body_ = Body::length;
        body_length_ = std::strtoull(content_length.c_str(), nullptr, 10);
        too_large = body_length_ > limits_.max_body;
    }
    if (expect_len) {
        in.erase(expect_begin, expect_len);
        headers_end_ -= expect_len;
        wants_continue_ = body_ != Body::none && !too_large;
    }
    pos_ = headers_end_;
    return too_large ? State::body_too_large : State::incomplete;
}

RequestFramer::State RequestFramer::scan_chunked(const std::string &in) {
    // Framing counts too (64 KiB of it beyond the data limit), so that one-byte chunks or long chunk
    // extensions cannot make a connection buffer several times the limit.
    const uint64_t max_raw = limits_.max_body + 65536;
    for (;;) {
        if (pos_ - headers_end_ > max_raw) return State::body_too_large;
        switch (chunk_) {
        case Chunk::size_line:
        case Chunk::trailer: {
            const size_t nl = in.find('\n', pos_);
            if (nl == std::string::npos)
                return in.size() - pos_ > kMaxChunkLine ? State::malformed : State::incomplete;
            if (nl - pos_ > kMaxChunkLine) return State::malformed;
            const std::string line = in.substr(pos_, nl + 1 - pos_);
            pos_ = nl + 1;
            if (chunk_ == Chunk::trailer) {
                if (line == "\r\n") return State::complete;
                continue;
            }
            char *end = nullptr;
            const unsigned long size = std::strtoul(line.c_str(), &end, 16);
            if (end == line.c_str() || size == static_cast<unsigned long>(-1)) return State::malformed;
            if (size == 0) {
                chunk_ = Chunk::trailer;
                continue;
            }
            if (size > limits_.max_body - std::min<uint64_t>(chunk_data_, limits_.max_body))
                return State::body_too_large;
            chunk_data_ += size;
            chunk_left_ = size;
            chunk_ = Chunk::data;
            continue;
        }
        case Chunk::data: {
            const uint64_t take = std::min<uint64_t>(chunk_left_, in.size() - pos_);
            pos_ += static_cast<size_t>(take);
            chunk_left_ -= take;
            if (chunk_left_) return State::incomplete;
            chunk_ = Chunk::data_end;
            continue;
        }
        case Chunk::data_end:
            if (in.size() - pos_ < 2) return State::incomplete;
            if (in[pos_] != '\r' || in[pos_ + 1] != '\n') return State::malformed;
            pos_ += 2;
            chunk_ = Chunk::size_line;
            continue;
        }
    }
}

} // namespace server
