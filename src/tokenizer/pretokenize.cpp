// pretokenize.cpp — the pre-tokenizer regexes as hand-written matchers.
//
// Each matcher is called at a position of a piece and returns where the regex's match starting there
// ends (the position itself when none starts there), trying the regex's alternatives in order as a
// backtracking engine would (leftmost alternative that matches wins; quantifiers are greedy). The
// comments name the alternative each branch stands for. A family is a list of stages (pretokenize.hpp).
#include "tokenizer/pretokenize.hpp"

#include "core/error.hpp"
#include "tokenizer/unicode.hpp"

#include <algorithm>
#include <cstdint>

namespace ember::tok {

namespace {

// The text as code points, with the byte offset where each starts (offs has one extra entry: the end).
// 9 bytes per code point: offsets are 32-bit (pretokenize refuses 4 GiB of text; the tokenizer's own
// limit is far lower).
struct CpText {
    std::vector<uint32_t> cps;
    std::vector<CpClass> cls;
    std::vector<uint32_t> offs;

    explicit CpText(std::string_view text) {
        const auto *p = reinterpret_cast<const uint8_t *>(text.data());
        cps.reserve(text.size());
        cls.reserve(text.size());
        offs.reserve(text.size() + 1);
        size_t i = 0;
        while (i < text.size()) {
            const Utf8Decoded d = utf8_decode(p + i, text.size() - i);
            // U+FFFD stands in for invalid bytes: it is "other" like them, and is none of the characters
            // the matchers compare against.
            const uint32_t cp = d.kind == Utf8Decoded::Valid ? d.cp : kReplacementChar;
            cps.push_back(cp);
            cls.push_back(cp_class(cp));
            offs.push_back(uint32_t(i));
            i += d.len;
        }
        offs.push_back(uint32_t(text.size()));
    }
    size_t size() const { return cps.size(); }
};

struct CpSpan {
    uint32_t first, last;
};

bool in_spans(uint32_t c, std::span<const CpSpan> spans) {
    const auto it = std::upper_bound(spans.begin(), spans.end(), c,
                                     [](uint32_t x, const CpSpan &s) { return x < s.first; });
    return it != spans.begin() && c <= std::prev(it)->last;
}

// DeepSeek LLM's letter class: the cased letters (Lu, Ll, Lt) of the Unicode version its regex was
// written from, spelled out as ranges in that regex.
constexpr CpSpan kDeepseekLetters[] = {
    {0x41, 0x5A}, {0x61, 0x7A}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA}, {0x1BC, 0x1BF},
    {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377}, {0x37B, 0x37D}, {0x37F, 0x37F},
    {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C}, {0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481},
    {0x48A, 0x52F}, {0x531, 0x556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15}, {0x1F18, 0x1F1D},
    {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D},
    {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC},
    {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102},
    {0x2107, 0x2107}, {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126},
    {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149},
    {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3},
    {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F}, {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF},
    {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3},
    {0x104D8, 0x104FB}, {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};
// DeepSeek LLM's punctuation class [!-/:-~！-／：-～‘-‟　-。] (ASCII from '!' to '~' without digits, so
// letters too: the class runs on pieces the letter stage already made).
constexpr CpSpan kDeepseekPunct[] = {
    {0x21, 0x2F}, {0x3A, 0x7E}, {0x2018, 0x201F}, {0x3000, 0x3002}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E},
};
// [一-龥ࠀ-一가-퟿]: U+0800..U+9FA5 and Hangul U+AC00..U+D7FF (DeepSeek LLM and Coder).
constexpr CpSpan kDeepseekCjk[] = {{0x0800, 0x9FA5}, {0xAC00, 0xD7FF}};

constexpr uint32_t kNoCp = 0xFFFFFFFFu;

// What a regex sees: the code points of one piece, [.., end); nothing exists beyond end.
class Scan {
public:
    Scan(const CpText &t, size_t end) : t_(t), end_(end) {}

