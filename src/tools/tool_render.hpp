// tool_render.hpp — a conversation with tools rendered by the model's chat template, with the variables
// transformers' apply_chat_template passes: tools as [{"type": "function", "function": {name,
// description, parameters}}], assistant messages' tool_calls as [{"id", "type": "function",
// "function": {name, arguments}}] (arguments a dict), tool messages with tool_call_id and name, and
// enable_thinking where the caller sets it.
#pragma once

#include "chat/jinja.hpp"
#include "tools/tool_types.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace ember::tools {

enum class Reasoning { Default, Off, On };

struct ToolRenderInput {
    std::vector<Turn> messages;
    std::vector<Tool> tools;
    bool add_generation_prompt = false;
    Reasoning reasoning = Reasoning::Default;   // enable_thinking: left undefined by Default
    std::string bos_token, eos_token;
};

// Throws as chat::render does, and: EMBER_ERR_INVALID_ARGUMENT for a tool call whose arguments are not
// a JSON object, or tools check_tools refuses; EMBER_ERR_UNSUPPORTED when tools are given and the
// template never mentions `tools` (it would drop them silently).
std::string render_with_tools(std::string_view tmpl, const ToolRenderInput &in, const jinja::Limits &limits = {});

// A JSON value as the Jinja value Python's json.loads would give the template.
jinja::Value json_to_jinja(const grammar::JsonValue &v);

} // namespace ember::tools
