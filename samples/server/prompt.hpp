// prompt.hpp — the prompt tokens of a request: chat messages through the model's chat template, or a
// completion prompt as text or token ids.
#pragma once

#include "openai_json.hpp"

#include <ember/ember.h>

#include <optional>
#include <vector>

namespace server {

// Fills *out with the tokens to submit. Errors: 400 (a template that rejects the messages, an empty
// prompt on a model without BOS), 500 (the library failed).
// tmpl: a chat template instead of the model's (NULL: the model's).
std::optional<ApiError> build_prompt(const ember_model *model, const CompletionRequest &req, std::vector<ember_token> *out,
                                     const char *tmpl = nullptr);

} // namespace server
