// api_tools.cpp — tool calls and reasoning through the C ABI (since EMBER_1.8): rendering tools into
// the prompt, parsing calls out of the reply, and grammars that make calls parse.
#include "abi/api_chat.hpp"
#include "grammar/json_schema.hpp"
#include "tools/tool_grammar.hpp"
#include "tools/tool_parser.hpp"
#include "tools/tool_render.hpp"

#include <cstring>

using namespace ember;
using ember::abi::guard;

struct ember_chat_parser {
    std::unique_ptr<tools::ToolCallParser> parser;
    size_t request_fed = 0;   // bytes of a request's text fed (ember_chat_parser_feed_request)
    std::string delta_content, delta_reasoning;   // the last take's text (handed out by pointer)
};

namespace {

std::string text_or_empty(const char *s) { return s ? std::string(s) : std::string(); }

std::vector<tools::Tool> read_tools(const ember_chat_tool *tools, size_t n) {
    if (!tools && n) fail(EMBER_ERR_INVALID_ARGUMENT, "tools is NULL but n_tools is %zu", n);
    std::vector<tools::Tool> out(n);
    for (size_t i = 0; i < n; ++i) {
        if (!tools[i].name) fail(EMBER_ERR_INVALID_ARGUMENT, "tools[%zu].name is NULL", i);
        out[i].name = tools[i].name;
        out[i].description = text_or_empty(tools[i].description);
        const char *schema = tools[i].parameters ? tools[i].parameters : R"({"type": "object", "properties": {}})";
        try {
            out[i].parameters = grammar::parse_json(schema, "parameters");
        } catch (const Error &e) {
            throw Error(e.status(), format("tools[%zu] '%s': %s", i, tools[i].name, e.what()));
        }
    }
    return out;
}

// OpenAI's tools array (or an array of the inner function objects) as JSON text.
void append_tools_json(const char *text, std::vector<tools::Tool> &out) {
    if (!text) return;
    using J = grammar::JsonValue;
    const J v = grammar::parse_json(text, "tools_json");
    if (v.type != J::ARRAY) fail(EMBER_ERR_INVALID_ARGUMENT, "tools_json must be a JSON array of tools");
    for (size_t i = 0; i < v.items.size(); ++i) {
        const J *fn = v.items[i].get("function");
        const J &t = fn ? *fn : v.items[i];
        const J *name = t.get("name");
        if (t.type != J::OBJECT || !name || name->type != J::STRING)
            fail(EMBER_ERR_INVALID_ARGUMENT, "tools_json[%zu] has no \"name\" string", i);
        tools::Tool tool;
        tool.name = name->text;
        if (const J *d = t.get("description"); d && d->type == J::STRING) tool.description = d->text;
        const J *params = t.get("parameters");
        tool.parameters = params ? *params : grammar::parse_json(R"({"type": "object", "properties": {}})");
        out.push_back(std::move(tool));
    }
}

// `format` by reference: a caller's field may hold any integer, read as one (abi::enum_value) before it is an enum.
tools::Format resolve_format(const ember_model *model, const ember_chat_format &format, const char *tmpl) {
    const int64_t f = abi::enum_value(format);
    if (f < 0 || f >= tools::kFormatCount) fail(EMBER_ERR_INVALID_ARGUMENT, "unknown chat format %lld", (long long)f);
    if (f != EMBER_CHAT_FORMAT_AUTO) return static_cast<tools::Format>(f);
    if (tmpl) return tools::detect_format(tmpl);
    if (!model) fail(EMBER_ERR_INVALID_ARGUMENT, "format is AUTO but neither a model nor a template is given");
    return tools::detect_format(abi::model_template(*model));
}

void chat_params_defaults(ember_chat_params *p) {
    std::memset(p, 0, sizeof *p);
    p->struct_size = sizeof *p;
    p->add_generation_prompt = true;
    p->reasoning = EMBER_REASONING_DEFAULT;
}

void tool_grammar_defaults(ember_tool_grammar_params *p) {
    std::memset(p, 0, sizeof *p);
    p->struct_size = sizeof *p;
    p->choice = EMBER_TOOL_CHOICE_REQUIRED;
    p->parallel = true;
}

// The control token whose text is `text` (a call opener such as [TOOL_CALLS]), or -1 where the text is
// not one control token of the model's vocabulary.
int32_t control_token(const ember_model &model, const std::string &text) {
    const Tokenizer &tok = model.model->tokenizer();
    const std::vector<int32_t> ids = tok.tokenize(text, false, true);
    return ids.size() == 1 && tok.token_to_piece(ids[0], false).empty() ? ids[0] : -1;
}

tools::ToolGrammar build_tool_grammar(const ember_model *model, const ember_tool_grammar_params *params) {
    EMBER_REQUIRE_ARG(params);
    const ember_tool_grammar_params p = abi::read_params(params, sizeof(ember_tool_grammar_params),
                                                         tool_grammar_defaults, "ember_tool_grammar_params");
    const tools::Format format = resolve_format(model, p.format, p.tmpl);
    const int64_t choice = abi::enum_value(p.choice);
    if (choice < EMBER_TOOL_CHOICE_AUTO || choice > EMBER_TOOL_CHOICE_NAMED)
        fail(EMBER_ERR_INVALID_ARGUMENT, "unknown tool_choice %lld", (long long)choice);
    if (choice == EMBER_TOOL_CHOICE_NAMED && !p.name)
        fail(EMBER_ERR_INVALID_ARGUMENT, "tool_choice is NAMED but name is NULL");
    std::vector<tools::Tool> list = read_tools(p.tools, p.n_tools);
    append_tools_json(p.tools_json, list);
    return tools::tool_grammar(format, list, static_cast<tools::ToolChoice>(choice), text_or_empty(p.name), p.parallel,
                               [&](const std::string &text) { return model && control_token(*model, text) >= 0; });
}

} // namespace

