// test_request_framer.cpp — where a request ends (RequestFramer), for requests given whole and byte by
// byte: no body, Content-Length, chunked with extensions and trailers, pipelined requests, the limits,
// malformed framing, lines httplib skips, and the Expect: 100-continue line taken out.
#include "../request_framer.hpp"

#include <cstdio>
#include <string>
#include <vector>

namespace {

using server::RequestFramer;
using State = RequestFramer::State;

int g_failures = 0;

const char *name(State s) {
    switch (s) {
    case State::incomplete: return "incomplete";
    case State::complete: return "complete";
    case State::headers_too_large: return "headers_too_large";
    case State::body_too_large: return "body_too_large";
    case State::malformed: return "malformed";
    }
    return "?";
}

struct Case {
    const char *what;
    std::string bytes;
    State expect;
    size_t end;               // bytes of the request (complete), or where the framer stopped
    bool wants_continue = false;
    std::string after = "";   // the buffer's first `end` bytes after the scan, when it changes them
};

// Scans `c.bytes` given whole, then byte by byte (as a slow client sends it): both must agree.
void check(const Case &c, RequestFramer::Limits limits) {
    for (int bytewise = 0; bytewise < 2; ++bytewise) {
        RequestFramer f(limits);
        std::string in;
        State s = State::incomplete;
        if (bytewise) {
            for (size_t i = 0; i < c.bytes.size() && s == State::incomplete; ++i) {
                in += c.bytes[i];
                s = f.scan(in);
            }
        } else {
            in = c.bytes;
            s = f.scan(in);
        }
        // (Where headers are found too large depends on how much had come: their end is not compared.)
        const bool ok = s == c.expect && (s == State::incomplete || s == State::headers_too_large || f.end() == c.end) &&
                        f.wants_continue() == c.wants_continue &&
                        (c.after.empty() || in.compare(0, c.after.size(), c.after) == 0);
        if (!ok) {
            ++g_failures;
            std::fprintf(stderr, "FAIL %s (%s): %s end %zu continue %d, expected %s end %zu continue %d; buffer '%s'\n",
                         c.what, bytewise ? "byte by byte" : "whole", name(s), f.end(), f.wants_continue(), name(c.expect),
                         c.end, c.wants_continue, in.c_str());
        }
    }
}

} // namespace

int main() {
    RequestFramer::Limits limits;
    limits.max_header_bytes = 256;
    limits.max_body = 100;
    const std::string get = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    const std::string post5 = "POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello";
    const std::string chunked_head = "POST / HTTP/1.1\r\ntransfer-encoding: Chunked\r\n\r\n";
    const std::vector<Case> cases = {
        {"no body", get, State::complete, get.size()},
        {"pipelined: the first request only", get + get, State::complete, get.size()},
        {"Content-Length", post5 + "GET", State::complete, post5.size()},
        {"Content-Length, body not all here", post5.substr(0, post5.size() - 1), State::incomplete, 0},
        {"Content-Length 0", "POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n", State::complete, 38},
        {"Content-Length over the limit: refused with the headers", "POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\nab",
         State::body_too_large, 40},
        {"Content-Length: the first of two counts", "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 9\r\n\r\nab",
         State::complete, 58},
        {"header names are case-insensitive", "POST / HTTP/1.1\r\ncontent-LENGTH:  2\r\n\r\nab", State::complete, 41},
        {"chunked, with an extension and a trailer",
         chunked_head + "5;name=x\r\nhello\r\n3\r\nabc\r\n0\r\nTrailer: y\r\n\r\nGET", State::complete,
         chunked_head.size() + 42},
        {"chunked, its data over the limit as soon as a size says so", chunked_head + "65\r\n", State::body_too_large,
         chunked_head.size() + 4},
        {"chunked, a size line that is no number", chunked_head + "zz\r\n", State::malformed, chunked_head.size() + 4},
        {"chunked, data not followed by CRLF", chunked_head + "2\r\nabX\r\n", State::malformed, chunked_head.size() + 5},
        {"chunked wins over Content-Length", "POST / HTTP/1.1\r\nContent-Length: 50\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
         State::complete, 72},
        {"a Transfer-Encoding other than chunked: Content-Length frames", "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\nContent-Length: 1\r\n\r\nab",
         State::complete, 64},
        {"a header line without CR is skipped, not an end", "GET / HTTP/1.1\r\nX: y\n\nHost: x\r\n\r\n", State::complete, 33},
        {"a request line without CR: handed over at once (httplib answers 400)", "GET / HTTP/1.1\nHost: x\r\n\r\n",
         State::complete, 15},
        {"headers over the limit", "GET / HTTP/1.1\r\nX: " + std::string(300, 'a'), State::headers_too_large, 319},
        {"Expect: 100-continue taken out, the body awaited",
         "POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n", State::incomplete, 0, true,
         "POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\n"},
        {"Expect: 100-continue with the body already here", "POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nab",
         State::complete, 40, true, "POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\nab"},
        {"Expect: 100-continue on a body over the limit: no 100", "POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 500\r\n\r\n",
         State::body_too_large, 40, false},
    };
    for (const Case &c : cases) check(c, limits);

    // A raw chunked body is bounded even when its data is not: one-byte chunks with long extensions.
    {
        RequestFramer::Limits big = limits;
        big.max_body = 100000;
        RequestFramer f(big);
        std::string in = chunked_head;
        State s = State::incomplete;
        for (int i = 0; i < 10000 && s == State::incomplete; ++i) {
            in += "0000000000000000000001;" + std::string(40, 'e') + "\r\nx\r\n";
            s = f.scan(in);
        }
        if (s != State::body_too_large || in.size() > chunked_head.size() + big.max_body + 65536 + 100) {
            ++g_failures;
            std::fprintf(stderr, "FAIL: framing-heavy chunked body: %s after %zu bytes\n", name(s), in.size());
        }
    }
    std::printf("%zu cases: %s\n", cases.size(), g_failures ? "FAILED" : "passed");
    return g_failures ? 1 : 0;
}
