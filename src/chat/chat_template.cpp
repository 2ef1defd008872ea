// chat_template.cpp — the variables a chat template sees, and the fallback ChatML template.
#include "chat/chat_template.hpp"

#include "chat/jinja.hpp"

namespace ember::chat {

const char *const kChatmlTemplate =
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

std::string render(std::string_view tmpl, const RenderInput &in) {
    const jinja::Template t(tmpl);
    jinja::List messages;
    messages.reserve(in.messages.size());
    for (const Message &m : in.messages) {
        auto d = std::make_shared<jinja::Dict>();
        d->set(jinja::Value::string("role"), jinja::Value::string(std::string(m.role)));
        d->set(jinja::Value::string("content"), jinja::Value::string(std::string(m.content)));
        messages.push_back(jinja::Value::dict(std::move(d)));
    }
    // tools and documents stay undefined: templates test `tools is defined` / `documents is defined`.
    const jinja::Variables vars = {
        {"messages", jinja::Value::list(std::move(messages))},
        {"add_generation_prompt", jinja::Value::boolean(in.add_generation_prompt)},
        {"bos_token", jinja::Value::string(in.bos_token)},
        {"eos_token", jinja::Value::string(in.eos_token)},
    };
    return t.render(vars);
}

} // namespace ember::chat
