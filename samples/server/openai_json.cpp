// openai_json.cpp — request parsing and response building for the OpenAI API. Validation is explicit
// (each field's type checked before it is read) so that a wrong type is a 400 naming the field, never
// an exception from deep inside the JSON library.
#include "openai_json.hpp"
#include "tool_calls.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

namespace server {

ApiError bad_request(std::string message, std::string code) {
    ApiError e;
    e.http_status = 400;
    e.message = std::move(message);
    e.code = std::move(code);
    return e;
}

namespace {

// Content given as a string, null (an assistant turn with tool calls only), or an array of parts of
// which only {"type": "text"} ones are understood.
std::optional<ApiError> read_content(const json &c, size_t i, std::string *out) {
    const std::string where = "messages[" + std::to_string(i) + "].content";
    if (c.is_null()) return std::nullopt;
    if (c.is_string()) {
        *out = c.get<std::string>();
        return std::nullopt;
    }
    if (!c.is_array()) return bad_request(where + " must be a string or an array of text parts", "invalid_type");
    for (const json &part : c) {
        if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
            !part["text"].is_string())
            return bad_request(where + ": only parts of type \"text\" with a string \"text\" are supported", "invalid_type");
        *out += part["text"].get<std::string>();
    }
    return std::nullopt;
}

std::optional<ApiError> read_number(const json &j, const char *name, double lo, double hi, bool lo_open,
                                    float *out) {
    if (!j.contains(name) || j[name].is_null()) return std::nullopt;
    if (!j[name].is_number()) return bad_request(std::string(name) + " must be a number", "invalid_type");
    const double v = j[name].get<double>();
    if (!std::isfinite(v) || v < lo || (lo_open && v == lo) || v > hi) {
        char msg[160];
        std::snprintf(msg, sizeof msg, "%s must be in %s%g, %g], not %g", name, lo_open ? "(" : "[", lo, hi, v);
        return bad_request(msg);
    }
    *out = static_cast<float>(v);
    return std::nullopt;
}

std::string random_id(const char *prefix) {
    static std::atomic<uint64_t> counter{0};
    thread_local std::mt19937_64 rng{std::random_device{}()};
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s-%016llx%04llx", prefix, static_cast<unsigned long long>(rng()),
                  static_cast<unsigned long long>(counter++ & 0xffff));
    return buf;
}
} // namespace