    size_t end() const { return end_; }
    uint32_t cp(size_t i) const { return i < end_ ? t_.cps[i] : kNoCp; }
    bool is(size_t i, CpClass c) const { return i < end_ && t_.cls[i] == c; }
    bool letter(size_t i) const { return is(i, CpClass::Letter); }
    bool number(size_t i) const { return is(i, CpClass::Number); }
    bool space(size_t i) const { return is(i, CpClass::Space); }
    bool punct(size_t i) const { return is(i, CpClass::Punct); }
    bool mark(size_t i) const { return is(i, CpClass::Mark); }
    // [^\s\p{L}\p{N}]
    bool other(size_t i) const {
        return i < end_ && t_.cls[i] != CpClass::Letter && t_.cls[i] != CpClass::Number && t_.cls[i] != CpClass::Space;
    }
    bool newline(size_t i) const { return cp(i) == '\r' || cp(i) == '\n'; }
    bool ascii_digit(size_t i) const { return cp(i) >= '0' && cp(i) <= '9'; }
    // A code point of one of the spans. llama.cpp runs regexes without \p{..} on the code points with
    // every non-ASCII White_Space replaced by U+000B, so such a class never matches a space (U+3000 is
    // in DeepSeek's punctuation class, for instance, and never matches there).
    bool in(size_t i, std::span<const CpSpan> spans) const {
        return i < end_ && t_.cls[i] != CpClass::Space && in_spans(t_.cps[i], spans);
    }

    template <class Pred> size_t run(size_t i, Pred p) const {
        while (i < end_ && p(i)) ++i;
        return i;
    }
    size_t run(size_t i, CpClass c) const {
        while (is(i, c)) ++i;
        return i;
    }
    // \p{N}{1,max} at a number: a bounded run (scanning the whole run each time would be quadratic).
    size_t numbers_upto(size_t i, size_t max) const {
        size_t j = i;
        while (j - i < max && number(j)) ++j;
        return j;
    }
    size_t others(size_t i) const {
        return run(i, [this](size_t k) { return other(k); });
    }

    // 's|'t|'re|'ve|'m|'ll|'d, optionally ignoring ASCII case; 0 if none matches at i.
    size_t contraction(size_t i, bool ignore_case) const {
        if (cp(i) != '\'') return 0;
        auto low = [&](size_t k) {
            const uint32_t c = cp(k);
            return ignore_case && c >= 'A' && c <= 'Z' ? c + 32 : c;
        };
        const uint32_t a = low(i + 1);
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
        const uint32_t b = low(i + 2);
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
        return 0;
    }

    // \s+(?!\S) falling back to \s+, at a space: a run of spaces that reaches the end of the piece is
    // taken whole; otherwise the last space is left to join the next piece, unless it is the only one.
    size_t trailing_spaces(size_t i) const {
        const size_t j = run(i, CpClass::Space);
        if (j == end_) return j;
        return j - i >= 2 ? j - 1 : j;
    }

    // \s*[\r\n]+|\s+(?!\S)|\s+ at a space: spaces up to and including the last line break of the run
    // when it has one, else trailing_spaces.
    size_t space_tail(size_t i) const {
        size_t after_newline = 0;
        for (size_t j = i; space(j); ++j)
            if (newline(j)) after_newline = j + 1;
        return after_newline ? after_newline : trailing_spaces(i);
    }