extern "C" {

void ember_chat_params_init(ember_chat_params *params) {
    if (params) chat_params_defaults(params);
}

ember_status ember_chat_apply_template_v2(const ember_model *model, const ember_chat_params *params, char *buf,
                                          size_t capacity, size_t *out_len) {
    return guard("ember_chat_apply_template_v2", [&] {
        EMBER_REQUIRE_ARG(params);
        EMBER_REQUIRE_ARG(out_len);
        const ember_chat_params p =
            abi::read_params(params, sizeof(ember_chat_params), chat_params_defaults, "ember_chat_params");
        if (!model && !p.tmpl) fail(EMBER_ERR_INVALID_ARGUMENT, "'model' and 'tmpl' are both NULL: pass a template, a model, or both");
        if (!p.messages && p.n_messages) fail(EMBER_ERR_INVALID_ARGUMENT, "messages is NULL but n_messages is %zu", p.n_messages);
        if (!buf && capacity) fail(EMBER_ERR_INVALID_ARGUMENT, "buf is NULL but capacity is %zu", capacity);
        const int64_t reasoning = abi::enum_value(p.reasoning);
        if (reasoning < EMBER_REASONING_DEFAULT || reasoning > EMBER_REASONING_ON)
            fail(EMBER_ERR_INVALID_ARGUMENT, "unknown reasoning value %lld", (long long)reasoning);
        tools::ToolRenderInput in;
        in.add_generation_prompt = p.add_generation_prompt;
        in.reasoning = static_cast<tools::Reasoning>(reasoning);
        in.tools = read_tools(p.tools, p.n_tools);
        append_tools_json(p.tools_json, in.tools);
        in.messages.resize(p.n_messages);
        for (size_t i = 0; i < p.n_messages; ++i) {
            const ember_chat_turn &m = p.messages[i];
            tools::Turn &t = in.messages[i];
            if (!m.role) fail(EMBER_ERR_INVALID_ARGUMENT, "messages[%zu].role is NULL", i);
            if (!m.tool_calls && m.n_tool_calls)
                fail(EMBER_ERR_INVALID_ARGUMENT, "messages[%zu].tool_calls is NULL but n_tool_calls is %zu", i, m.n_tool_calls);
            t.role = m.role;
            t.content = text_or_empty(m.content);
            t.has_reasoning = m.reasoning_content != nullptr;
            t.reasoning = text_or_empty(m.reasoning_content);
            t.has_tool_call_id = m.tool_call_id != nullptr;
            t.tool_call_id = text_or_empty(m.tool_call_id);
            t.has_name = m.name != nullptr;
            t.name = text_or_empty(m.name);
            for (size_t j = 0; j < m.n_tool_calls; ++j) {
                const ember_chat_tool_call &c = m.tool_calls[j];
                if (!c.name || !c.arguments)
                    fail(EMBER_ERR_INVALID_ARGUMENT, "messages[%zu].tool_calls[%zu]: name and arguments must not be NULL", i, j);
                t.tool_calls.push_back({text_or_empty(c.id), c.name, c.arguments});
            }
        }
        std::string_view source = p.tmpl ? std::string_view(p.tmpl) : std::string_view();
        if (model) {
            in.bos_token = abi::special_token_text(*model, true);
            in.eos_token = abi::special_token_text(*model, false);
            if (!p.tmpl) source = abi::model_template(*model);
        }
        const std::string text = tools::render_with_tools(source, in, abi::chat_render_limits());
        return abi::copy_out(text, buf, capacity, out_len, true);
    });
}

ember_status ember_chat_format_detect(const ember_model *model, const char *tmpl, ember_chat_format *out) {
    return guard("ember_chat_format_detect", [&] {
        EMBER_REQUIRE_ARG(out);
        *out = static_cast<ember_chat_format>(resolve_format(model, EMBER_CHAT_FORMAT_AUTO, tmpl));
        return EMBER_OK;
    });
}

const char *ember_chat_format_name(ember_chat_format format) {
    const int64_t f = abi::enum_value(format);
    if (f < 0 || f >= tools::kFormatCount) return "unknown";
    return tools::format_name(static_cast<tools::Format>(f));
}

void ember_chat_parser_params_init(ember_chat_parser_params *params) {
    if (!params) return;
    std::memset(params, 0, sizeof *params);
    params->struct_size = sizeof *params;
}

ember_status ember_chat_parser_create(const ember_model *model, const ember_chat_parser_params *params,
                                      ember_chat_parser **out) {
    if (out) *out = nullptr;
    return guard("ember_chat_parser_create", [&] {
        EMBER_REQUIRE_ARG(out);
        const ember_chat_parser_params p = abi::read_params(params, sizeof(ember_chat_parser_params),
                                                            ember_chat_parser_params_init, "ember_chat_parser_params");
        tools::ParserOptions opt;
        opt.reasoning_open = p.reasoning_open;
        if (!p.tools && p.n_tools) fail(EMBER_ERR_INVALID_ARGUMENT, "tools is NULL but n_tools is %zu", p.n_tools);
        for (size_t i = 0; i < p.n_tools; ++i) {
            if (!p.tools[i].name) fail(EMBER_ERR_INVALID_ARGUMENT, "tools[%zu].name is NULL", i);
            opt.tool_names.emplace_back(p.tools[i].name);
        }
        auto h = std::make_unique<ember_chat_parser>();
        h->parser = std::make_unique<tools::ToolCallParser>(resolve_format(model, p.format, p.tmpl), std::move(opt));
        *out = h.release();
        return EMBER_OK;
    });
}

void ember_chat_parser_free(ember_chat_parser *parser) { delete parser; }

ember_status ember_chat_parser_feed(ember_chat_parser *parser, const char *text, size_t len) {
    return guard("ember_chat_parser_feed", [&] {
        EMBER_REQUIRE_ARG(parser);
        if (!text && len) fail(EMBER_ERR_INVALID_ARGUMENT, "text is NULL but len is %zu", len);
        parser->parser->feed(std::string_view(text ? text : "", len));
        return EMBER_OK;
    });
}

ember_status ember_chat_parser_feed_request(ember_chat_parser *parser, ember_request *request,
                                            ember_request_state *out_state) {
    return guard("ember_chat_parser_feed_request", [&] {
        EMBER_REQUIRE_ARG(parser);
        EMBER_REQUIRE_ARG(request);
        std::string more;
        ember_request_state state;
        {
            // The text and the state read together: text the request ends with is there once it has ended.
            Request &r = *request->request;
            std::lock_guard<std::mutex> lock(r.mutex);
            if (r.text.size() > parser->request_fed) more = r.text.substr(parser->request_fed);
            state = r.state;
        }
        parser->request_fed += more.size();
        if (!parser->parser->finished()) {
            if (!more.empty()) parser->parser->feed(more);
            if (state != EMBER_REQUEST_QUEUED && state != EMBER_REQUEST_RUNNING) parser->parser->finish();
        }
        if (out_state) *out_state = state;
        return EMBER_OK;
    });
}

ember_status ember_chat_parser_finish(ember_chat_parser *parser) {
    return guard("ember_chat_parser_finish", [&] {
        EMBER_REQUIRE_ARG(parser);
        parser->parser->finish();
        return EMBER_OK;
    });
}

void ember_chat_delta_init(ember_chat_delta *delta) {
    if (!delta) return;
    std::memset(delta, 0, sizeof *delta);
    delta->struct_size = sizeof *delta;
    delta->content = "";
    delta->reasoning = "";
}

} // extern "C"

