// server_options.hpp — the command line of ember-server.
#pragma once

#include <ember/ember.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace server {

struct Options {
    std::string model_path;
    std::string host = "127.0.0.1";   // loopback unless asked otherwise: the server has no authentication
    int port = 8080;                  // 0: an ephemeral port, printed once listening
    uint32_t n_parallel = 8;          // engine n_seq_max: requests decoded together
    uint32_t n_ctx = 0;               // 0: the model's trained context, capped at 4096 (the engine's default)
    uint32_t n_threads = 0;           // 0: the engine's default (physical cores, at most 8)
    ember_backend_kind backend = EMBER_BACKEND_AUTO;
    size_t max_body = 1u << 20;       // request bodies above this get 413
    uint32_t http_threads = 0;        // 0: max_pending + 8 (threads left for other routes and slow clients)
    uint32_t max_pending = 0;         // 0: 2 * n_parallel; generations held at once, more get 503
    uint32_t max_connections = 512;   // open at once (reading, answered or idle); more get 503
    uint32_t header_timeout_ms = 10000;   // request line and headers, from their first byte
    uint32_t body_timeout_ms = 30000;     // the body, from the end of the headers
    std::string model_id;             // the name /v1/models reports (default: the file name without .gguf)
    bool verbose = false;             // log each request on stderr
    std::string chat_template;        // --chat-template-file: used instead of the model's ("" = the model's)
    ember_spec_mode speculation = EMBER_SPEC_OFF;   // --mtp or --lookup: every request drafts (the engine's)
    uint32_t spec_k = 4;                            // --draft-k
};

// Parses argv into *out. On a bad or missing option writes a message to stderr and returns false;
// `-h`/`--help` prints the usage and sets *exit_now.
bool parse_options(int argc, char **argv, Options *out, bool *exit_now);

} // namespace server
