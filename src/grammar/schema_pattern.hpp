// schema_pattern.hpp — a JSON Schema `pattern` (a simple regular expression) as a GBNF expression for
// the content of a JSON string.
//
// Supported: literal characters, escaped punctuation, \d \w \s \D \W \S, classes [a-z] [^...], `.`,
// groups ( ) and (?: ), alternation, quantifiers * + ? {m} {m,} {m,n} (a trailing lazy `?` is
// ignored), and ^ / $ only at the very start / end. The grammar generates strings that match the whole
// pattern (which also match it in JSON Schema's search sense). Characters that JSON must escape are
// generated escaped (`"`, `\`) or not at all (control characters; \s generates only a space).
#pragma once

#include <string>

namespace ember::grammar {

// Throws Error(EMBER_ERR_INVALID_ARGUMENT) for a malformed pattern and Error(EMBER_ERR_UNSUPPORTED)
// for constructs beyond the subset (backreferences, lookaround, \b, anchors inside), with `ptr`.
std::string pattern_to_gbnf(const std::string &pattern, const std::string &ptr);

} // namespace ember::grammar
