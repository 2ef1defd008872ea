// pretokenize.hpp — the BPE pre-tokenizers: each model family's splitting regexes, written out as scans
// over code points so that no regex engine (and no dependence on its Unicode support) is involved.
//
// A family is a sequence of one or more regexes, applied as llama.cpp applies them: the first splits the
// text into its matches and the unmatched stretches between them, each later one splits every piece the
// previous left (a lookahead or `$` sees the end of the piece, not of the text). Where llama.cpp runs a
// regex adapted from the model's tokenizer.json, the scan follows llama.cpp's version, so that token ids
// equal llama.cpp's; the comments say where the two differ.
#pragma once

#include <span>
#include <string_view>
#include <vector>

namespace ember::tok {

enum class PreTokenizer {
    // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
    Gpt2,
    // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
    Llama3,
    Qwen2,          // as Llama3 but \p{N} (one digit per piece) instead of \p{N}{1,3}
    // as Qwen2 with [\p{L}\p{M}]+ for \p{L}+ and [^\s\p{L}\p{M}\p{N}]+ for [^\s\p{L}\p{N}]+ (Qwen3.5, 3.6)
    Qwen35,
    Starcoder,      // \p{N} isolated, then Gpt2
    Falcon,         // [\p{P}$+<=>^~|`]+ isolated, then Gpt2, then [0-9]{3}
    Default,        // llama.cpp's "default": [\p{P}$+<=>^~|]+, then Gpt2, then \p{N}+, then [0-9]{3}
    // [^\r\n\p{L}\p{N}]?U*L+(?:contraction)?|[^\r\n\p{L}\p{N}]?U+L*(?:contraction)?|\p{N}{1,3}
    //   | ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+   (o200k: U upper-case-like, L lower-case-like)
    Gpt4o,
    Tekken,         // as Gpt4o with \p{N} instead of \p{N}{1,3} and no contraction suffix
    // [\r\n], then \s?[cased letters]+, then \s?[ASCII and full-width punctuation]+, then \s+$,
    // then [CJK, Hangul]+, then \p{N}+
    DeepseekLlm,
    DeepseekCoder,  // [\r\n], then \s?\p{L}+, then \s?\p{P}+, then [CJK, Hangul]+, then \p{N}
    // \p{N}{1,3}, then [CJK, kana]+, then [ASCII punctuation][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
    //   | ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
    DeepseekV3,
    Bloom,          //  ?[^(\s|.,!?…。，、।۔،)]+ : words end only at spaces and sentence punctuation
    Viking,         // as Bloom, then \p{N}
    // [^\n]+|[\n]+ : only line breaks cut the text (Gemma 4, whose BPE runs on "▁"-escaped UTF-8 text)
    Gemma4,
};

// One tokenizer.ggml.pre name and what it stands for in llama.cpp.
struct PreTokenizerSpec {
    const char *name;
    PreTokenizer kind;
    bool ignore_merges;   // a piece that is itself a token is taken whole, before any merge
    bool add_bos;         // whether BOS is added when tokenizer.ggml.add_bos_token is absent
    // SentencePiece-style BPE (Gemma 4): spaces become "▁", merges start from UTF-8 characters rather than
    // GPT-2's byte alphabet, bytes of characters left without a token are <0xAB> tokens, and BOS is
    // added whatever tokenizer.ggml.add_bos_token says (as llama.cpp does).
    bool spm_style = false;
};

// Every name the BPE tokenizer accepts (the factory's only source; also what docs and tests list).
std::span<const PreTokenizerSpec> pre_tokenizer_specs();
// The spec of a name, or nullptr when unsupported.
const PreTokenizerSpec *find_pre_tokenizer(std::string_view name);

// Splits text into consecutive, non-empty pieces that cover it exactly. Invalid UTF-8 is kept: each
// ill-formed subpart is one code point of class "other" (neither letter, number, punctuation nor space),
// so its bytes still reach the BPE.
void pretokenize(PreTokenizer kind, std::string_view text, std::vector<std::string_view> &out);

} // namespace ember::tok
