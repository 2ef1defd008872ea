// tool_grammar.hpp — the grammar that makes a family's tool calls always parse (tool_choice).
//
// Each call is written as the family's chat template writes calls (`<tool_call>\n{"name": "NAME",
// "arguments": {...}}\n</tool_call>` for Hermes/Qwen), with the arguments constrained by the tool's JSON
// Schema (json_schema.hpp's subset), so a call's arguments always validate.
//
// Where a family opens its calls with a control token ([TOOL_CALLS], <|tool_call|>, gpt-oss's
// <|channel|>...<|message|>), a grammar cannot produce that token (grammars match text, control tokens
// have none): `prefix` is then the text to append to the prompt (tokenized with special tokens parsed),
// and the grammar starts after it.
#pragma once

#include "tools/tool_types.hpp"

#include <functional>
#include <string>
#include <vector>

namespace ember::tools {

enum class ToolChoice { Auto = 0, None = 1, Required = 2, Named = 3 };

struct ToolGrammar {
    std::string gbnf;     // empty: no constraint (tool_choice none)
    std::string prefix;   // text to append to the prompt before generating ("" for most)
    // Auto: the grammar is lazy (grammar.hpp's GrammarTriggers): it matches the calls from the family's
    // opener on, and the opener is its trigger: a word (text) or a token, named by its text (a control
    // token of the model's vocabulary). once: the reply ends after the call (one call, no free text).
    std::vector<std::string> trigger_words, trigger_tokens;
    bool once = false;
};

// Whether a text is one control token of the model's vocabulary (its opener is then a token trigger).
using IsControlToken = std::function<bool(const std::string &text)>;

// Auto: the lazy grammar of the family's calls (free text until the opener: Hermes' <tool_call>, Llama
// 3.x's {"name" or <|python_tag|>, Mistral's [TOOL_CALLS], Granite's and Phi-4's <|tool_call|>; for
// gpt-oss, whose arguments follow control tokens, the recipient's "to=functions." and a tool's name
// only). Required: one or more calls to any of `tools`; Named: calls to `name` only. Throws Error:
// EMBER_ERR_INVALID_ARGUMENT (no tools, an unknown name, tools check_tools refuses), EMBER_ERR_UNSUPPORTED
// (a format without calls, or Required with several tools for gpt-oss, whose tool name sits between
// control tokens). parallel: up to kMaxParallelCalls calls in one reply (OpenAI's parallel_tool_calls),
// or, for Auto, calls each opened again; otherwise one. is_control_token: none when not given.
constexpr int kMaxParallelCalls = 8;
ToolGrammar tool_grammar(Format format, const std::vector<Tool> &tools, ToolChoice choice, const std::string &name,
                         bool parallel = true, const IsControlToken &is_control_token = {});

// GBNF text with every rule name given `prefix` (so several schemas' grammars share one file).
std::string prefix_rules(const std::string &gbnf, const std::string &prefix);

} // namespace ember::tools
