// api_chat.cpp — chat templates through the C ABI (since EMBER_1.3).
#include "abi/api_chat.hpp"
#include "chat/chat_template.hpp"
#include "chat/jinja.hpp"

#include <chrono>
#include <cstdlib>

using namespace ember;
using ember::abi::guard;

namespace {

// A special token's text, "" when the model has none.
std::string special_text(const Tokenizer &tok, int32_t id) {
    if (id < 0 || id >= tok.n_vocab()) return {};
    return tok.token_to_piece(id, true);
}

} // namespace

namespace ember::abi {

// The render budgets: jinja::Limits' defaults (2 s, 256 MiB), or $EMBER_CHAT_TIME_LIMIT_MS (0: none) and
// $EMBER_CHAT_MEMORY_LIMIT_MB where the process sets them (read at each call).
jinja::Limits chat_render_limits() {
    jinja::Limits l;
    auto number = [](const char *name, unsigned long long *out) {
        const char *v = std::getenv(name);
        if (!v || !*v) return false;
        char *end = nullptr;
        *out = std::strtoull(v, &end, 10);
        return *end == 0;
    };
    unsigned long long v;
    if (number("EMBER_CHAT_TIME_LIMIT_MS", &v)) l.max_time = std::chrono::milliseconds(v);
    if (number("EMBER_CHAT_MEMORY_LIMIT_MB", &v) && v > 0 && v < (1ull << 40)) l.max_alloc = v << 20;
    return l;
}

std::string special_token_text(const ember_model &model, bool bos) {
    const Tokenizer &tok = model.model->tokenizer();
    return special_text(tok, bos ? tok.bos() : tok.eos());
}

std::string_view model_template(const ember_model &model) {
    const gguf::KV *kv = model.model->gguf().find("tokenizer.chat_template");
    if (kv && kv->value.type != gguf::ValueType::STRING)
        fail(EMBER_ERR_INVALID_MODEL, "metadata 'tokenizer.chat_template' is %s, not a string",
             gguf::value_type_name(kv->value.type));
    return kv && !kv->value.str.empty() ? std::string_view(kv->value.str) : std::string_view(chat::kChatmlTemplate);
}

} // namespace ember::abi

extern "C" {

ember_status ember_chat_apply_template(const ember_model *model, const char *tmpl, const ember_chat_message *messages,
                                       size_t n_messages, bool add_generation_prompt, char *buf, size_t capacity,
                                       size_t *out_len) {
    return guard("ember_chat_apply_template", [&] {
        EMBER_REQUIRE_ARG(out_len);
        if (!model && !tmpl) fail(EMBER_ERR_INVALID_ARGUMENT, "'model' and 'tmpl' are both NULL: pass a template, a model, or both");
        if (!messages && n_messages) fail(EMBER_ERR_INVALID_ARGUMENT, "messages is NULL but n_messages is %zu", n_messages);
        if (!buf && capacity) fail(EMBER_ERR_INVALID_ARGUMENT, "buf is NULL but capacity is %zu", capacity);
        chat::RenderInput in;
        in.add_generation_prompt = add_generation_prompt;
        in.messages.reserve(n_messages);
        for (size_t i = 0; i < n_messages; ++i) {
            if (!messages[i].role) fail(EMBER_ERR_INVALID_ARGUMENT, "messages[%zu].role is NULL", i);
            if (!messages[i].content) fail(EMBER_ERR_INVALID_ARGUMENT, "messages[%zu].content is NULL", i);
            in.messages.push_back({messages[i].role, messages[i].content});
        }
        std::string_view source = tmpl ? std::string_view(tmpl) : std::string_view();
        if (model) {
            in.bos_token = abi::special_token_text(*model, true);
            in.eos_token = abi::special_token_text(*model, false);
            if (!tmpl) source = abi::model_template(*model);
        }
        const std::string text = chat::render(source, in, abi::chat_render_limits());
        return abi::copy_out(text, buf, capacity, out_len, true);
    });
}

} // extern "C"
