// sse.hpp — streaming responses as server-sent events (`data: {chunk}\n\n` ... `data: [DONE]\n\n`),
// written by httplib's chunked content provider on the HTTP worker that owns the request.
#pragma once

#include "generation.hpp"
#include "openai_json.hpp"
#include "tool_calls.hpp"

#include <httplib.h>

#include <memory>
#include <string>

namespace server {

// One event carrying a JSON value.
std::string sse_event(const json &data);

// Makes `res` stream g's output as OpenAI chunks. A client that goes away cancels the request. With a
// parser, the chunks carry its deltas: content, reasoning_content, tool_calls (each call whole).
void stream_generation(httplib::Response &res, std::shared_ptr<Generation> g, const ResponseMeta &meta,
                       bool include_usage, std::unique_ptr<ReplyParser> parser = nullptr);

} // namespace server
