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

// A character of the trigger inside a class: hex-escaped so ] ^ - \ need no thought.
std::string class_char(unsigned char c) { return format("\\x%02X", c); }

// What one call of each family looks like, around the name and the arguments.
struct CallShape {
    std::string before_name, between, after;   // before_name NAME between ARGS after
    std::string separator;                     // between two calls
    std::string open, close;                   // around all calls (a JSON array), or ""
    std::string prefix;                        // text the prompt must end with (control-token openers)
    bool several = true;                       // more than one call per reply
};

CallShape shape(Format f) {
    switch (f) {
    case Format::Hermes: return {"<tool_call>\n{\"name\": \"", "\", \"arguments\": ", "}\n</tool_call>", "\n", "", "", "", true};
    case Format::Llama3: return {"{\"name\": \"", "\", \"parameters\": ", "}", "", "", "", "", false};
    case Format::Mistral: return {"{\"name\": \"", "\", \"arguments\": ", "}", ", ", "[", "]", "[TOOL_CALLS]", true};
    case Format::Granite:
    case Format::Phi4: return {"{\"name\": \"", "\", \"arguments\": ", "}", ", ", "[", "]", "<|tool_call|>", true};
    case Format::GptOss: return {"", "", "", "", "", "", "<|channel|>commentary to=functions.", false};
    default: fail(EMBER_ERR_UNSUPPORTED, "the format '%s' has no tool calls", format_name(f));
    }
}

// Rules matching the text of strings not containing `trigger`, which then continue with `after`:
// one rule per matched length of the trigger (the automaton of a substring search), `start` the first.
std::string until_trigger(const std::string &trigger, const std::string &start, const std::string &after) {
    const size_t m = trigger.size();
    // fallback[i]: the longest proper border of trigger[0, i) (Knuth-Morris-Pratt).
    std::vector<size_t> border(m + 1, 0);
    for (size_t i = 1, k = 0; i < m; ++i) {
        while (k > 0 && trigger[i] != trigger[k]) k = border[k];
        if (trigger[i] == trigger[k]) ++k;
        border[i + 1] = k;
    }
    auto next = [&](size_t i, char c) {
        while (i > 0 && trigger[i] != c) i = border[i];
        return trigger[i] == c ? i + 1 : 0;
    };
    std::string chars;
    for (char c : trigger)
        if (chars.find(c) == std::string::npos) chars += c;
    std::string others = "[^";
    for (char c : chars) others += class_char(static_cast<unsigned char>(c));
    others += "]";
    std::string out;
    for (size_t i = 0; i < m; ++i) {
        out += start + "-" + std::to_string(i) + " ::= \"\" | " + others + " " + start + "-0";
        for (char c : chars) {
            const size_t j = next(i, c);
            out += " | \"" + class_char(static_cast<unsigned char>(c)) + "\" " + (j == m ? after : start + "-" + std::to_string(j));
        }
        out += "\n";
    }
    return out;
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
                         bool parallel) {
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
    std::string calls = "call ::= (";
    for (size_t i = 0; i < allowed.size(); ++i) {
        const std::string p = "t" + std::to_string(i) + "-";
        rules += prefix_rules(grammar::json_schema_to_gbnf(allowed[i]->parameters), p) + "\n";
        if (format == Format::GptOss) {
            // The name is in the prompt's prefix; the grammar is the arguments alone.
            if (allowed.size() > 1)
                fail(EMBER_ERR_UNSUPPORTED, "gpt-oss writes the tool's name between control tokens: a grammar can "
                     "force one named tool, not a choice among %zu", allowed.size());
            if (choice == ToolChoice::Auto)
                fail(EMBER_ERR_UNSUPPORTED, "gpt-oss opens calls with control tokens: tool_choice auto runs without a grammar");
            out.prefix = sh.prefix + allowed[i]->name + " <|constrain|>json<|message|>";
            out.gbnf = "root ::= " + p + "root\n" + rules;
            return out;
        }
        calls += std::string(i ? " | " : "") + literal(sh.before_name + allowed[i]->name + sh.between) + " " + p + "root";
    }
    calls += ") " + literal_sp(sh.after) + "\n";
    // Further calls: bounded, so that a model that keeps calling still ends.
    const std::string repeat = "{0," + std::to_string(kMaxParallelCalls - 1) + "} ";
    const std::string more = sh.several && parallel ? "(" + literal_sp(sh.separator) + "call)" + repeat : "";
    if (choice == ToolChoice::Auto) {
        if (format == Format::Hermes) {
            // Free text; the opener switches the call's grammar on (its text is in `call`'s first literal).
            const std::string opener = "<tool_call>";
            std::string call_after = "call ::= (";
            for (size_t i = 0; i < allowed.size(); ++i)
                call_after += std::string(i ? " | " : "") +
                              literal(sh.before_name.substr(opener.size()) + allowed[i]->name + sh.between) + " t" +
                              std::to_string(i) + "-root";
            call_after += ") " + literal(sh.after) + "\n";
            out.gbnf = "root ::= free-0\n" + until_trigger(opener, "free", "first-call") +
                       "first-call ::= call " + (parallel ? "(\"\\n\" " + literal(opener) + " call)" + repeat : "") +
                       "\n" + call_after + rules;
            return out;
        }
        if (format == Format::Llama3) {
            // A reply is either a call (a JSON object first) or text that does not start with '{'.
            out.gbnf = "root ::= call | text\ntext ::= ([^{] .*)?\n" + calls + rules;
            return out;
        }
        fail(EMBER_ERR_UNSUPPORTED, "the format '%s' opens calls with a control token: tool_choice auto runs without a "
             "grammar", format_name(format));
    }
    out.prefix = sh.prefix;
    out.gbnf = "root ::= " + literal_sp(sh.open) + "call " + more + literal_sp(sh.close) + "\n" + calls + rules;
    return out;
}

} // namespace ember::tools
