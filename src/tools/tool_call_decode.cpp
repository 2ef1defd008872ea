// tool_call_decode.cpp — JSON spans and call objects (tool_call_decode.hpp).
#include "tools/tool_call_decode.hpp"

#include "core/error.hpp"

namespace ember::tools {

size_t skip_space(std::string_view s, size_t pos) {
    while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\n' || s[pos] == '\r' || s[pos] == '\t')) ++pos;
    return pos;
}

JsonSpan json_span(std::string_view s, size_t pos) {
    const size_t begin = skip_space(s, pos);
    if (begin >= s.size()) return {JsonSpan::Incomplete, begin, begin};
    const char c0 = s[begin];
    if (c0 != '{' && c0 != '[') {
        // A scalar: a string, or a literal / number that ends at a delimiter.
        if (c0 == '"') {
            for (size_t i = begin + 1; i < s.size(); ++i) {
                if (s[i] == '\\') ++i;
                else if (s[i] == '"') return {JsonSpan::Complete, begin, i + 1};
            }
            return {JsonSpan::Incomplete, begin, s.size()};
        }
        if (!(c0 == '-' || (c0 >= '0' && c0 <= '9') || c0 == 't' || c0 == 'f' || c0 == 'n'))
            return {JsonSpan::Invalid, begin, begin};
        size_t i = begin;
        while (i < s.size() && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' && s[i] != '\n' &&
               s[i] != '\r' && s[i] != '\t')
            ++i;
        return {i < s.size() ? JsonSpan::Complete : JsonSpan::Incomplete, begin, i};
    }
    // Brackets: count depth outside strings. Mismatched brackets are left to parse_json.
    uint32_t depth = 0;
    bool in_string = false;
    for (size_t i = begin; i < s.size(); ++i) {
        const char c = s[i];
        if (in_string) {
            if (c == '\\') ++i;
            else if (c == '"') in_string = false;
            continue;
        }
        if (c == '"') in_string = true;
        else if (c == '{' || c == '[') {
            if (++depth > grammar::kJsonMaxDepth) return {JsonSpan::Invalid, begin, i};
        } else if (c == '}' || c == ']') {
            if (--depth == 0) return {JsonSpan::Complete, begin, i + 1};
        }
    }
    return {JsonSpan::Incomplete, begin, s.size()};
}

namespace {

const grammar::JsonValue *string_member(const grammar::JsonValue &v, std::string_view key) {
    const grammar::JsonValue *m = v.get(key);
    return m && m->type == grammar::JsonValue::STRING ? m : nullptr;
}

} // namespace

std::optional<ToolCall> decode_call(const grammar::JsonValue &v) {
    using J = grammar::JsonValue;
    if (v.type != J::OBJECT) return std::nullopt;
    const J *fn = v.get("function");
    const J &body = fn && fn->type == J::OBJECT ? *fn : v;
    const J *name = string_member(body, "name");
    if (!name || name->text.empty()) return std::nullopt;
    const J *args = body.get("arguments");
    if (!args) args = body.get("parameters");
    ToolCall c;
    c.name = name->text;
    if (!args) {
        c.arguments = "{}";
    } else if (args->type == J::OBJECT) {
        c.arguments = args->dump();
    } else if (args->type == J::STRING) {
        // Some models write arguments as a string holding the JSON object (as OpenAI's API carries it).
        try {
            const J inner = grammar::parse_json(args->text, "arguments");
            if (inner.type != J::OBJECT) return std::nullopt;
            c.arguments = inner.dump();
        } catch (const Error &) {
            return std::nullopt;
        }
    } else {
        return std::nullopt;
    }
    if (const J *id = string_member(v, "id")) c.id = id->text;
    return c;
}

std::optional<std::vector<ToolCall>> decode_calls(std::string_view json) {
    grammar::JsonValue v;
    try {
        v = grammar::parse_json(json, "tool call");
    } catch (const Error &) {
        return std::nullopt;
    }
    std::vector<ToolCall> calls;
    if (v.type == grammar::JsonValue::ARRAY) {
        for (const grammar::JsonValue &item : v.items) {
            auto c = decode_call(item);
            if (!c) return std::nullopt;
            calls.push_back(std::move(*c));
        }
        if (calls.empty()) return std::nullopt;
        return calls;
    }
    auto c = decode_call(v);
    if (!c) return std::nullopt;
    calls.push_back(std::move(*c));
    return calls;
}

size_t partial_marker_suffix(std::string_view s, const std::vector<std::string_view> &markers) {
    size_t best = 0;
    for (std::string_view m : markers)
        for (size_t n = std::min(s.size(), m.size() - 1); n > best; --n)
            if (s.substr(s.size() - n) == m.substr(0, n)) {
                best = n;
                break;
            }
    return best;
}

} // namespace ember::tools
