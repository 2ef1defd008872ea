// jinja_builtins.hpp — filters (`x | trim`), tests (`x is string`), methods (`s.strip()`, `d.items()`)
// and global functions (`raise_exception`, `namespace`, `range`) of the supported subset.
#pragma once

#include "chat/jinja_value.hpp"

#include <string_view>

namespace ember::jinja {

// Names of the filters and tests of the subset; others are reported as unsupported (with their line)
// when rendering reaches them.
bool is_filter(std::string_view name);
bool is_test(std::string_view name);

Value apply_filter(const std::string &name, const Value &in, CallArgs &args, Context &ctx);
bool apply_test(const std::string &name, const Value &v, CallArgs &args, Context &ctx);
// The method `name` of obj bound to it (a Function value), or Undefined when obj has no such
// attribute; an unsupported method of a string, list or dict is an EMBER_ERR_UNSUPPORTED error.
Value method(const Value &obj, const std::string &name, int line);
// A global function by name (raise_exception, namespace, range, dict, strftime_now), or Undefined.
Value global_function(std::string_view name);

// The items that a for loop or a filter visits: a list's elements, a dict's keys, a string's characters
// (counted against the render's limits); Undefined gives none. Anything else is an error naming `what`
// (a filter's name), or a for loop's "not iterable" when `what` is NULL.
List items_of(const Value &v, int line, Context &ctx, const char *what = nullptr);

// Python's str.strip() family on whitespace ("chars" empty) or on the given characters.
std::string strip(std::string_view s, std::string_view chars, bool left, bool right);
// JSON as Python's json.dumps(v, ensure_ascii=False, indent=indent) writes it (indent < 0: none).
std::string to_json(const Value &v, int indent, int line);

} // namespace ember::jinja