    // " ?[^\s\p{L}\p{N}]+" followed by [\r\n]* (or [\r\n/]* when slash); i itself when it does not match.
    // With marks_apart the class is [^\s\p{L}\p{M}\p{N}]: a mark ends the run.
    size_t punct_then_newlines(size_t i, bool slash, bool marks_apart = false) const {
        auto in_class = [&](size_t k) { return other(k) && !(marks_apart && mark(k)); };
        const size_t k = cp(i) == ' ' ? i + 1 : i;
        if (!in_class(k)) return i;
        size_t j = run(k, in_class);
        while (newline(j) || (slash && cp(j) == '/')) ++j;
        return j;
    }

private:
    const CpText &t_;
    const size_t end_;
};

// ---- single regexes ----------------------------------------------------------------------------------

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t match_gpt2(const Scan &s, size_t i) {
    if (size_t e = s.contraction(i, false)) return e;
    // An optional space joins the run that follows it.
    const size_t k = s.cp(i) == ' ' ? i + 1 : i;
    if (s.letter(k)) return s.run(k, CpClass::Letter);
    if (s.number(k)) return s.run(k, CpClass::Number);
    if (s.other(k)) return s.others(k);
    return s.trailing_spaces(i);
}

// Llama 3 (MaxDigits 3) and Qwen2 (1): (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
//   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Qwen3.5 (1, Marks): words are [\p{L}\p{M}]+ and the punctuation run is [^\s\p{L}\p{M}\p{N}]+, so a
// combining mark stays with the letters around it (a mark is still the optional character before a word).
template <size_t MaxDigits, bool Marks = false> size_t match_llama3(const Scan &s, size_t i) {
    if (size_t e = s.contraction(i, true)) return e;
    auto word = [&](size_t k) { return s.letter(k) || (Marks && s.mark(k)); };
    // [^\r\n\p{L}\p{N}]?\p{L}+ : one leading non-letter, non-digit (space, punctuation...) joins a word.
    if (word(i)) return s.run(i, word);
    if (!s.newline(i) && !s.number(i) && word(i + 1)) return s.run(i + 1, word);
    if (s.number(i)) return s.numbers_upto(i, MaxDigits);
    if (size_t e = s.punct_then_newlines(i, false, Marks); e > i) return e;
    return s.space_tail(i);
}

// o200k (GPT-4o, MaxDigits 3, contractions after words) and Tekken (1, none). The tokenizer.json regex
// splits words at case changes with [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|...;
// llama.cpp runs it as ((?=\p{L})[^a-z])*((?=\p{L})[^A-Z])+ | ((?=\p{L})[^a-z])+((?=\p{L})[^A-Z])*,
// where only ASCII letters have a case ("upper-like" U: a letter but not a-z; "lower-like" L: a letter
// but not A-Z; other letters are both) and marks are not letters. That version is written out here.
template <size_t MaxDigits, bool Contractions> size_t match_o200k(const Scan &s, size_t i) {
    auto upper_like = [&](size_t k) { return s.letter(k) && !(s.cp(k) >= 'a' && s.cp(k) <= 'z'); };
    auto lower_like = [&](size_t k) { return s.letter(k) && !(s.cp(k) >= 'A' && s.cp(k) <= 'Z'); };
    // [^\r\n\p{L}\p{N}]? before either word form: the words start at q.
    const size_t q = s.letter(i) ? i : (!s.newline(i) && !s.number(i) ? i + 1 : i);
    if (s.letter(q)) {
        const size_t r = s.run(q, upper_like);
        size_t m = 0;
        if (lower_like(r)) {
            m = s.run(r, lower_like);   // U*L+ with every U the star took
        } else {
            // The star gives back letters until one that L+ also takes: the last "both" letter.
            for (size_t k = r; k > q && !m; --k)
                if (lower_like(k - 1)) m = k;
            if (!m) m = r;   // U+L*, with no L after the U run
        }
        if (Contractions)
            if (size_t e = s.contraction(m, true)) return e;
        return m;
    }
    if (s.number(i)) return s.numbers_upto(i, MaxDigits);
    if (size_t e = s.punct_then_newlines(i, true); e > i) return e;
    return s.space_tail(i);
}

size_t match_digit(const Scan &s, size_t i) { return s.number(i) ? i + 1 : i; }          // \p{N}
size_t match_digits(const Scan &s, size_t i) { return s.run(i, CpClass::Number); }       // \p{N}+
size_t match_ascii_digits3(const Scan &s, size_t i) {                                     // [0-9]{3}
    return s.ascii_digit(i) && s.ascii_digit(i + 1) && s.ascii_digit(i + 2) ? i + 3 : i;
}
size_t match_newline(const Scan &s, size_t i) { return s.newline(i) ? i + 1 : i; }      // [\r\n]

// [\p{P}$+<=>^~|]+ (llama.cpp's default) and [\p{P}$+<=>^~|`]+ (Falcon).
template <bool Backtick> size_t match_punct_run(const Scan &s, size_t i) {
    return s.run(i, [&](size_t k) {
        const uint32_t c = s.cp(k);
        return s.punct(k) || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' || c == '~' ||
               c == '|' || (Backtick && c == '`');
    });
}

// \s?[class]+ (or " ?[class]+" when only_char is given) for a class given by a predicate.
template <class Pred> size_t space_then_run(const Scan &s, size_t i, Pred in_class, uint32_t only_char = 0) {
    const bool lead = only_char ? s.cp(i) == only_char : s.space(i);
    if (lead && in_class(i + 1)) return s.run(i + 1, in_class);
    return s.run(i, in_class);
}
size_t match_deepseek_letters(const Scan &s, size_t i) {
    return space_then_run(s, i, [&](size_t k) { return s.in(k, kDeepseekLetters); });
}
size_t match_deepseek_punct(const Scan &s, size_t i) {
    return space_then_run(s, i, [&](size_t k) { return s.in(k, kDeepseekPunct); });
}
size_t match_space_letters(const Scan &s, size_t i) {   // \s?\p{L}+
    return space_then_run(s, i, [&](size_t k) { return s.letter(k); });
}
size_t match_space_punct(const Scan &s, size_t i) {     // \s?\p{P}+
    return space_then_run(s, i, [&](size_t k) { return s.punct(k); });
}
size_t match_cjk(const Scan &s, size_t i) {
    return s.run(i, [&](size_t k) { return s.in(k, kDeepseekCjk); });
}

// [一-龥぀-ゟ゠-ヿ]: CJK U+4E00..U+9FA5, hiragana and katakana U+3040..U+30FF (DeepSeek V3).
constexpr CpSpan kCjkKana[] = {{0x3040, 0x30FF}, {0x4E00, 0x9FA5}};

size_t match_numbers3(const Scan &s, size_t i) { return s.numbers_upto(i, 3); }   // \p{N}{1,3}
size_t match_cjk_kana(const Scan &s, size_t i) {
    return s.run(i, [&](size_t k) { return s.in(k, kCjkKana); });
}

// DeepSeek V3's third regex: [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
//   | ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
size_t match_deepseek_v3(const Scan &s, size_t i) {
    auto ascii_letter = [&](size_t k) {
        const uint32_t c = s.cp(k);
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    };
    const uint32_t c = s.cp(i);
    const bool ascii_mark = (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
                            (c >= 0x7B && c <= 0x7E);
    if (ascii_mark && ascii_letter(i + 1)) return s.run(i + 1, ascii_letter);
    auto punct_symbol = [&](size_t k) { return s.punct(k) || s.is(k, CpClass::Symbol); };
    auto letter_mark = [&](size_t k) { return s.letter(k) || s.mark(k); };
    if (!s.newline(i) && !s.letter(i) && !punct_symbol(i) && letter_mark(i + 1)) return s.run(i + 1, letter_mark);
    if (letter_mark(i)) return s.run(i, letter_mark);
    const size_t k = c == ' ' ? i + 1 : i;
    if (punct_symbol(k)) {
        size_t j = s.run(k, punct_symbol);
        while (s.newline(j)) ++j;
        return j;
    }
    return s.space(i) ? s.space_tail(i) : i;
}

// BLOOM's  ?[^(\s|.,!?…。，、।۔،)]+ (the parentheses and the bar are literal characters of the class).
size_t match_bloom(const Scan &s, size_t i) {
    auto in_class = [&](size_t k) {
        if (k >= s.end() || s.space(k)) return false;
        switch (s.cp(k)) {
        case '(': case '|': case '.': case ',': case '!': case '?': case ')':
        case 0x2026: case 0x3002: case 0xFF0C: case 0x3001: case 0x0964: case 0x06D4: case 0x060C:
            return false;
        default:
            return true;
        }
    };
    return space_then_run(s, i, in_class, ' ');
}

// [^\n]+|[\n]+ : a run of line breaks, or of anything else.
size_t match_newline_runs(const Scan &s, size_t i) {
    const bool nl = s.cp(i) == '\n';
    return s.run(i, [&](size_t k) { return (s.cp(k) == '\n') == nl; });
}

// ---- stages ------------------------------------------------------------------------------------------

// Code points [begin, end) of the text.
// Code points [begin, end) of the text (32-bit like CpText's offsets: the pieces of a multi-stage family
// are held twice between stages).
struct Range {
    uint32_t begin, end;
};

using Stage = void (*)(const CpText &t, const std::vector<Range> &in, std::vector<Range> &out);
// The last stage writes the pieces as text, with no list of ranges in between.
using LastStage = void (*)(const CpText &t, const std::vector<Range> &in, std::string_view text,
                           std::vector<std::string_view> &out);

// One regex over a piece: its matches and the unmatched stretches between them, in order, go to emit
// (a regex search: the leftmost match, then the next one after it).
template <size_t (*Match)(const Scan &, size_t), class Emit> void search(const CpText &t, Range r, Emit &&emit) {
    const Scan s(t, r.end);
    size_t gap = r.begin, i = r.begin;
    while (i < r.end) {
        const size_t e = Match(s, i);
        if (e <= i) {
            ++i;
            continue;
        }
        if (gap < i) emit(gap, i);
        emit(i, e);
        i = gap = e;
    }
    if (gap < r.end) emit(gap, r.end);
}

template <size_t (*Match)(const Scan &, size_t)>
void stage(const CpText &t, const std::vector<Range> &in, std::vector<Range> &out) {
    for (const Range r : in)
        search<Match>(t, r, [&](size_t b, size_t e) { out.push_back({uint32_t(b), uint32_t(e)}); });
}

template <size_t (*Match)(const Scan &, size_t)>
void last_stage(const CpText &t, const std::vector<Range> &in, std::string_view text,
                std::vector<std::string_view> &out) {
    for (const Range r : in)
        search<Match>(t, r, [&](size_t b, size_t e) { out.push_back(text.substr(t.offs[b], t.offs[e] - t.offs[b])); });
}

// \s+$: the run of spaces that ends a piece is split off (the piece stays whole if it is all spaces).
// A stage of its own rather than a matcher: tried at each space, the anchored match would rescan the
// run every time.
void stage_trailing_spaces(const CpText &t, const std::vector<Range> &in, std::vector<Range> &out) {
    for (const Range r : in) {
        uint32_t k = r.end;
        while (k > r.begin && t.cls[k - 1] == CpClass::Space) --k;
        if (k > r.begin && k < r.end) {
            out.push_back({r.begin, k});
            out.push_back({k, r.end});
        } else {
            out.push_back(r);
        }
    }
}

struct Family {
    PreTokenizer kind;
    std::vector<Stage> stages;   // all but the last
    LastStage last;
};

const Family &family_of(PreTokenizer kind) {
    static const Family kFamilies[] = {
        {PreTokenizer::Gpt2, {}, last_stage<match_gpt2>},
        {PreTokenizer::Llama3, {}, last_stage<match_llama3<3>>},
        {PreTokenizer::Qwen2, {}, last_stage<match_llama3<1>>},
        {PreTokenizer::Qwen35, {}, last_stage<match_llama3<1, true>>},
        {PreTokenizer::Starcoder, {stage<match_digit>}, last_stage<match_gpt2>},
        {PreTokenizer::Falcon, {stage<match_punct_run<true>>, stage<match_gpt2>}, last_stage<match_ascii_digits3>},
        {PreTokenizer::Default, {stage<match_punct_run<false>>, stage<match_gpt2>, stage<match_digits>},
         last_stage<match_ascii_digits3>},
        {PreTokenizer::Gpt4o, {}, last_stage<match_o200k<3, true>>},
        {PreTokenizer::Tekken, {}, last_stage<match_o200k<1, false>>},
        {PreTokenizer::DeepseekLlm,
         {stage<match_newline>, stage<match_deepseek_letters>, stage<match_deepseek_punct>, stage_trailing_spaces,
          stage<match_cjk>},
         last_stage<match_digits>},
        {PreTokenizer::DeepseekCoder,
         {stage<match_newline>, stage<match_space_letters>, stage<match_space_punct>, stage<match_cjk>},
         last_stage<match_digit>},
        {PreTokenizer::DeepseekV3, {stage<match_numbers3>, stage<match_cjk_kana>}, last_stage<match_deepseek_v3>},
        {PreTokenizer::Bloom, {}, last_stage<match_bloom>},
        {PreTokenizer::Viking, {stage<match_bloom>}, last_stage<match_digit>},
        {PreTokenizer::Gemma4, {}, last_stage<match_newline_runs>},
    };
    for (const Family &f : kFamilies)
        if (f.kind == kind) return f;
    return kFamilies[0];   // unreachable: every kind is listed
}

// The names llama.cpp gives these families (llama-vocab.cpp), with its per-name settings.
constexpr PreTokenizerSpec kSpecs[] = {
    {"default", PreTokenizer::Default, false, false},
    {"gpt-2", PreTokenizer::Gpt2, false, false},
    {"phi-2", PreTokenizer::Gpt2, false, false},
    {"mpt", PreTokenizer::Gpt2, false, false},
    {"olmo", PreTokenizer::Gpt2, false, false},
    {"jais", PreTokenizer::Gpt2, false, false},
    {"granite-docling", PreTokenizer::Gpt2, false, false},
    {"exaone4", PreTokenizer::Gpt2, false, false},
    {"a.x-4.0", PreTokenizer::Gpt2, false, false},
    {"mellum", PreTokenizer::Gpt2, false, false},
    {"trillion", PreTokenizer::Gpt2, false, false},
    {"llama3", PreTokenizer::Llama3, true, true},
    {"llama-v3", PreTokenizer::Llama3, true, true},
    {"llama-bpe", PreTokenizer::Llama3, true, true},
    {"falcon3", PreTokenizer::Llama3, true, true},
    {"pixtral", PreTokenizer::Llama3, true, true},
    {"lfm2", PreTokenizer::Llama3, true, true},
    {"falcon-h1", PreTokenizer::Llama3, true, true},
    {"midm-2.0", PreTokenizer::Llama3, true, true},
    {"dbrx", PreTokenizer::Llama3, false, false},
    {"smaug-bpe", PreTokenizer::Llama3, false, false},
    {"qwen2", PreTokenizer::Qwen2, false, false},
    {"deepseek-r1-qwen", PreTokenizer::Qwen2, false, false},
    {"stablelm2", PreTokenizer::Qwen2, false, false},
    {"megrez", PreTokenizer::Qwen2, false, false},
    {"kormo", PreTokenizer::Qwen2, false, false},
    {"f2llmv2", PreTokenizer::Qwen2, false, false},
    {"hunyuan", PreTokenizer::Qwen2, false, false},
    {"solar-open", PreTokenizer::Qwen2, false, false},
    {"grok-2", PreTokenizer::Qwen2, false, false},
    {"qwen35", PreTokenizer::Qwen35, false, false},
    {"starcoder", PreTokenizer::Starcoder, false, false},
    {"refact", PreTokenizer::Starcoder, false, false},
    {"smollm", PreTokenizer::Starcoder, false, false},
    {"command-r", PreTokenizer::Starcoder, false, false},
    {"codeshell", PreTokenizer::Starcoder, false, false},
    {"exaone", PreTokenizer::Starcoder, false, false},
    {"minerva-7b", PreTokenizer::Starcoder, false, false},
    {"mellum2", PreTokenizer::Starcoder, false, false},
    {"falcon", PreTokenizer::Falcon, false, false},
    {"gpt-4o", PreTokenizer::Gpt4o, false, false},
    {"llama4", PreTokenizer::Gpt4o, false, false},
    {"kanana2", PreTokenizer::Gpt4o, false, false},
    {"minimax-m2", PreTokenizer::Gpt4o, false, false},
    {"tekken", PreTokenizer::Tekken, true, true},
    {"deepseek-llm", PreTokenizer::DeepseekLlm, false, false},
    {"deepseek-coder", PreTokenizer::DeepseekCoder, false, false},
    {"deepseek-v3", PreTokenizer::DeepseekV3, false, false},
    {"bloom", PreTokenizer::Bloom, false, false},
    {"poro-chat", PreTokenizer::Bloom, false, false},
    {"gpt3-finnish", PreTokenizer::Bloom, false, false},
    {"viking", PreTokenizer::Viking, false, false},
    {"gemma4", PreTokenizer::Gemma4, false, true, true},
};

} // namespace

std::span<const PreTokenizerSpec> pre_tokenizer_specs() { return kSpecs; }

const PreTokenizerSpec *find_pre_tokenizer(std::string_view name) {
    for (const PreTokenizerSpec &s : kSpecs)
        if (name == s.name) return &s;
    return nullptr;
}

void pretokenize(PreTokenizer kind, std::string_view text, std::vector<std::string_view> &out) {
    if (text.size() >= UINT32_MAX) fail(EMBER_ERR_INVALID_ARGUMENT, "pre-tokenizer input of %zu bytes", text.size());
    const CpText t(text);
    if (t.size() == 0) return;
    const Family &f = family_of(kind);
    std::vector<Range> pieces{{0, uint32_t(t.size())}}, next;
    for (Stage st : f.stages) {
        next.clear();
        st(t, pieces, next);
        pieces.swap(next);
    }
    f.last(t, pieces, text, out);
}

} // namespace ember::tok
