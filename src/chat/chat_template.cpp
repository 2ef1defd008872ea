// chat_template.cpp — the variables a chat template sees, and the fallback ChatML template.
#include "chat/chat_template.hpp"

#include "chat/jinja.hpp"

namespace ember::chat {

const char *const kChatmlTemplate =
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

std::string render(std::string_view tmpl, const RenderInput &in, const jinja::Limits &limits) {
    const jinja::Template t(tmpl);
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
    return t.render(vars, limits);
}

} // namespace ember::chat
