// fuzz_chat_template.cpp — libFuzzer target: arbitrary chat templates and conversations through ember's
// Jinja engine (src/chat/). A template comes from a model file, which is untrusted input.
//
// Input: the template text, then optionally a NUL byte and the conversation: messages separated by
// 0x1E, each "role 0x1F content"; the first byte after the NUL, when present, sets add_generation_prompt
// (its low bit) and is not part of the conversation.
// Promises checked: parsing and rendering end with a result or an ember error (never a crash, a hang
// or unbounded memory: rendered here under small limits so that a runaway template stops quickly); when
// the engine renders a template, ember_chat_apply_template gives the same text, NUL-terminated, its
// two-call idiom agreeing with itself (size query, then a buffer one byte short, then the exact size).
#include "fuzz_util.hpp"

#include "chat/chat_template.hpp"
#include "chat/jinja.hpp"
#include "core/error.hpp"

#include <ember/ember.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

using namespace ember;

namespace {

struct Input {
    std::string tmpl;
    std::vector<std::string> roles, contents;
    bool add_generation_prompt = false;
};

Input split(const uint8_t *data, size_t size) {
    Input in;
    const std::string_view all(reinterpret_cast<const char *>(data), size);
    const size_t nul = all.find('\0');
    in.tmpl = std::string(all.substr(0, nul));
    if (nul == std::string_view::npos || nul + 1 >= all.size()) return in;
    in.add_generation_prompt = (static_cast<unsigned char>(all[nul + 1]) & 1) != 0;
    std::string_view rest = all.substr(nul + 2);
    while (!rest.empty()) {
        const size_t end = rest.find('\x1e');
        const std::string_view msg = rest.substr(0, end);
        const size_t sep = msg.find('\x1f');
        in.roles.emplace_back(msg.substr(0, sep));
        in.contents.emplace_back(sep == std::string_view::npos ? std::string_view() : msg.substr(sep + 1));
        if (end == std::string_view::npos) break;
        rest = rest.substr(end + 1);
    }
    return in;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const Input in = split(data, size);
    // The C API takes NUL-terminated strings: a template or message with a NUL inside cannot be passed.
    for (const auto &s : in.roles)
        if (s.find('\0') != std::string::npos) return 0;
    for (const auto &s : in.contents)
        if (s.find('\0') != std::string::npos) return 0;

    chat::RenderInput ri;
    for (size_t i = 0; i < in.roles.size(); ++i) ri.messages.push_back({in.roles[i], in.contents[i]});
    ri.add_generation_prompt = in.add_generation_prompt;
    // Small limits: a template that passes them renders within the library's (larger) defaults in the
    // same steps, so the public call below cannot run away either.
    jinja::Limits limits;
    limits.max_output = size_t(1) << 20;
    limits.max_items = size_t(1) << 14;
    limits.max_steps = 200'000;
    limits.max_alloc = uint64_t(32) << 20;
    std::string expected;
    try {
        expected = chat::render(in.tmpl, ri, limits);
    } catch (const Error &e) {
        if (e.status() != EMBER_ERR_INVALID_ARGUMENT && e.status() != EMBER_ERR_UNSUPPORTED)
            fuzz::broken("the engine failed with an unexpected status", ember_status_string(e.status()));
        return 0;
    }

    std::vector<ember_chat_message> msgs;
    for (size_t i = 0; i < in.roles.size(); ++i) msgs.push_back({in.roles[i].c_str(), in.contents[i].c_str()});
    size_t need = 0;
    ember_status st = ember_chat_apply_template(nullptr, in.tmpl.c_str(), msgs.data(), msgs.size(),
                                                in.add_generation_prompt, nullptr, 0, &need);
    if (st != EMBER_OK && st != EMBER_ERR_BUFFER_TOO_SMALL) fuzz::broken("the C API failed where the engine rendered", ember_last_error());
    if (need != expected.size()) fuzz::broken("the C API's size differs from the engine's text");
    std::vector<char> buf(need + 1, '\x7f');
    if (need > 0) {
        size_t got = 0;
        st = ember_chat_apply_template(nullptr, in.tmpl.c_str(), msgs.data(), msgs.size(), in.add_generation_prompt,
                                       buf.data(), need, &got);   // one byte short: no room for the NUL
        if (st != EMBER_ERR_BUFFER_TOO_SMALL || got != need) fuzz::broken("a buffer one byte short was not refused");
    }
    size_t got = 0;
    st = ember_chat_apply_template(nullptr, in.tmpl.c_str(), msgs.data(), msgs.size(), in.add_generation_prompt,
                                   buf.data(), buf.size(), &got);
    if (st != EMBER_OK || got != need) fuzz::broken("the exact-size call failed", ember_last_error());
    if (buf[need] != '\0' || std::memcmp(buf.data(), expected.data(), need) != 0)
        fuzz::broken("the C API's text differs from the engine's");
    return 0;
}
