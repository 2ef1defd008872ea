// jinja_lexer.cpp — see jinja_lexer.hpp.
#include "chat/jinja_lexer.hpp"

#include "chat/jinja_error.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace ember::jinja {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Line and column of increasing positions, without rescanning from the start each time.
class Locator {
public:
    explicit Locator(std::string_view src) : src_(src) {}
    void at(size_t pos, int *line, int *col) {
        if (pos < pos_) { pos_ = 0; line_ = 1; col_ = 1; }
        for (; pos_ < pos && pos_ < src_.size(); ++pos_) {
            if (src_[pos_] == '\n') { ++line_; col_ = 1; } else { ++col_; }
        }
        *line = line_;
        *col = col_;
    }

private:
    std::string_view src_;
    size_t pos_ = 0;
    int line_ = 1, col_ = 1;
};

void append_utf8(std::string &out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

class Lexer {
public:
    explicit Lexer(std::string_view src) : src_(src), loc_(src) {}

    std::vector<Token> run() {
        size_t pos = 0;
        bool trim_next_newline = false;   // trim_blocks after the previous %} or #}
        bool strip_next = false;          // a -}} -%} -#} before this text
        while (pos <= src_.size()) {
            // The previous tag's "-%}" eats all whitespace after it; trim_blocks one newline.
            if (strip_next) {
                while (pos < src_.size() && is_space(src_[pos])) ++pos;
            } else if (trim_next_newline && pos < src_.size() && src_[pos] == '\n') {
                ++pos;
            }
            strip_next = trim_next_newline = false;
            const size_t k = find_tag(pos);
            std::string text(src_.substr(pos, (k == std::string_view::npos ? src_.size() : k) - pos));
            const bool line_starting = pos == 0 || src_[pos - 1] == '\n';
            if (k == std::string_view::npos) {
                emit_text(std::move(text), pos);
                break;
            }
            const char kind = src_[k + 1];
            const char mod = k + 2 < src_.size() ? src_[k + 2] : '\0';
            if (mod == '-') {
                while (!text.empty() && is_space(text.back())) text.pop_back();
            } else if ((kind == '%' || kind == '#') && mod != '+') {
                // lstrip_blocks: only spaces/tabs between the line's start and the tag.
                const size_t nl = text.rfind('\n');
                const size_t l = nl == std::string::npos ? 0 : nl + 1;
                if (l > 0 || line_starting) {
                    bool blank = true;
                    for (size_t i = l; i < text.size(); ++i)
                        if (text[i] != ' ' && text[i] != '\t') { blank = false; break; }
                    if (blank) text.resize(l);
                }
            }
            emit_text(std::move(text), pos);
            size_t p = k + 2 + ((mod == '-' || mod == '+') ? 1 : 0);
            if (kind == '#') {
                const size_t c = src_.find("#}", p);
                if (c == std::string_view::npos) error_at(k, "unclosed comment '{#'");
                strip_next = c > p && src_[c - 1] == '-';
                trim_next_newline = !(c > p && src_[c - 1] == '+');
                pos = c + 2;
                continue;
            }
            push(kind == '{' ? Tok::VarBegin : Tok::BlockBegin, k);
            pos = lex_tag(p, kind, k, &strip_next, &trim_next_newline);
        }
        Token end;
        end.type = Tok::End;
        loc_.at(src_.size(), &end.line, &end.col);
        toks_.push_back(std::move(end));
        return std::move(toks_);
    }

private:
    // The next "{{", "{%" or "{#" at or after pos.
    size_t find_tag(size_t pos) const {
        for (size_t k = src_.find('{', pos); k != std::string_view::npos; k = src_.find('{', k + 1))
            if (k + 1 < src_.size() && (src_[k + 1] == '{' || src_[k + 1] == '%' || src_[k + 1] == '#')) return k;
        return std::string_view::npos;
    }

    void emit_text(std::string text, size_t pos) {
        if (text.empty()) return;
        Token t;
        t.type = Tok::Text;
        t.text = std::move(text);
        loc_.at(pos, &t.line, &t.col);
        toks_.push_back(std::move(t));
    }

    Token &push(Tok type, size_t pos) {
        Token t;
        t.type = type;
        loc_.at(pos, &t.line, &t.col);
        toks_.push_back(std::move(t));
        return toks_.back();
    }

    [[noreturn]] void error_at(size_t pos, const char *what) {
        int line, col;
        line_col(src_, pos, &line, &col);
        syntax_error(line, col, "%s", what);
    }

    // Tokens inside a tag opened at `open` (kind '{' or '%'), from p; returns the position after the close.
    size_t lex_tag(size_t p, char kind, size_t open, bool *strip_next, bool *trim_next_newline) {
        std::string brackets;   // open ( [ { inside the tag: "}}" closes a dict there, not the tag
        const char close_first = kind == '{' ? '}' : '%';
        for (;;) {
            while (p < src_.size() && is_space(src_[p])) ++p;
            if (p >= src_.size()) error_at(open, kind == '{' ? "unclosed '{{'" : "unclosed '{%'");
            const char c = src_[p];
            if (brackets.empty()) {
                // "-}}" "+%}" "}}" "%}"
                size_t q = p;
                char mod = '\0';
                if ((c == '-' || c == '+') && p + 2 < src_.size() && src_[p + 1] == close_first && src_[p + 2] == '}') {
                    mod = c;
                    q = p + 1;
                }
                if (q + 1 < src_.size() && src_[q] == close_first && src_[q + 1] == '}') {
                    push(kind == '{' ? Tok::VarEnd : Tok::BlockEnd, p);
                    *strip_next = mod == '-';
                    *trim_next_newline = kind == '%' && mod != '+';
                    return q + 2;
                }
            }
            if (is_name_start(c)) {
                size_t e = p;
                while (e < src_.size() && (is_name_start(src_[e]) || is_digit(src_[e]))) ++e;
                push(Tok::Name, p).text = std::string(src_.substr(p, e - p));
                p = e;
            } else if (is_digit(c)) {
                p = lex_number(p);
            } else if (c == '\'' || c == '"') {
                p = lex_string(p);
            } else {
                static const char *const two[] = {"//", "**", "==", "!=", "<=", ">="};
                std::string op;
                for (const char *t : two)
                    if (src_.compare(p, 2, t) == 0) op = t;
                if (op.empty()) {
                    if (!std::strchr("+-*/%~<>=()[]{}.,:|", c)) {
                        std::string msg = "unexpected character '";
                        msg += c;
                        msg += "' in a tag";
                        error_at(p, msg.c_str());
                    }
                    op = std::string(1, c);
                }
                if (op == "(" || op == "[" || op == "{") {
                    brackets += op[0];
                } else if (op == ")" || op == "]" || op == "}") {
                    const char want = op == ")" ? '(' : op == "]" ? '[' : '{';
                    if (brackets.empty() || brackets.back() != want) error_at(p, "unbalanced bracket");
                    brackets.pop_back();
                }
                push(Tok::Op, p).text = op;
                p += op.size();
            }
        }
    }

    size_t lex_number(size_t p) {
        size_t e = p;
        while (e < src_.size() && (is_digit(src_[e]) || src_[e] == '_')) ++e;
        bool is_float = false;
        if (e + 1 < src_.size() && src_[e] == '.' && is_digit(src_[e + 1])) {
            is_float = true;
            ++e;
            while (e < src_.size() && (is_digit(src_[e]) || src_[e] == '_')) ++e;
        }
        if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
            size_t x = e + 1;
            if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
            if (x < src_.size() && is_digit(src_[x])) {
                is_float = true;
                e = x;
                while (e < src_.size() && is_digit(src_[e])) ++e;
            }
        }
        std::string digits;
        for (size_t i = p; i < e; ++i)
            if (src_[i] != '_') digits += src_[i];
        Token &t = push(is_float ? Tok::Float : Tok::Int, p);
        errno = 0;
        if (is_float) {
            t.f = std::strtod(digits.c_str(), nullptr);
        } else {
            t.i = std::strtoll(digits.c_str(), nullptr, 10);
            if (errno == ERANGE) error_at(p, "integer literal out of range");
        }
        return e;
    }

    size_t lex_string(size_t p) {
        const char q = src_[p];
        std::string out;
        size_t i = p + 1;
        for (;;) {
            if (i >= src_.size()) error_at(p, "unclosed string literal");
            const char c = src_[i];
            if (c == q) break;
            if (c != '\\') {
                out += c;
                ++i;
                continue;
            }
            if (i + 1 >= src_.size()) error_at(p, "unclosed string literal");
            const char e = src_[i + 1];
            i += 2;
            switch (e) {
            case 'n': out += '\n'; break;
            case 't': out += '\t'; break;
            case 'r': out += '\r'; break;
            case '0': out += '\0'; break;
            case 'a': out += '\a'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'v': out += '\v'; break;
            case '\\': out += '\\'; break;
            case '\'': out += '\''; break;
            case '"': out += '"'; break;
            case '\n': break;   // a backslash-newline continues the line
            case 'x':
            case 'u':
            case 'U': {
                const int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
                uint32_t cp = 0;
                for (int d = 0; d < n; ++d) {
                    const int h = i < src_.size() ? hex_value(src_[i]) : -1;
                    if (h < 0) error_at(i, "malformed \\x, \\u or \\U escape in a string");
                    cp = cp * 16 + static_cast<uint32_t>(h);
                    ++i;
                }
                if (cp > 0x10FFFF) error_at(i, "escape beyond U+10FFFF in a string");
                // A surrogate has no UTF-8 form: written out it would make the output invalid UTF-8.
                if (cp >= 0xD800 && cp <= 0xDFFF) error_at(i, "escape of a surrogate (U+D800..U+DFFF) in a string");
                append_utf8(out, cp);
                break;
            }
            default:   // Python keeps unknown escapes as they are
                out += '\\';
                out += e;
            }
        }
        push(Tok::String, p).text = std::move(out);
        return i + 1;
    }

    std::string_view src_;
    Locator loc_;
    std::vector<Token> toks_;
};

} // namespace

std::vector<Token> lex(std::string_view src) {
    // As Jinja reads a template: "\r\n" and "\r" become "\n", and one newline at the very end is dropped
    // (keep_trailing_newline is off in transformers' environment).
    std::string norm;
    norm.reserve(src.size());
    for (size_t i = 0; i < src.size(); ++i) {
        if (src[i] == '\r') {
            norm += '\n';
            if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
        } else {
            norm += src[i];
        }
    }
    if (!norm.empty() && norm.back() == '\n') norm.pop_back();
    return Lexer(norm).run();
}

} // namespace ember::jinja
