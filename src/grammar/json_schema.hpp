// json_schema.hpp — JSON Schema → GBNF, for the common subset that constrains generation well.
//
// Supported: type (one or a list), properties / required (generated in the order of `properties`;
// required ones always, optional ones may be left out; additional properties are never generated),
// items, minItems, maxItems, enum, const, string minLength / maxLength / pattern (a simple regex:
// literals, classes, `.`, groups, alternation, quantifiers; anchors only at its ends), number and
// integer minimum / maximum / exclusiveMinimum / exclusiveMaximum (integers: any bounds; numbers:
// integer bounds with minimum >= 0), anyOf, oneOf (as anyOf: the alternatives should be disjoint),
// $ref to "#/$defs/..." or "#/definitions/..." (recursion allowed), and `true` / `{}` for any value.
// Annotations (title, description, default, examples, $schema, $id, $comment, format-free metadata)
// are ignored. Anything else is an error naming the keyword and where it is (a JSON pointer), rather
// than a grammar that would silently allow invalid output.
//
// Generated JSON is compact (at most one space between tokens) and numbers have at most 16 integer and
// 6 fraction digits, so that a model cannot wander off into endless whitespace or digits.
#pragma once

#include "grammar/json_value.hpp"

#include <string>
#include <string_view>

namespace ember::grammar {

// Throws Error(EMBER_ERR_INVALID_ARGUMENT) for malformed JSON or schema (with line/column or a JSON
// pointer), Error(EMBER_ERR_UNSUPPORTED) for keywords and patterns outside the subset (named).
std::string json_schema_to_gbnf(std::string_view schema_text);
std::string json_schema_to_gbnf(const JsonValue &schema);

// Any JSON object: OpenAI's response_format {"type": "json_object"}.
std::string json_object_gbnf();

} // namespace ember::grammar
