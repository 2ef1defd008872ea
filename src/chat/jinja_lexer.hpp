// jinja_lexer.hpp — template text to tokens: literal text between tags, and the tokens inside
// `{{ ... }}` and `{% ... %}` (comments `{# ... #}` are dropped).
//
// Whitespace is handled here, as Hugging Face's transformers configures Jinja for chat templates:
//  - `{%-`, `{{-`, `{#-` strip all whitespace (newlines included) before the tag; `-%}`, `-}}`, `-#}`
//    strip all whitespace after it;
//  - trim_blocks: the first newline after a `%}` or `#}` is removed (`+%}` keeps it);
//  - lstrip_blocks: spaces and tabs from the start of a line up to a `{%` or `{#` are removed (`{%+`
//    keeps them).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::jinja {

enum class Tok { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, End };

struct Token {
    Tok type = Tok::End;
    std::string text;   // Text: the literal text; Name/Op: the name or operator; String: the decoded value
    int64_t i = 0;      // Int
    double f = 0;       // Float
    int line = 1, col = 1;
};

// Throws a syntax error (EMBER_ERR_INVALID_ARGUMENT, with line:column) for an unclosed tag, comment or
// string, or a character that starts no token. The last token is End.
std::vector<Token> lex(std::string_view src);

} // namespace ember::jinja
