// openai_json.hpp — the OpenAI wire format: request parsing and validation, response and chunk
// building, error bodies. Nothing here knows about HTTP or the engine.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace server {

using json = nlohmann::json;

// An error as OpenAI clients expect it: {"error": {"message", "type", "code"}} with an HTTP status.
struct ApiError {
    int http_status = 400;
    std::string message;
    std::string type = "invalid_request_error";
    std::string code;  // machine-readable; "" is sent as null
};
std::string error_body(const ApiError &e);
// A 400 for a body that is wrong, naming what (code: OpenAI's "invalid_value", "invalid_type", ...).
ApiError bad_request(std::string message, std::string code = "invalid_value");

enum class Endpoint { chat, completion };

// A call in an assistant message, or one the model made: arguments as JSON text.
struct ToolCallText {
    std::string id, name, arguments;
};

struct ChatMessageText {
    std::string role;
    std::string content;
    // What tool use adds (tool_calls.cpp reads them): an assistant's calls and reasoning, a tool
    // result's tool_call_id and name.
    std::vector<ToolCallText> tool_calls;
    std::optional<std::string> reasoning_content, tool_call_id, name;
};

// `tools` ({"type": "function", "function": {name, description, parameters}}), `tool_choice` and
// `parallel_tool_calls` of a chat request.
struct ToolSpec {
    std::string name, description, parameters;   // parameters: JSON Schema text ("" when absent)
};
struct ToolRequest {
    std::vector<ToolSpec> tools;
    std::string choice = "auto";   // "auto", "none", "required", or "named" (then `name`)
    std::string name;
    bool parallel = true;
};

// A /v1/chat/completions or /v1/completions request, validated. Unknown fields are ignored.
struct CompletionRequest {
    Endpoint endpoint = Endpoint::completion;
    std::vector<ChatMessageText> messages;  // chat
    std::string prompt;                     // completion, as text
    std::vector<int32_t> prompt_tokens;     // completion, given as token ids (then prompt is unused)
    bool prompt_is_tokens = false;
    std::optional<uint32_t> max_tokens;     // absent: chat until end of generation, completions 16
    float temperature = 1.0f;
    float top_p = 1.0f;
    int32_t top_k = 0;
    std::optional<uint64_t> seed;
    std::vector<std::string> stop;
    // response_format: "" (text), or a JSON Schema the output must follow ({"type":"object"} for
    // json_object; json_schema's "schema").
    std::string json_schema;
    // logprobs: chat `logprobs: true` (+ `top_logprobs` 0-20), completions `logprobs: N` (0-5).
    bool logprobs = false;
    int32_t top_logprobs = 0;
    bool stream = false;
    bool include_usage = false;             // stream_options.include_usage: a last chunk with usage
    ToolRequest tools;                      // chat: tools the model may call
};

// How deeply a request body's arrays and objects may nest (a JSON Schema in response_format included;
// the library allows a schema 128 levels). Deeper bodies are refused before they are parsed.
constexpr size_t kMaxJsonDepth = 256;
// The deepest nesting of arrays and objects in JSON text (strings skipped), in one pass without
// recursion; text that is not JSON gives some number and fails to parse afterwards.
size_t json_nesting_depth(std::string_view text);

// Parses and validates a request body. Returns an ApiError (400) naming the field on failure.
std::optional<ApiError> parse_completion_request(std::string_view body, Endpoint endpoint, CompletionRequest *out);

struct Usage {
    size_t prompt_tokens = 0;
    size_t completion_tokens = 0;
};

// The identity every response and chunk of one request shares.
struct ResponseMeta {
    Endpoint endpoint;
    std::string id;       // "chatcmpl-..." or "cmpl-..."
    int64_t created = 0;  // Unix seconds
    std::string model;
};
ResponseMeta make_response_meta(Endpoint endpoint, const std::string &model);

// One generated token's log-probabilities, for `logprobs` in a response.
struct TokenLogprobs {
    std::string token;   // its text (bytes as the tokenizer gives them)
    float logprob = 0;
    std::vector<std::pair<std::string, float>> top;
};

// The whole non-streaming response. `logprobs` (may be NULL) fills choices[0].logprobs in the chat
// ({"content": [...]}) or completions ({"tokens", "token_logprobs", "top_logprobs"}) format.
json completion_response(const ResponseMeta &m, const std::string &text, const char *finish_reason, const Usage &u,
                         const std::vector<TokenLogprobs> *logprobs = nullptr);
// One streaming chunk. For chat, the first chunk carries the role (first == true); finish_reason NULL
// gives null (more to come).
json completion_chunk(const ResponseMeta &m, const std::string &text, const char *finish_reason, bool first);
// The last chunk of a stream that asked for usage: no choices, the usage.
json usage_chunk(const ResponseMeta &m, const Usage &u);

// GET /v1/models.
json models_response(const std::string &model_id, int64_t created);

} // namespace server
