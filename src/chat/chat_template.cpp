// chat_template.cpp — the variables a chat template sees, and the fallback ChatML template.
#include "chat/chat_template.hpp"

#include "chat/jinja.hpp"
#include "core/error.hpp"

namespace ember::chat {

const char *const kChatmlTemplate =
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

std::string render_variables(std::string_view tmpl, const jinja::Variables &vars, const jinja::Limits &limits) {
    // The parsed template (tokens and syntax tree) takes some 72 bytes per byte of source (an 18 MB
    // template peaked at 1.3 GiB): refused above max_template, and charged against max_alloc, so that
    // one budget bounds the memory of parse and render together.
    constexpr uint64_t kParsedBytesPerByte = 80;
    if (tmpl.size() > limits.max_template)
        fail(EMBER_ERR_INVALID_ARGUMENT, "the chat template has %zu bytes, over the limit of %zu", tmpl.size(),
             limits.max_template);
    const uint64_t parsed = uint64_t{tmpl.size()} * kParsedBytesPerByte;
    if (parsed > limits.max_alloc)
        fail(EMBER_ERR_INVALID_ARGUMENT, "the chat template of %zu bytes would take about %llu bytes parsed, over the "
             "memory limit of %llu", tmpl.size(), (unsigned long long)parsed, (unsigned long long)limits.max_alloc);
    jinja::Limits left = limits;
    left.max_alloc -= parsed;
    const jinja::Template t(tmpl);
    return t.render(vars, left);
}

std::string render(std::string_view tmpl, const RenderInput &in, const jinja::Limits &limits) {
    jinja::List messages;
    messages.reserve(in.messages.size());
    for (const Message &m : in.messages) {
        auto d = std::make_shared<jinja::Dict>();
        d->set(jinja::Value::string("role"), jinja::Value::string(std::string(m.role)));
        d->set(jinja::Value::string("content"), jinja::Value::string(std::string(m.content)));
        messages.push_back(jinja::Value::dict(std::move(d)));
    }
    // tools and documents are None, as transformers passes them when a conversation has none: templates
    // test `tools is not none` (Llama-3.1), `tools is defined and tools` or plain `tools`; an undefined
    // tools would pass the first of those and print a tool preamble with no tools.
    const jinja::Variables vars = {
        {"messages", jinja::Value::list(std::move(messages))},
        {"add_generation_prompt", jinja::Value::boolean(in.add_generation_prompt)},
        {"bos_token", jinja::Value::string(in.bos_token)},
        {"eos_token", jinja::Value::string(in.eos_token)},
        {"tools", jinja::Value::none()},
        {"documents", jinja::Value::none()},
    };
    return render_variables(tmpl, vars, limits);
}

} // namespace ember::chat
