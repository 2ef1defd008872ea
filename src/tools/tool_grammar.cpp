// tool_grammar.cpp — GBNF for tool calls (tool_grammar.hpp).
#include "tools/tool_grammar.hpp"

#include "core/error.hpp"
#include "core/json_escape.hpp"
#include "grammar/json_schema.hpp"

#include <algorithm>

namespace ember::tools {

namespace {

bool ident_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

// A text as a GBNF literal: JSON's quoting (\" \\ \n \t \uXXXX) is also GBNF's, except \u for control
// characters, which GBNF writes \xNN.
std::string literal(std::string_view s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') out += '\\', out += char(c);
        else if (c == '\n') out += "\\n";
        else if (c < 0x20) out += format("\\x%02X", c);
        else out += char(c);
    }
    return out + "\"";
}

// A literal followed by a space, or nothing for the empty text.
std::string literal_sp(std::string_view s) { return s.empty() ? std::string() : literal(s) + " "; }

// What one call of each family looks like, around the name and the arguments.
struct CallShape {
    std::string opener;                        // before each call (Hermes' <tool_call>), or ""
    std::string before_name, between, after;   // opener before_name NAME between ARGS after
    std::string separator;                     // between two calls
    std::string open, close;                   // around all calls (a JSON array), or ""
    std::string prefix;                        // text the prompt must end with (control-token openers)
    bool several = true;                       // more than one call per reply
};

CallShape shape(Format f) {
    switch (f) {
    case Format::Hermes: return {"<tool_call>", "\n{\"name\": \"", "\", \"arguments\": ", "}\n</tool_call>", "\n", "", "", "", true};
    case Format::Llama3: return {"", "{\"name\": \"", "\", \"parameters\": ", "}", "", "", "", "", false};
    case Format::Mistral: return {"", "{\"name\": \"", "\", \"arguments\": ", "}", ", ", "[", "]", "[TOOL_CALLS]", true};
    case Format::Granite:
    case Format::Phi4: return {"", "{\"name\": \"", "\", \"arguments\": ", "}", ", ", "[", "]", "<|tool_call|>", true};
    case Format::GptOss: return {"", "", "", "", "", "", "", "<|channel|>commentary to=functions.", false};
    default: fail(EMBER_ERR_UNSUPPORTED, "the format '%s' has no tool calls", format_name(f));
    }
}

// tool_choice auto: the grammar of the calls from the family's opener on, and the opener as its trigger
// (grammar.hpp's GrammarTriggers): before the opener the model writes freely and the grammar costs
// nothing. An opener that is one control token of the vocabulary is a token trigger (the grammar starts
// after it); an opener that is text is a word trigger, and the grammar starts with its text.
ToolGrammar lazy_calls(Format format, const CallShape &sh, const std::string &calls, const std::string &bodies,
                       const std::string &rules, const std::string &more, bool parallel, const IsControlToken &is_control_token) {
    ToolGrammar out;
    auto token = [&](const std::string &text) { return is_control_token && is_control_token(text); };
    switch (format) {
    case Format::Hermes:
        // One call per trigger: further calls open again (parallel), or only the end follows (once).
        out.once = !parallel;
        if (token(sh.opener)) {
            out.trigger_tokens.push_back(sh.opener);
            out.gbnf = "root ::= body\n" + bodies + rules;
        } else {
            out.trigger_words.push_back(sh.opener);
            out.gbnf = "root ::= call\n" + calls + rules;
        }
        return out;
    case Format::Llama3:
        // A JSON object {"name": ...}, or <|python_tag|> before it: the object is the grammar either way.
        out.trigger_words.push_back("{\"name\"");
        if (token("<|python_tag|>")) out.trigger_tokens.push_back("<|python_tag|>");
        out.once = true;
        out.gbnf = "root ::= call\n" + calls + rules;
        return out;
    case Format::GptOss:
        out.trigger_words.push_back("to=functions.");
        out.gbnf = "root ::= \"to=functions.\" call\n" + calls;
        return out;
    default: {   // Mistral, Granite, Phi-4: an opener (a control token in their vocabularies), then a JSON array
        out.once = !parallel;
        const std::string array = literal_sp(sh.open) + "call " + more + literal_sp(sh.close);
        if (token(sh.prefix)) {
            out.trigger_tokens.push_back(sh.prefix);
            out.gbnf = "root ::= " + array + "\n" + calls + rules;
        } else {
            out.trigger_words.push_back(sh.prefix);
            out.gbnf = "root ::= " + literal(sh.prefix) + " " + array + "\n" + calls + rules;
        }
        return out;
    }
    }
}

} // namespace

