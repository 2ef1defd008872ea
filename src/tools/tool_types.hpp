// tool_types.hpp — what a conversation with tools holds: the tools a model may call, the calls it made,
// and the families whose call syntax ember knows.
#pragma once

#include "grammar/json_value.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace ember::tools {

// A function the model may call: its arguments are a JSON object that `parameters` (a JSON Schema)
// describes.
struct Tool {
    std::string name;
    std::string description;
    grammar::JsonValue parameters;   // an OBJECT schema ({"type": "object", "properties": {}} when none)
};

// One call the model made (or makes): `arguments` is compact JSON text of an object.
struct ToolCall {
    std::string id;
    std::string name;
    std::string arguments;
};

// A message as transformers' apply_chat_template receives it.
struct Turn {
    std::string role;
    std::string content;
    bool has_reasoning = false;
    std::string reasoning;
    std::vector<ToolCall> tool_calls;   // assistant messages
    bool has_tool_call_id = false;
    std::string tool_call_id;           // tool messages: the call answered
    bool has_name = false;
    std::string name;                   // tool messages: the tool's name
};

// How a family writes calls and reasoning into its text (the values of ember_chat_format).
enum class Format : int32_t {
    Auto = 0,      // chosen from the chat template
    Content = 1,   // no calls: all text is content (with <think> reasoning where it appears)
    Hermes = 2,    // Qwen2.5/Qwen3/Qwen3.5, Hermes: <tool_call>{"name", "arguments"}</tool_call>, <think>
    Llama3 = 3,    // Llama 3.1-3.3: a bare {"name", "parameters"} object, or <|python_tag|> before it
    Mistral = 4,   // [TOOL_CALLS][{"name", "arguments", "id"?}, ...]
    GptOss = 5,    // harmony channels: analysis, commentary to=functions.NAME, final
    Granite = 6,   // Granite 3.x: <|tool_call|>[{"name", "arguments"}], <think>
    Phi4 = 7,      // Phi-4-mini: <|tool_call|>[...]<|/tool_call|>
};
constexpr int32_t kFormatCount = 8;

const char *format_name(Format f);

// Throws Error(EMBER_ERR_INVALID_ARGUMENT) naming what is wrong: an empty, over-long or duplicate name,
// a name outside [A-Za-z0-9_.-], parameters that are not a JSON object schema, or a schema the grammar
// compiler refuses (its own error, EMBER_ERR_UNSUPPORTED for a keyword outside the subset).
void check_tools(const std::vector<Tool> &tools);

} // namespace ember::tools
