// chat_template.hpp — a conversation rendered to prompt text by a chat template (tokenizer.chat_template
// in GGUF files, the Jinja text of the model's tokenizer_config.json), with the variables transformers
// passes: messages, add_generation_prompt, bos_token, eos_token.
#pragma once

#include "chat/jinja.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace ember::chat {

struct Message {
    std::string_view role;
    std::string_view content;
};

struct RenderInput {
    std::vector<Message> messages;
    bool add_generation_prompt = false;
    std::string bos_token, eos_token;   // the model's special tokens as text ("" when it has none)
};

// The ChatML template used when a model has none: <|im_start|>role\ncontent<|im_end|>\n per message.
extern const char *const kChatmlTemplate;

// Parses and renders `tmpl`. Throws Error: EMBER_ERR_INVALID_ARGUMENT (syntax error with line:column, a
// failure while rendering, raise_exception with the template's message), EMBER_ERR_UNSUPPORTED (a
// construct outside the subset, named with its line).
// `limits` bound the render (the library uses the defaults; the fuzz target smaller ones).
std::string render(std::string_view tmpl, const RenderInput &in, const jinja::Limits &limits = {});

// Renders `tmpl` with variables the caller built (messages with tool calls, tools, enable_thinking:
// src/tools/tool_render.cpp), under the same budgets and errors as render().
std::string render_variables(std::string_view tmpl, const jinja::Variables &vars, const jinja::Limits &limits = {});

} // namespace ember::chat
