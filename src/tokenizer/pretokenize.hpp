// pretokenize.hpp — the BPE pre-tokenizers: each model family's splitting regex, written out as a scan
// over code points so that no regex engine (and no dependence on its Unicode support) is involved.
#pragma once

#include <string_view>
#include <vector>

namespace ember::tok {

enum class PreTokenizer {
    Gpt2,    // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
    Llama3,  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
    Qwen2,   // as Llama3 but \p{N} (one digit per piece) instead of \p{N}{1,3}
};

// Splits text into consecutive, non-empty pieces that cover it exactly (the matches of the regex, which
// matches somewhere at every position). Invalid UTF-8 is kept: each ill-formed subpart is one
// code point of class "other" (neither letter, number nor space), so its bytes still reach the BPE.
void pretokenize(PreTokenizer kind, std::string_view text, std::vector<std::string_view> &out);

} // namespace ember::tok