std::string prefix_rules(const std::string &gbnf, const std::string &prefix) {
    std::string out;
    out.reserve(gbnf.size() * 2);
    for (size_t i = 0; i < gbnf.size();) {
        const char c = gbnf[i];
        if (c == '"' || c == '[') {
            // A literal or a class: copied as it is, escapes included.
            const char close = c == '"' ? '"' : ']';
            size_t j = i + 1;
            while (j < gbnf.size() && gbnf[j] != close) j += gbnf[j] == '\\' ? 2 : 1;
            out.append(gbnf, i, j + 1 - i);
            i = j + 1;
        } else if (c == '#') {
            const size_t j = gbnf.find('\n', i);
            i = j == std::string::npos ? gbnf.size() : j;
        } else if (ident_char(c) && !(c >= '0' && c <= '9' && i > 0 && (gbnf[i - 1] == '{' || gbnf[i - 1] == ','))) {
            size_t j = i;
            while (j < gbnf.size() && ident_char(gbnf[j])) ++j;
            const bool number = std::all_of(gbnf.begin() + long(i), gbnf.begin() + long(j), [](char d) { return d >= '0' && d <= '9'; });
            if (!number) out += prefix;
            out.append(gbnf, i, j - i);
            i = j;
        } else {
            out += c;
            ++i;
        }
    }
    return out;
}

ToolGrammar tool_grammar(Format format, const std::vector<Tool> &tools, ToolChoice choice, const std::string &name,
                         bool parallel, const IsControlToken &is_control_token) {
    if (choice == ToolChoice::None) return {};
    if (tools.empty()) fail(EMBER_ERR_INVALID_ARGUMENT, "tool_choice needs at least one tool");
    check_tools(tools);
    std::vector<const Tool *> allowed;
    for (const Tool &t : tools)
        if (choice != ToolChoice::Named || t.name == name) allowed.push_back(&t);
    if (allowed.empty()) fail(EMBER_ERR_INVALID_ARGUMENT, "tool_choice names '%s', which is not among the tools", name.c_str());
    const CallShape sh = shape(format);

    ToolGrammar out;
    std::string rules;
    // One rule per tool: its name and its arguments (the schema's rules, renamed apart).
    std::string calls = "call ::= (", bodies = "body ::= (";   // a call; a call after its opener
    for (size_t i = 0; i < allowed.size(); ++i) {
        const std::string p = "t" + std::to_string(i) + "-";
        if (format == Format::GptOss && choice == ToolChoice::Auto) {
            // The recipient is text in a message's header; the arguments follow control tokens, which a
            // grammar cannot match: the lazy grammar holds the name to one of the tools.
            calls += std::string(i ? " | " : "") + literal(allowed[i]->name);
            continue;
        }
        rules += prefix_rules(grammar::json_schema_to_gbnf(allowed[i]->parameters), p) + "\n";
        if (format == Format::GptOss) {
            // The name is in the prompt's prefix; the grammar is the arguments alone.
            if (allowed.size() > 1)
                fail(EMBER_ERR_UNSUPPORTED, "gpt-oss writes the tool's name between control tokens: a grammar can "
                     "force one named tool, not a choice among %zu", allowed.size());
            out.prefix = sh.prefix + allowed[i]->name + " <|constrain|>json<|message|>";
            out.gbnf = "root ::= " + p + "root\n" + rules;
            return out;
        }
        const std::string rest = literal(sh.before_name + allowed[i]->name + sh.between) + " " + p + "root";
        calls += std::string(i ? " | " : "") + literal_sp(sh.opener) + rest;
        bodies += std::string(i ? " | " : "") + rest;
    }
    calls += ") " + literal_sp(sh.after) + "\n";
    bodies += ") " + literal_sp(sh.after) + "\n";
    // Further calls: bounded, so that a model that keeps calling still ends.
    const std::string repeat = "{0," + std::to_string(kMaxParallelCalls - 1) + "} ";
    const std::string more = sh.several && parallel ? "(" + literal_sp(sh.separator) + "call)" + repeat : "";
    if (choice == ToolChoice::Auto) return lazy_calls(format, sh, calls, bodies, rules, more, parallel, is_control_token);
    out.prefix = sh.prefix;
    out.gbnf = "root ::= " + literal_sp(sh.open) + "call " + more + literal_sp(sh.close) + "\n" + calls + rules;
    return out;
}

} // namespace ember::tools
