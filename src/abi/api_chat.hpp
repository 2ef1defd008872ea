// api_chat.hpp — what api_chat.cpp shares with api_tools.cpp: a model's chat template and special
// tokens as the renderer needs them, and the render budgets.
#pragma once

#include "abi/handles.hpp"
#include "chat/jinja.hpp"

#include <string>
#include <string_view>

namespace ember::abi {
// The model's tokenizer.chat_template, or ChatML when it has none (EMBER_ERR_INVALID_MODEL when the
// metadata is not a string).
std::string_view model_template(const ember_model &model);
// The model's BOS (bos true) or EOS token as text, "" when it has none.
std::string special_token_text(const ember_model &model, bool bos);
// jinja::Limits' defaults, or $EMBER_CHAT_TIME_LIMIT_MS / $EMBER_CHAT_MEMORY_LIMIT_MB where set.
jinja::Limits chat_render_limits();
} // namespace ember::abi
