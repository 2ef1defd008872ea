// json_value.hpp — a small JSON reader for JSON Schemas (and for checking generated JSON in tests).
//
// Strict RFC 8259: no comments, no trailing commas; strings are UTF-8 with escapes decoded; numbers
// keep their text as well as their value. Object members keep their order (a schema's property
// order is the order the grammar generates them in). Nesting is limited (kMaxDepth) so hostile input
// cannot exhaust the stack.
#pragma once

#include "core/json_escape.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ember::grammar {

struct JsonValue {
    enum Type { NUL, BOOL, NUMBER, STRING, ARRAY, OBJECT } type = NUL;
    bool boolean = false;
    double number = 0;
    bool integer = false;   // a NUMBER written without fraction or exponent
    std::string text;       // STRING: the decoded string; NUMBER: as written
    std::vector<JsonValue> items;
    std::vector<std::pair<std::string, JsonValue>> members;

    // Out of line: `members` holds pairs of this type, which the standard library (libc++, and
    // libstdc++ under clang) needs complete where its destructor is instantiated.
    JsonValue();
    ~JsonValue();
    JsonValue(const JsonValue &);
    JsonValue(JsonValue &&) noexcept;
    JsonValue &operator=(const JsonValue &);
    JsonValue &operator=(JsonValue &&) noexcept;

    const JsonValue *get(std::string_view key) const;   // OBJECT member, or nullptr
    // Compact serialization (as a grammar literal for enum and const).
    std::string dump() const;
};

constexpr uint32_t kJsonMaxDepth = 128;

// Throws Error(EMBER_ERR_INVALID_ARGUMENT, "<what>: line L, column C: ...").
JsonValue parse_json(std::string_view text, const char *what = "json");

// json_quote (a string as a JSON literal) is core/json_escape.hpp's.

} // namespace ember::grammar
