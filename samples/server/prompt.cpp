// prompt.cpp — chat messages to text with ember_chat_apply_template, text to tokens with ember_tokenize.
#include "prompt.hpp"
#include "tool_calls.hpp"

#include <string>

namespace server {

namespace {
ApiError library_error(const char *what, ember_status st) {
    ApiError e;
    e.http_status = st == EMBER_ERR_INVALID_ARGUMENT ? 400 : 500;
    e.type = e.http_status == 400 ? "invalid_request_error" : "server_error";
    e.code = ember_status_string(st);
    e.message = std::string(what) + ": " + ember_last_error();
    return e;
}

std::optional<ApiError> tokenize(const ember_model *model, const std::string &text, uint32_t flags,
                                 std::vector<ember_token> *out) {
    size_t n = 0;
    ember_status st = ember_tokenize(model, text.data(), text.size(), flags, nullptr, 0, &n);
    if (st != EMBER_OK && st != EMBER_ERR_BUFFER_TOO_SMALL) return library_error("tokenizing the prompt", st);
    out->resize(n);
    st = ember_tokenize(model, text.data(), text.size(), flags, out->data(), out->size(), &n);
    if (st != EMBER_OK) return library_error("tokenizing the prompt", st);
    out->resize(n);
    return std::nullopt;
}

std::optional<ApiError> apply_chat_template(const ember_model *model, const std::vector<ChatMessageText> &messages,
                                            const char *tmpl, std::string *out) {
    std::vector<ember_chat_message> msgs;
    msgs.reserve(messages.size());
    for (const ChatMessageText &m : messages) msgs.push_back({m.role.c_str(), m.content.c_str()});
    size_t len = 0;
    ember_status st = ember_chat_apply_template(model, tmpl, msgs.data(), msgs.size(), true, nullptr, 0, &len);
    if (st != EMBER_OK && st != EMBER_ERR_BUFFER_TOO_SMALL) return library_error("applying the chat template", st);
    std::string buf(len + 1, '\0');
    st = ember_chat_apply_template(model, tmpl, msgs.data(), msgs.size(), true, buf.data(), buf.size(), &len);
    if (st != EMBER_OK) return library_error("applying the chat template", st);
    buf.resize(len);
    *out = std::move(buf);
    return std::nullopt;
}
} // namespace

std::optional<ApiError> build_prompt(const ember_model *model, const CompletionRequest &req, std::vector<ember_token> *out,
                                     const char *tmpl) {
    out->clear();
    if (req.endpoint == Endpoint::completion && req.prompt_is_tokens) {
        *out = req.prompt_tokens;  // ids outside the vocabulary are refused at submit, with ember's message
        return std::nullopt;
    }
    if (req.endpoint == Endpoint::completion) {
        // As `ember run` does: BOS where the model wants one; special-token text in the prompt stays text,
        // so that a client cannot inject control tokens.
        if (auto e = tokenize(model, req.prompt, EMBER_TOKENIZE_ADD_SPECIAL, out)) return e;
    } else {
        std::string text;
        if (auto e = uses_tool_fields(req) ? render_with_tools(model, req, tmpl, &text)
                                           : apply_chat_template(model, req.messages, tmpl, &text))
            return e;
        // The template writes the control tokens (<|im_start|>, [INST], usually the BOS text) as text:
        // parse them. The messages' own text goes through the same parse, as in every template-based
        // server. BOS is added only where the model asks for one (what tokenizing "" with
        // ADD_SPECIAL gives) and the template wrote none; ADD_SPECIAL itself could append an EOS.
        if (auto e = tokenize(model, text, EMBER_TOKENIZE_PARSE_SPECIAL, out)) return e;
        std::vector<ember_token> specials;
        if (auto e = tokenize(model, "", EMBER_TOKENIZE_ADD_SPECIAL, &specials)) return e;
        const ember_token bos = ember_token_bos(model);
        if (bos >= 0 && !specials.empty() && specials[0] == bos && (out->empty() || (*out)[0] != bos))
            out->insert(out->begin(), bos);
    }
    if (out->empty()) {
        if (ember_token_bos(model) < 0) {
            ApiError e;
            e.message = "the prompt is empty and the model has no BOS token to start from";
            e.code = "empty_prompt";
            return e;
        }
        out->push_back(ember_token_bos(model));
    }
    return std::nullopt;
}

} // namespace server
