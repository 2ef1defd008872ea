// jinja_error.cpp — the engine's error messages.
#include "chat/jinja_error.hpp"

#include <cstdarg>

namespace ember::jinja {

void syntax_error(int line, int col, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::string msg = vformat(fmt, ap);
    va_end(ap);
    fail(EMBER_ERR_INVALID_ARGUMENT, "template syntax error at line %d:%d: %s", line, col, msg.c_str());
}

void unsupported(int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::string msg = vformat(fmt, ap);
    va_end(ap);
    fail(EMBER_ERR_UNSUPPORTED, "template line %d: %s (outside the Jinja subset ember supports, see docs/chat.md)",
         line, msg.c_str());
}

void render_error(int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::string msg = vformat(fmt, ap);
    va_end(ap);
    fail(EMBER_ERR_INVALID_ARGUMENT, "template line %d: %s", line, msg.c_str());
}

void line_col(std::string_view src, size_t pos, int *line, int *col) {
    int l = 1, c = 1;
    for (size_t i = 0; i < pos && i < src.size(); ++i) {
        if (src[i] == '\n') {
            ++l;
            c = 1;
        } else {
            ++c;
        }
    }
    *line = l;
    *col = c;
}

} // namespace ember::jinja
