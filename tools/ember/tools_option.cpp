// tools_option.cpp — `ember run --tools FILE [--tool-choice C] [--chat-template FILE]`: the prompt is a
// user message rendered by the chat template with the tools (OpenAI's JSON array, FILE), generation is
// constrained by tool_choice's grammar, and the reply is parsed: content to stdout as it streams,
// reasoning to stderr, and each call at the end as one JSON line {"id", "name", "arguments"}.
#include "cli.hpp"

#include <cstdio>

namespace cli {

namespace {
bool ok(ember_status st, const char *what) {
    if (st == EMBER_OK) return true;
    fail(what, st);
    return false;
}

// A string as a JSON literal (the calls' ids and names are plain; escapes keep any text valid).
std::string quoted(const char *s) {
    std::string out = "\"";
    for (; *s; ++s) {
        const unsigned char c = static_cast<unsigned char>(*s);
        if (c == '"' || c == '\\') out += '\\', out += static_cast<char>(c);
        else if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else out += static_cast<char>(c);
    }
    return out + "\"";
}
} // namespace

bool tools_option(const Args &a, const ember_model *model, const std::string &user, ToolRun *out) {
    if (!read_text_file(a.str("--tools", ""), &out->tools_json)) return false;
    if (a.has("--chat-template") && !read_text_file(a.str("--chat-template", ""), &out->tmpl)) return false;
    const char *tmpl = out->tmpl.empty() ? nullptr : out->tmpl.c_str();
    const ember_chat_turn turn = {"user", user.c_str(), nullptr, nullptr, 0, nullptr, nullptr};
    ember_chat_params cp;
    ember_chat_params_init(&cp);
    cp.tmpl = tmpl;
    cp.messages = &turn;
    cp.n_messages = 1;
    cp.tools_json = out->tools_json.c_str();
    size_t n = 0;
    ember_status st = ember_chat_apply_template_v2(model, &cp, nullptr, 0, &n);
    if (st != EMBER_OK && st != EMBER_ERR_BUFFER_TOO_SMALL) return ok(st, "--tools");
    out->prompt.assign(n + 1, '\0');
    if (!ok(ember_chat_apply_template_v2(model, &cp, out->prompt.data(), out->prompt.size(), &n), "--tools")) return false;
    out->prompt.resize(n);

    const std::string choice = a.str("--tool-choice", "auto");
    ember_tool_grammar_params gp;
    ember_tool_grammar_params_init(&gp);
    gp.tmpl = tmpl;
    gp.tools_json = out->tools_json.c_str();
    gp.choice = choice == "auto" ? EMBER_TOOL_CHOICE_AUTO
              : choice == "none" ? EMBER_TOOL_CHOICE_NONE
              : choice == "required" ? EMBER_TOOL_CHOICE_REQUIRED
                                     : EMBER_TOOL_CHOICE_NAMED;
    gp.name = choice.c_str();
    st = ember_chat_tool_grammar(model, &gp, &out->grammar);
    // auto: a lazy grammar, free text until the family's call opener. A format without call syntax
    // (plain content) has none: the parser decides.
    if (st != EMBER_OK && !(st == EMBER_ERR_UNSUPPORTED && gp.choice == EMBER_TOOL_CHOICE_AUTO)) return ok(st, "--tool-choice");
    if (out->grammar) {
        std::string prefix(256, '\0');
        if (!ok(ember_chat_tool_prefix(model, &gp, prefix.data(), prefix.size(), &n), "--tool-choice")) return false;
        prefix.resize(n);
        out->prompt += prefix;
        out->prefix = prefix;
    }
    ember_chat_parser_params pp;
    ember_chat_parser_params_init(&pp);
    pp.tmpl = tmpl;
    if (!ok(ember_chat_parser_create(model, &pp, &out->parser), "--tools")) return false;
    if (!out->prefix.empty()) ember_chat_parser_feed(out->parser, out->prefix.data(), out->prefix.size());
    return true;
}

void tools_print(ember_chat_parser *parser, const char *text, size_t len, bool finish) {
    if (len) ember_chat_parser_feed(parser, text, len);
    if (finish) ember_chat_parser_finish(parser);
    ember_chat_delta d;
    ember_chat_delta_init(&d);
    if (ember_chat_parser_take(parser, &d) != EMBER_OK) return;
    std::fwrite(d.reasoning, 1, d.reasoning_len, stderr);
    std::fwrite(d.content, 1, d.content_len, stdout);
    for (size_t i = 0; i < d.n_calls; ++i) {
        ember_chat_tool_call c;
        if (ember_chat_parser_call(parser, d.first_call + i, &c) == EMBER_OK)
            std::printf("\n{\"id\": %s, \"name\": %s, \"arguments\": %s}", quoted(c.id).c_str(), quoted(c.name).c_str(),
                        c.arguments);
    }
    if (finish && d.malformed) std::fprintf(stderr, "\nember: the reply holds a malformed call (kept as text)\n");
    std::fflush(stdout);
}

ToolRun::~ToolRun() {
    ember_grammar_free(grammar);
    ember_chat_parser_free(parser);
}

} // namespace cli
