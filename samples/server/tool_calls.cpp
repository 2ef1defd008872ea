// tool_calls.cpp — tools in the OpenAI wire format (tool_calls.hpp).
#include "tool_calls.hpp"

#include <cstring>

namespace server {

namespace {

ApiError library_error(const char *what, ember_status st) {
    ApiError e;
    const bool client = st == EMBER_ERR_INVALID_ARGUMENT || st == EMBER_ERR_UNSUPPORTED;
    e.http_status = client ? 400 : 500;
    e.type = client ? "invalid_request_error" : "server_error";
    e.code = ember_status_string(st);
    e.message = std::string(what) + ": " + ember_last_error();
    return e;
}

std::optional<std::string> optional_string(const json &m, const char *key, const std::string &where, ApiError *err) {
    if (!m.contains(key) || m[key].is_null()) return std::nullopt;
    if (!m[key].is_string()) {
        *err = bad_request(where + "." + key + " must be a string", "invalid_type");
        return std::nullopt;
    }
    return m[key].get<std::string>();
}

// The C view of the request's tools (pointers into `tools`).
std::vector<ember_chat_tool> c_tools(const std::vector<ToolSpec> &tools) {
    std::vector<ember_chat_tool> out;
    for (const ToolSpec &t : tools)
        out.push_back({t.name.c_str(), t.description.empty() ? nullptr : t.description.c_str(),
                       t.parameters.empty() ? nullptr : t.parameters.c_str()});
    return out;
}

json calls_json(const std::vector<ToolCallText> &calls, size_t first_index, bool with_index) {
    json out = json::array();
    for (size_t i = 0; i < calls.size(); ++i) {
        json c = {{"id", calls[i].id}, {"type", "function"},
                  {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
        if (with_index) c["index"] = first_index + i;
        out.push_back(std::move(c));
    }
    return out;
}
} // namespace

std::optional<ApiError> read_tool_message_fields(const json &m, size_t i, ChatMessageText *msg) {
    const std::string where = "messages[" + std::to_string(i) + "]";
    ApiError err;
    msg->reasoning_content = optional_string(m, "reasoning_content", where, &err);
    msg->tool_call_id = optional_string(m, "tool_call_id", where, &err);
    msg->name = optional_string(m, "name", where, &err);
    if (!err.message.empty()) return err;
    if (!m.contains("tool_calls") || m["tool_calls"].is_null()) return std::nullopt;
    const json &calls = m["tool_calls"];
    if (!calls.is_array()) return bad_request(where + ".tool_calls must be an array", "invalid_type");
    for (size_t k = 0; k < calls.size(); ++k) {
        const std::string at = where + ".tool_calls[" + std::to_string(k) + "]";
        const json &c = calls[k];
        if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
            return bad_request(at + " must be an object with a function", "invalid_type");
        const json &f = c["function"];
        if (!f.contains("name") || !f["name"].is_string()) return bad_request(at + ".function.name must be a string", "invalid_type");
        ToolCallText t;
        t.name = f["name"].get<std::string>();
        // OpenAI sends arguments as a JSON string; a client may send the object itself.
        if (f.contains("arguments") && f["arguments"].is_string()) t.arguments = f["arguments"].get<std::string>();
        else if (f.contains("arguments") && f["arguments"].is_object()) t.arguments = f["arguments"].dump();
        else return bad_request(at + ".function.arguments must be a JSON string or object", "invalid_type");
        if (auto id = optional_string(c, "id", at, &err)) t.id = *id;
        if (!err.message.empty()) return err;
        msg->tool_calls.push_back(std::move(t));
    }
    return std::nullopt;
}

std::optional<ApiError> read_tool_request(const json &j, ToolRequest *out) {
    if (j.contains("tools") && !j["tools"].is_null()) {
        const json &tools = j["tools"];
        if (!tools.is_array()) return bad_request("tools must be an array", "invalid_type");
        for (size_t i = 0; i < tools.size(); ++i) {
            const std::string at = "tools[" + std::to_string(i) + "]";
            const json &t = tools[i];
            if (!t.is_object() || t.value("type", "") != "function" || !t.contains("function") || !t["function"].is_object())
                return bad_request(at + " must be {\"type\": \"function\", \"function\": {...}}", "invalid_type");
            const json &f = t["function"];
            if (!f.contains("name") || !f["name"].is_string()) return bad_request(at + ".function.name must be a string", "invalid_type");
            ToolSpec s;
            s.name = f["name"].get<std::string>();
            if (f.contains("description") && f["description"].is_string()) s.description = f["description"].get<std::string>();
            if (f.contains("parameters") && !f["parameters"].is_null()) {
                if (!f["parameters"].is_object()) return bad_request(at + ".function.parameters must be an object", "invalid_type");
                s.parameters = f["parameters"].dump();
            }
            out->tools.push_back(std::move(s));
        }
    }
    if (j.contains("tool_choice") && !j["tool_choice"].is_null()) {
        const json &c = j["tool_choice"];
        if (c.is_string()) {
            out->choice = c.get<std::string>();
            if (out->choice != "auto" && out->choice != "none" && out->choice != "required")
                return bad_request("tool_choice must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", ...}");
        } else if (c.is_object() && c.contains("function") && c["function"].is_object() &&
                   c["function"].contains("name") && c["function"]["name"].is_string()) {
            out->choice = "named";
            out->name = c["function"]["name"].get<std::string>();
        } else {
            return bad_request("tool_choice must be a string or {\"type\": \"function\", \"function\": {\"name\": ...}}", "invalid_type");
        }
        if (out->choice != "none" && out->choice != "auto" && out->tools.empty())
            return bad_request("tool_choice asks for a call, but the request has no tools");
    }
    if (j.contains("parallel_tool_calls") && !j["parallel_tool_calls"].is_null()) {
        if (!j["parallel_tool_calls"].is_boolean()) return bad_request("parallel_tool_calls must be a boolean", "invalid_type");
        out->parallel = j["parallel_tool_calls"].get<bool>();
    }
    return std::nullopt;
}

bool uses_tool_fields(const CompletionRequest &req) {
    if (!req.tools.tools.empty()) return true;
    for (const ChatMessageText &m : req.messages)
        if (!m.tool_calls.empty() || m.tool_call_id || m.reasoning_content) return true;
    return false;
}

std::optional<ApiError> render_with_tools(const ember_model *model, const CompletionRequest &req, const char *tmpl,
                                          std::string *out) {
    std::vector<std::vector<ember_chat_tool_call>> calls(req.messages.size());
    std::vector<ember_chat_turn> turns;
    for (size_t i = 0; i < req.messages.size(); ++i) {
        const ChatMessageText &m = req.messages[i];
        for (const ToolCallText &c : m.tool_calls)
            calls[i].push_back({c.id.empty() ? nullptr : c.id.c_str(), c.name.c_str(), c.arguments.c_str()});
        turns.push_back({m.role.c_str(), m.content.c_str(), m.reasoning_content ? m.reasoning_content->c_str() : nullptr,
                         calls[i].empty() ? nullptr : calls[i].data(), calls[i].size(),
                         m.tool_call_id ? m.tool_call_id->c_str() : nullptr, m.name ? m.name->c_str() : nullptr});
    }
    const std::vector<ember_chat_tool> tools = c_tools(req.tools.tools);
    ember_chat_params p;
    ember_chat_params_init(&p);
    p.tmpl = tmpl;
    p.messages = turns.data();
    p.n_messages = turns.size();
    p.tools = tools.empty() ? nullptr : tools.data();
    p.n_tools = tools.size();
    size_t len = 0;
    ember_status st = ember_chat_apply_template_v2(model, &p, nullptr, 0, &len);
    if (st != EMBER_OK && st != EMBER_ERR_BUFFER_TOO_SMALL) return library_error("applying the chat template", st);
    std::string buf(len + 1, '\0');
    st = ember_chat_apply_template_v2(model, &p, buf.data(), buf.size(), &len);
    if (st != EMBER_OK) return library_error("applying the chat template", st);
    buf.resize(len);
    *out = std::move(buf);
    return std::nullopt;
}

// The cache key of a tool set: every field that shapes the grammar, each preceded by its length, after
// a byte no schema text (JSON) starts with.
static std::string tool_key(const ToolRequest &tools, const char *tmpl) {
    std::string key = "\x01tools";
    auto add = [&key](const std::string &v) { key += std::to_string(v.size()) + ':' + v; };
    add(tools.choice), add(tools.name), add(tools.parallel ? "1" : "0"), add(tmpl ? tmpl : "");
    for (const ToolSpec &t : tools.tools) add(t.name), add(t.description), add(t.parameters);
    return key;
}

std::optional<ApiError> tool_constraint(const ember_model *model, const ToolRequest &tools, const char *tmpl,
                                        GrammarCache &cache, ToolConstraint *out) {
    if (tools.tools.empty() || tools.choice == "none") return std::nullopt;
    const std::vector<ember_chat_tool> ct = c_tools(tools.tools);
    ember_tool_grammar_params gp;
    ember_tool_grammar_params_init(&gp);
    gp.tmpl = tmpl;
    gp.tools = ct.data();
    gp.n_tools = ct.size();
    gp.parallel = tools.parallel;
    gp.choice = tools.choice == "required" ? EMBER_TOOL_CHOICE_REQUIRED
              : tools.choice == "named"    ? EMBER_TOOL_CHOICE_NAMED
                                           : EMBER_TOOL_CHOICE_AUTO;
    gp.name = tools.name.c_str();
    ember_status st = EMBER_OK;
    std::string why;
    out->key = tool_key(tools, tmpl);
    out->grammar = cache.get(out->key, &why, [&](ember_grammar **g) { return st = ember_chat_tool_grammar(model, &gp, g); });
    if (!out->grammar) out->key.clear();
    // auto: a lazy grammar (free text until the family's opener, then the call's grammar). A format
    // without call syntax (plain content) has none: the parser decides.
    if (st == EMBER_ERR_UNSUPPORTED && gp.choice == EMBER_TOOL_CHOICE_AUTO) return std::nullopt;
    if (st != EMBER_OK) return library_error("tools", st);
    size_t len = 0;
    st = ember_chat_tool_prefix(model, &gp, nullptr, 0, &len);
    if (st != EMBER_OK && st != EMBER_ERR_BUFFER_TOO_SMALL) return library_error("tools", st);
    std::string prefix(len + 1, '\0');
    if ((st = ember_chat_tool_prefix(model, &gp, prefix.data(), prefix.size(), &len)) != EMBER_OK)
        return library_error("tools", st);
    prefix.resize(len);
    out->prefix = std::move(prefix);
    return std::nullopt;
}

std::unique_ptr<ReplyParser> ReplyParser::make(const ember_model *model, const CompletionRequest &req, const char *tmpl,
                                               const std::string &prefix) {
    if (req.endpoint != Endpoint::chat) return nullptr;
    ember_chat_format format = EMBER_CHAT_FORMAT_CONTENT;
    if (ember_chat_format_detect(model, tmpl, &format) != EMBER_OK) return nullptr;
    if (req.tools.tools.empty() && format == EMBER_CHAT_FORMAT_CONTENT) return nullptr;
    const std::vector<ember_chat_tool> ct = c_tools(req.tools.tools);
    ember_chat_parser_params pp;
    ember_chat_parser_params_init(&pp);
    pp.format = format;
    pp.tools = ct.empty() ? nullptr : ct.data();
    pp.n_tools = ct.size();
    ember_chat_parser *p = nullptr;
    if (ember_chat_parser_create(model, &pp, &p) != EMBER_OK) return nullptr;
    std::unique_ptr<ReplyParser> r(new ReplyParser(p));
    if (!prefix.empty()) ember_chat_parser_feed(p, prefix.data(), prefix.size());
    return r;
}

ReplyParser::~ReplyParser() { ember_chat_parser_free(p_); }

ReplyParser::Delta ReplyParser::take() {
    Delta d;
    ember_chat_delta cd;
    ember_chat_delta_init(&cd);
    if (ember_chat_parser_take(p_, &cd) != EMBER_OK) return d;
    d.content.assign(cd.content, cd.content_len);
    d.reasoning.assign(cd.reasoning, cd.reasoning_len);
    d.first_call = cd.first_call;
    for (size_t i = 0; i < cd.n_calls; ++i) {
        ember_chat_tool_call c;
        if (ember_chat_parser_call(p_, cd.first_call + i, &c) == EMBER_OK) d.calls.push_back({c.id, c.name, c.arguments});
    }
    n_calls_ = cd.first_call + cd.n_calls;
    return d;
}

ReplyParser::Delta ReplyParser::feed(const std::string &text) {
    ember_chat_parser_feed(p_, text.data(), text.size());
    return take();
}

ReplyParser::Delta ReplyParser::finish() {
    ember_chat_parser_finish(p_);
    return take();
}

void put_reply(json *response, const ReplyParser::Delta &reply, bool made_calls) {
    json &choice = (*response)["choices"][0];
    json &msg = choice["message"];
    msg["content"] = reply.content.empty() && made_calls ? json(nullptr) : json(reply.content);
    if (!reply.reasoning.empty()) msg["reasoning_content"] = reply.reasoning;
    if (made_calls) {
        msg["tool_calls"] = calls_json(reply.calls, 0, false);
        if (choice["finish_reason"] == "stop") choice["finish_reason"] = "tool_calls";
    }
}

json reply_chunk(const ResponseMeta &m, const ReplyParser::Delta &d) {
    json j = completion_chunk(m, d.content, nullptr, false);
    json &delta = j["choices"][0]["delta"];
    if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
    if (!d.calls.empty()) delta["tool_calls"] = calls_json(d.calls, d.first_call, true);
    return j;
}

} // namespace server