std::string error_body(const ApiError &e) {
    json j = {{"error", {{"message", e.message}, {"type", e.type}, {"param", nullptr}}}};
    j["error"]["code"] = e.code.empty() ? json(nullptr) : json(e.code);
    // Invalid UTF-8 in a message (echoing a client's bytes) is replaced rather than thrown on.
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

size_t json_nesting_depth(std::string_view text) {
    size_t depth = 0, deepest = 0;
    bool in_string = false, escaped = false;
    for (const char c : text) {
        if (in_string) {
            if (escaped) escaped = false;
            else if (c == '\\') escaped = true;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            deepest = std::max(deepest, ++depth);
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    return deepest;
}

std::optional<ApiError> parse_completion_request(std::string_view body, Endpoint endpoint, CompletionRequest *out) {
    // Before parsing: the JSON library parses any depth, but writing, comparing or converting a value
    // recurses once per level, and 50,000 levels fit in 100 KB (the stack ran out).
    if (json_nesting_depth(body) > kMaxJsonDepth)
        return bad_request("the request body nests deeper than " + std::to_string(kMaxJsonDepth) + " levels", "invalid_json");
    const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return bad_request("the request body is not valid JSON", "invalid_json");
    if (!j.is_object()) return bad_request("the request body must be a JSON object", "invalid_type");
    CompletionRequest r;
    r.endpoint = endpoint;

    if (endpoint == Endpoint::chat) {
        if (!j.contains("messages")) return bad_request("messages is required", "missing_field");
        const json &msgs = j["messages"];
        if (!msgs.is_array()) return bad_request("messages must be an array", "invalid_type");
        if (msgs.empty()) return bad_request("messages must not be empty");
        for (size_t i = 0; i < msgs.size(); ++i) {
            const json &m = msgs[i];
            if (!m.is_object()) return bad_request("messages[" + std::to_string(i) + "] must be an object", "invalid_type");
            if (!m.contains("role") || !m["role"].is_string())
                return bad_request("messages[" + std::to_string(i) + "].role must be a string", "invalid_type");
            ChatMessageText msg;
            msg.role = m["role"].get<std::string>();
            if (msg.role != "system" && msg.role != "developer" && msg.role != "user" && msg.role != "assistant" &&
                msg.role != "tool")
                return bad_request("messages[" + std::to_string(i) + "].role must be system, developer, user, assistant or tool");
            if (auto e = read_tool_message_fields(m, i, &msg)) return e;
            // A missing or null content is an assistant turn that only called tools; anyone else must say something.
            const bool no_content = !m.contains("content") || m["content"].is_null();
            if (no_content && !(msg.role == "assistant" && !msg.tool_calls.empty()))
                return bad_request("messages[" + std::to_string(i) + "].content is required (it may be null or absent only in an assistant message with tool_calls)",
                           m.contains("content") ? "invalid_type" : "missing_field");
            if (!no_content)
                if (auto e = read_content(m["content"], i, &msg.content)) return e;
            r.messages.push_back(std::move(msg));
        }
        if (auto e = read_tool_request(j, &r.tools)) return e;
    } else {
        if (!j.contains("prompt")) return bad_request("prompt is required", "missing_field");
        const json &p = j["prompt"];
        if (p.is_string()) {
            r.prompt = p.get<std::string>();
        } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
            r.prompt = p[0].get<std::string>();
        } else if (p.is_array() && !p.empty() && p[0].is_number_integer()) {
            r.prompt_is_tokens = true;
            for (const json &t : p) {
                if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > std::numeric_limits<int32_t>::max())
                    return bad_request("prompt given as tokens must be an array of non-negative integers", "invalid_type");
                r.prompt_tokens.push_back(t.get<int32_t>());
            }
        } else {
            return bad_request("prompt must be a string, an array of one string, or an array of token ids "
                       "(batches of prompts are not supported)", "invalid_type");
        }
    }

    for (const char *name : {"max_tokens", "max_completion_tokens"}) {
        if (!j.contains(name) || j[name].is_null()) continue;
        const json &v = j[name];
        if (!v.is_number_integer()) return bad_request(std::string(name) + " must be an integer", "invalid_type");
        if (v.get<int64_t>() < 0) return bad_request(std::string(name) + " must not be negative");
        r.max_tokens = static_cast<uint32_t>(std::min<int64_t>(v.get<int64_t>(), std::numeric_limits<uint32_t>::max()));
    }
    if (auto e = read_number(j, "temperature", 0.0, 100.0, false, &r.temperature)) return e;
    if (auto e = read_number(j, "top_p", 0.0, 1.0, true, &r.top_p)) return e;
    if (j.contains("top_k") && !j["top_k"].is_null()) {
        if (!j["top_k"].is_number_integer()) return bad_request("top_k must be an integer", "invalid_type");
        const int64_t k = j["top_k"].get<int64_t>();
        if (k < 0) return bad_request("top_k must not be negative");
        r.top_k = static_cast<int32_t>(std::min<int64_t>(k, std::numeric_limits<int32_t>::max()));
    }
    if (j.contains("seed") && !j["seed"].is_null()) {
        if (!j["seed"].is_number_integer()) return bad_request("seed must be an integer", "invalid_type");
        r.seed = j["seed"].is_number_unsigned() ? j["seed"].get<uint64_t>()
                                                : static_cast<uint64_t>(j["seed"].get<int64_t>());
    }
    if (j.contains("n") && !j["n"].is_null()) {
        if (!j["n"].is_number_integer()) return bad_request("n must be an integer", "invalid_type");
        if (j["n"].get<int64_t>() != 1) return bad_request("only n = 1 is supported");
    }
    if (j.contains("stop") && !j["stop"].is_null()) {
        const json &s = j["stop"];
        if (s.is_string()) {
            r.stop.push_back(s.get<std::string>());
        } else if (s.is_array()) {
            for (const json &x : s) {
                if (!x.is_string()) return bad_request("stop must be a string or an array of strings", "invalid_type");
                r.stop.push_back(x.get<std::string>());
            }
        } else {
            return bad_request("stop must be a string or an array of strings", "invalid_type");
        }
        std::erase_if(r.stop, [](const std::string &x) { return x.empty(); });  // an empty stop matches nothing
    }
    if (j.contains("response_format") && !j["response_format"].is_null()) {
        const json &rf = j["response_format"];
        if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string())
            return bad_request("response_format must be an object with a type", "invalid_type");
        const std::string type = rf["type"].get<std::string>();
        if (type == "json_object") {
            r.json_schema = R"({"type":"object"})";
        } else if (type == "json_schema") {
            if (!rf.contains("json_schema") || !rf["json_schema"].is_object())
                return bad_request("response_format.json_schema must be an object", "invalid_type");
            const json &js = rf["json_schema"];
            // OpenAI's "schema" may be absent: any JSON value then.
            r.json_schema = js.contains("schema") && !js["schema"].is_null() ? js["schema"].dump() : "{}";
        } else if (type != "text") {
            return bad_request("response_format.type must be text, json_object or json_schema");
        }
    }
    if (j.contains("logprobs") && !j["logprobs"].is_null()) {
        const json &lp = j["logprobs"];
        if (endpoint == Endpoint::chat) {
            if (!lp.is_boolean()) return bad_request("logprobs must be a boolean", "invalid_type");
            r.logprobs = lp.get<bool>();
        } else {
            // completions: an integer, the number of top tokens (0-5)
            if (!lp.is_number_integer() || lp.get<int64_t>() < 0 || lp.get<int64_t>() > 5)
                return bad_request("logprobs must be an integer from 0 to 5", "invalid_type");
            r.logprobs = true;
            r.top_logprobs = static_cast<int32_t>(lp.get<int64_t>());
        }
    }
    if (endpoint == Endpoint::chat && j.contains("top_logprobs") && !j["top_logprobs"].is_null()) {
        const json &t = j["top_logprobs"];
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > 20)
            return bad_request("top_logprobs must be an integer from 0 to 20", "invalid_type");
        if (!r.logprobs) return bad_request("top_logprobs needs logprobs: true");
        r.top_logprobs = static_cast<int32_t>(t.get<int64_t>());
    }
    if (j.contains("stream") && !j["stream"].is_null()) {
        if (!j["stream"].is_boolean()) return bad_request("stream must be a boolean", "invalid_type");
        r.stream = j["stream"].get<bool>();
    }
    if (j.contains("stream_options") && j["stream_options"].is_object()) {
        const json &so = j["stream_options"];
        if (so.contains("include_usage")) {
            if (!so["include_usage"].is_boolean()) return bad_request("stream_options.include_usage must be a boolean", "invalid_type");
            r.include_usage = so["include_usage"].get<bool>();
        }
    }
    if (r.stream && r.logprobs) return bad_request("logprobs are not supported with stream (ask without streaming)", "unsupported");
    *out = std::move(r);
    return std::nullopt;
}

