// jinja_error.hpp — how the template engine reports problems: an ember::Error whose message names the
// template line (and column for syntax errors), with the status the public API documents.
#pragma once

#include "core/error.hpp"

#include <string_view>

namespace ember::jinja {

// Malformed template text: EMBER_ERR_INVALID_ARGUMENT, "template syntax error at line L:C: ...".
[[noreturn]] void syntax_error(int line, int col, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
// A Jinja construct outside the supported subset: EMBER_ERR_UNSUPPORTED, "template line L: ...".
[[noreturn]] void unsupported(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// A failure while rendering (a type error, a limit, raise_exception): EMBER_ERR_INVALID_ARGUMENT.
[[noreturn]] void render_error(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// 1-based line and column of byte `pos` in `src`.
void line_col(std::string_view src, size_t pos, int *line, int *col);

} // namespace ember::jinja
