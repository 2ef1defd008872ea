// http_routes.hpp — the HTTP surface: which paths exist, which methods they take, and how errors look.
#pragma once

#include "generation.hpp"
#include "http_server.hpp"

#include <httplib.h>

namespace server {

// Registers /v1/models, /v1/chat/completions and /v1/completions on `svr`, with OpenAI-style JSON
// errors for everything else: 404 unknown path, 405 wrong method, 413 body too large (decompressed),
// 400 bad request, 503 with Retry-After when the server holds as many generations as it takes.
void add_routes(HttpServer &svr, ServerContext &ctx, size_t max_body, bool verbose);

} // namespace server
