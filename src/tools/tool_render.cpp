// tool_render.cpp — the template variables of a conversation with tools (tool_render.hpp).
#include "tools/tool_render.hpp"

#include "chat/chat_template.hpp"
#include "core/error.hpp"

#include <cmath>

namespace ember::tools {

namespace {

jinja::Value str(std::string s) { return jinja::Value::string(std::move(s)); }

struct DictBuilder {
    std::shared_ptr<jinja::Dict> d = std::make_shared<jinja::Dict>();
    DictBuilder &set(const char *k, jinja::Value v) {
        d->set(str(k), std::move(v));
        return *this;
    }
    jinja::Value value() { return jinja::Value::dict(d); }
};

jinja::Value tool_value(const Tool &t) {
    DictBuilder fn;
    fn.set("name", str(t.name));
    if (!t.description.empty()) fn.set("description", str(t.description));
    fn.set("parameters", json_to_jinja(t.parameters));
    return DictBuilder().set("type", str("function")).set("function", fn.value()).value();
}

jinja::Value call_value(const ToolCall &c, size_t turn, size_t i) {
    grammar::JsonValue args;
    try {
        args = grammar::parse_json(c.arguments, "arguments");
    } catch (const Error &e) {
        throw Error(EMBER_ERR_INVALID_ARGUMENT, format("messages[%zu].tool_calls[%zu]: %s", turn, i, e.what()));
    }
    if (args.type != grammar::JsonValue::OBJECT)
        fail(EMBER_ERR_INVALID_ARGUMENT, "messages[%zu].tool_calls[%zu]: arguments must be a JSON object", turn, i);
    DictBuilder fn;
    fn.set("name", str(c.name)).set("arguments", json_to_jinja(args));
    DictBuilder call;
    if (!c.id.empty()) call.set("id", str(c.id));
    return call.set("type", str("function")).set("function", fn.value()).value();
}

// Keys appear only where the message has them: templates test `'tool_calls' in message` (Llama 3.x)
// and `message.tool_calls is defined` (Mistral), so an empty list or None would change their output.
jinja::Value turn_value(const Turn &t, size_t index) {
    DictBuilder m;
    m.set("role", str(t.role)).set("content", str(t.content));
    if (t.has_reasoning) m.set("reasoning_content", str(t.reasoning));
    if (!t.tool_calls.empty()) {
        jinja::List calls;
        for (size_t i = 0; i < t.tool_calls.size(); ++i) calls.push_back(call_value(t.tool_calls[i], index, i));
        m.set("tool_calls", jinja::Value::list(std::move(calls)));
    }
    if (t.has_tool_call_id) m.set("tool_call_id", str(t.tool_call_id));
    if (t.has_name) m.set("name", str(t.name));
    return m.value();
}

} // namespace

jinja::Value json_to_jinja(const grammar::JsonValue &v) {
    using J = grammar::JsonValue;
    switch (v.type) {
    case J::NUL: return jinja::Value::none();
    case J::BOOL: return jinja::Value::boolean(v.boolean);
    case J::NUMBER:
        // Python's json.loads gives an int for a number without fraction or exponent.
        if (v.integer && std::fabs(v.number) < 9.2e18) return jinja::Value::integer(static_cast<int64_t>(v.number));
        return jinja::Value::number(v.number);
    case J::STRING: return str(v.text);
    case J::ARRAY: {
        jinja::List items;
        items.reserve(v.items.size());
        for (const J &i : v.items) items.push_back(json_to_jinja(i));
        return jinja::Value::list(std::move(items));
    }
    case J::OBJECT: {
        DictBuilder d;
        for (const auto &[k, m] : v.members) d.d->set(str(k), json_to_jinja(m));
        return d.value();
    }
    }
    return jinja::Value::none();
}

std::string render_with_tools(std::string_view tmpl, const ToolRenderInput &in, const jinja::Limits &limits) {
    check_tools(in.tools);
    if (!in.tools.empty() && tmpl.find("tools") == std::string_view::npos)
        fail(EMBER_ERR_UNSUPPORTED, "the chat template has no tool support (it never reads `tools`), but %zu tools "
             "were given", in.tools.size());
    jinja::List messages;
    messages.reserve(in.messages.size());
    for (size_t i = 0; i < in.messages.size(); ++i) messages.push_back(turn_value(in.messages[i], i));
    jinja::Value tools = jinja::Value::none();
    if (!in.tools.empty()) {
        jinja::List list;
        for (const Tool &t : in.tools) list.push_back(tool_value(t));
        tools = jinja::Value::list(std::move(list));
    }
    jinja::Variables vars = {
        {"messages", jinja::Value::list(std::move(messages))},
        {"add_generation_prompt", jinja::Value::boolean(in.add_generation_prompt)},
        {"bos_token", str(in.bos_token)},
        {"eos_token", str(in.eos_token)},
        {"tools", tools},
        {"documents", jinja::Value::none()},
    };
    if (in.reasoning != Reasoning::Default)
        vars.emplace_back("enable_thinking", jinja::Value::boolean(in.reasoning == Reasoning::On));
    return chat::render_variables(tmpl, vars, limits);
}

} // namespace ember::tools