namespace {

void write_delta(ember_chat_delta *out, std::string_view content, std::string_view reasoning, size_t first,
                 size_t n, bool malformed) {
    ember_chat_delta d;
    ember_chat_delta_init(&d);
    d.content = content.data();
    d.content_len = content.size();
    d.reasoning = reasoning.data();
    d.reasoning_len = reasoning.size();
    d.first_call = first;
    d.n_calls = n;
    d.malformed = malformed;
    abi::write_out(out, d, sizeof(ember_chat_delta), "ember_chat_delta");
}

} // namespace

extern "C" {

ember_status ember_chat_parser_take(ember_chat_parser *parser, ember_chat_delta *out) {
    return guard("ember_chat_parser_take", [&] {
        EMBER_REQUIRE_ARG(parser);
        EMBER_REQUIRE_ARG(out);
        const tools::ParseDelta d = parser->parser->take();
        parser->delta_content = d.content;
        parser->delta_reasoning = d.reasoning;
        write_delta(out, parser->delta_content, parser->delta_reasoning, d.first_call, d.n_calls,
                    parser->parser->result().malformed);
        return EMBER_OK;
    });
}

ember_status ember_chat_parser_result(const ember_chat_parser *parser, ember_chat_delta *out) {
    return guard("ember_chat_parser_result", [&] {
        EMBER_REQUIRE_ARG(parser);
        EMBER_REQUIRE_ARG(out);
        const tools::ParseResult &r = parser->parser->result();
        write_delta(out, r.content, r.reasoning, 0, r.calls.size(), r.malformed);
        return EMBER_OK;
    });
}

ember_status ember_chat_parser_call(const ember_chat_parser *parser, size_t i, ember_chat_tool_call *out) {
    return guard("ember_chat_parser_call", [&] {
        EMBER_REQUIRE_ARG(parser);
        EMBER_REQUIRE_ARG(out);
        const auto &calls = parser->parser->result().calls;
        if (i >= calls.size()) fail(EMBER_ERR_INVALID_ARGUMENT, "call %zu of %zu", i, calls.size());
        *out = {calls[i].id.c_str(), calls[i].name.c_str(), calls[i].arguments.c_str()};
        return EMBER_OK;
    });
}

void ember_tool_grammar_params_init(ember_tool_grammar_params *params) {
    if (params) tool_grammar_defaults(params);
}

ember_status ember_chat_tool_grammar(const ember_model *model, const ember_tool_grammar_params *params,
                                     ember_grammar **out) {
    if (out) *out = nullptr;
    return guard("ember_chat_tool_grammar", [&] {
        EMBER_REQUIRE_ARG(model);
        EMBER_REQUIRE_ARG(out);
        const tools::ToolGrammar g = build_tool_grammar(model, params);
        if (g.gbnf.empty()) return EMBER_OK;
        ember_grammar *h = nullptr;
        ember_status s;
        if (g.trigger_words.empty() && g.trigger_tokens.empty()) {
            s = ember_grammar_create_gbnf(model, g.gbnf.data(), g.gbnf.size(), &h);
        } else {   // tool_choice auto: the opener switches the grammar on
            std::vector<const char *> words;
            for (const std::string &w : g.trigger_words) words.push_back(w.c_str());
            std::vector<int32_t> tokens;
            for (const std::string &t : g.trigger_tokens) tokens.push_back(control_token(*model, t));
            ember_grammar_triggers trig;
            ember_grammar_triggers_init(&trig);
            trig.words = words.data();
            trig.n_words = words.size();
            trig.tokens = tokens.data();
            trig.n_tokens = tokens.size();
            trig.once = g.once;
            s = ember_grammar_create_lazy(model, g.gbnf.data(), g.gbnf.size(), &trig, &h);
        }
        if (s != EMBER_OK) throw Error(s, ember_last_error());
        *out = h;
        return EMBER_OK;
    });
}

ember_status ember_chat_tool_prefix(const ember_model *model, const ember_tool_grammar_params *params, char *buf,
                                    size_t capacity, size_t *out_len) {
    return guard("ember_chat_tool_prefix", [&] {
        EMBER_REQUIRE_ARG(out_len);
        if (!buf && capacity) fail(EMBER_ERR_INVALID_ARGUMENT, "buf is NULL but capacity is %zu", capacity);
        return abi::copy_out(build_tool_grammar(model, params).prefix, buf, capacity, out_len, true);
    });
}

} // extern "C"