ResponseMeta make_response_meta(Endpoint endpoint, const std::string &model) {
    ResponseMeta m{endpoint, random_id(endpoint == Endpoint::chat ? "chatcmpl" : "cmpl"), 0, model};
    m.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    return m;
}

namespace {
json usage_json(const Usage &u) {
    return {{"prompt_tokens", u.prompt_tokens},
            {"completion_tokens", u.completion_tokens},
            {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}
json base(const ResponseMeta &m, const char *object) {
    return {{"id", m.id}, {"object", object}, {"created", m.created}, {"model", m.model}};
}
json reason(const char *finish_reason) { return finish_reason ? json(finish_reason) : json(nullptr); }
} // namespace

namespace {
json bytes_of(const std::string &s) {
    json b = json::array();
    for (unsigned char c : s) b.push_back(c);
    return b;
}
// A token's text as a JSON string: bytes that are not whole UTF-8 (a character split over tokens)
// would make the response invalid, so they are replaced; "bytes" keeps them exactly.
std::string text_of(const std::string &s) { return json(s).dump(-1, ' ', false, json::error_handler_t::replace); }

json logprobs_json(Endpoint endpoint, const std::vector<TokenLogprobs> &lps) {
    if (endpoint == Endpoint::chat) {
        json content = json::array();
        for (const TokenLogprobs &t : lps) {
            json top = json::array();
            for (const auto &[tok, lp] : t.top)
                top.push_back({{"token", json::parse(text_of(tok))}, {"logprob", lp}, {"bytes", bytes_of(tok)}});
            content.push_back({{"token", json::parse(text_of(t.token))}, {"logprob", t.logprob}, {"bytes", bytes_of(t.token)},
                               {"top_logprobs", top}});
        }
        return {{"content", content}};
    }
    json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array();
    for (const TokenLogprobs &t : lps) {
        tokens.push_back(json::parse(text_of(t.token)));
        token_logprobs.push_back(t.logprob);
        json top = json::object();
        for (const auto &[tok, lp] : t.top) top[json::parse(text_of(tok)).get<std::string>()] = lp;
        top_logprobs.push_back(top);
    }
    return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top_logprobs}};
}
} // namespace

json completion_response(const ResponseMeta &m, const std::string &text, const char *finish_reason, const Usage &u,
                         const std::vector<TokenLogprobs> *logprobs) {
    json j = base(m, m.endpoint == Endpoint::chat ? "chat.completion" : "text_completion");
    json choice = {{"index", 0}, {"finish_reason", reason(finish_reason)}};
    if (m.endpoint == Endpoint::chat) choice["message"] = {{"role", "assistant"}, {"content", text}};
    else choice["text"] = text;
    choice["logprobs"] = logprobs ? logprobs_json(m.endpoint, *logprobs) : json(nullptr);
    j["choices"] = json::array({choice});
    j["usage"] = usage_json(u);
    return j;
}

json completion_chunk(const ResponseMeta &m, const std::string &text, const char *finish_reason, bool first) {
    json j = base(m, m.endpoint == Endpoint::chat ? "chat.completion.chunk" : "text_completion");
    json choice = {{"index", 0}, {"finish_reason", reason(finish_reason)}};
    if (m.endpoint == Endpoint::chat) {
        json delta = json::object();
        if (first) delta["role"] = "assistant";
        if (!text.empty() || (first && !finish_reason)) delta["content"] = text;
        choice["delta"] = delta;
    } else {
        choice["text"] = text;
        choice["logprobs"] = nullptr;
    }
    j["choices"] = json::array({choice});
    return j;
}

json usage_chunk(const ResponseMeta &m, const Usage &u) {
    json j = base(m, m.endpoint == Endpoint::chat ? "chat.completion.chunk" : "text_completion");
    j["choices"] = json::array();
    j["usage"] = usage_json(u);
    return j;
}

json models_response(const std::string &model_id, int64_t created) {
    return {{"object", "list"},
            {"data", json::array({{{"id", model_id}, {"object", "model"}, {"created", created}, {"owned_by", "ember"}}})}};
}

} // namespace server
