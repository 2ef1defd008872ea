// json_escape.hpp — a string as a JSON string literal, for every part of the library that writes JSON
// (the Jinja engine's tojson, JSON Schema constants and enums as grammar literals).
#pragma once

#include <string>
#include <string_view>

namespace ember {

// Appends s in quotes with JSON's escapes (\" \\ \n \r \t \b \f, other control characters as \u00XX);
// other bytes, UTF-8 included, are copied as they are.
void json_quote(std::string &out, std::string_view s);

} // namespace ember
