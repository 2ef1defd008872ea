// tool_call_decode.hpp — the pieces of call syntax every family shares: where a JSON value ends in a
// text that may still be growing, and a call object's name and arguments.
#pragma once

#include "tools/tool_types.hpp"

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

namespace ember::tools {

// The end of the JSON value starting at s[pos] (after whitespace): Complete with the position after it,
// Incomplete when s ends inside it, Invalid when s[pos] cannot start or continue one. Only the
// structure is checked (brackets, strings, escapes); parse_json validates the value.
struct JsonSpan {
    enum Kind { Complete, Incomplete, Invalid } kind;
    size_t begin = 0, end = 0;
};
JsonSpan json_span(std::string_view s, size_t pos);

size_t skip_space(std::string_view s, size_t pos);

// A call from a JSON object {"name", "arguments" | "parameters"} or {"function": {...}} (and "id" when
// present); arguments may be an object or a string holding one. nullopt when it is not such an object.
std::optional<ToolCall> decode_call(const grammar::JsonValue &v);
// A JSON text of one call object, or of an array of them (all must decode). nullopt when it does not
// parse or decode.
std::optional<std::vector<ToolCall>> decode_calls(std::string_view json);

// The length of the longest suffix of s that is a proper prefix of one of `markers` (text to hold back
// while streaming, as the next bytes may complete a marker).
size_t partial_marker_suffix(std::string_view s, const std::vector<std::string_view> &markers);

} // namespace ember::tools
