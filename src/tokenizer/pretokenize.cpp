// pretokenize.cpp — the pre-tokenizer regexes as hand-written matchers.
//
// Each matcher is called at the start of the next match and returns where that match ends, trying the
// regex's alternatives in order as a backtracking engine would (leftmost alternative that matches wins;
// quantifiers are greedy). The comments name the alternative each branch stands for.
#include "tokenizer/pretokenize.hpp"

#include "tokenizer/unicode.hpp"

#include <cstdint>

namespace ember::tok {

namespace {

// The text as code points, with the byte offset where each starts (offs has one extra entry: the end).
struct CpText {
    std::vector<uint32_t> cps;
    std::vector<CpClass> cls;
    std::vector<size_t> offs;

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
            offs.push_back(i);
            i += d.len;
        }
        offs.push_back(text.size());
    }
    size_t size() const { return cps.size(); }
};

class Matcher {
public:
    explicit Matcher(const CpText &t) : t_(t), n_(t.size()) {}

protected:
    const CpText &t_;
    const size_t n_;

    uint32_t cp(size_t i) const { return i < n_ ? t_.cps[i] : 0xFFFFFFFFu; }
    bool is(size_t i, CpClass c) const { return i < n_ && t_.cls[i] == c; }
    bool letter(size_t i) const { return is(i, CpClass::Letter); }
    bool number(size_t i) const { return is(i, CpClass::Number); }
    bool space(size_t i) const { return is(i, CpClass::Space); }
    bool other(size_t i) const { return is(i, CpClass::Other); }   // [^\s\p{L}\p{N}]
    bool newline(size_t i) const { return cp(i) == '\r' || cp(i) == '\n'; }

    size_t run(size_t i, CpClass c) const {
        while (is(i, c)) ++i;
        return i;
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

    // \s+(?!\S) falling back to \s+, at a space: a run of spaces that reaches the end of the text is
    // taken whole; otherwise the last space is left to join the next piece, unless it is the only one.
    size_t trailing_spaces(size_t i) const {
        const size_t j = run(i, CpClass::Space);
        if (j == n_) return j;
        return j - i >= 2 ? j - 1 : j;
    }
};

class Gpt2Matcher : public Matcher {
public:
    using Matcher::Matcher;
    size_t next(size_t i) const {
        if (size_t e = contraction(i, false)) return e;
        // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": an optional space joins the run that follows it.
        const size_t k = cp(i) == ' ' ? i + 1 : i;
        for (CpClass c : {CpClass::Letter, CpClass::Number, CpClass::Other})
            if (is(k, c)) return run(k, c);
        return trailing_spaces(i);
    }
};

class Llama3Matcher : public Matcher {
public:
    Llama3Matcher(const CpText &t, size_t max_digits) : Matcher(t), max_digits_(max_digits) {}
    size_t next(size_t i) const {
        if (size_t e = contraction(i, true)) return e;
        // [^\r\n\p{L}\p{N}]?\p{L}+ : one leading non-letter, non-digit (space, punctuation...) joins a word.
        if (letter(i)) return run(i, CpClass::Letter);
        if (!newline(i) && !number(i) && letter(i + 1)) return run(i + 1, CpClass::Letter);
        // \p{N}{1,3} (or \p{N})
        if (number(i)) {
            size_t j = i + 1;
            while (j - i < max_digits_ && number(j)) ++j;
            return j;
        }
        // " ?[^\s\p{L}\p{N}]+[\r\n]*"
        const size_t k = cp(i) == ' ' ? i + 1 : i;
        if (other(k)) {
            size_t j = run(k, CpClass::Other);
            while (newline(j)) ++j;
            return j;
        }
        // \s*[\r\n]+ : spaces up to and including the last line break of the run.
        size_t j = i, after_newline = 0;
        for (; space(j); ++j)
            if (newline(j)) after_newline = j + 1;
        if (after_newline) return after_newline;
        return trailing_spaces(i);
    }

private:
    size_t max_digits_;
};

template <class M>
void split(const M &m, const CpText &t, std::string_view text, std::vector<std::string_view> &out) {
    size_t i = 0;
    while (i < t.size()) {
        size_t e = m.next(i);
        if (e <= i) e = i + 1;   // cannot happen (every position matches); guards against looping
        out.push_back(text.substr(t.offs[i], t.offs[e] - t.offs[i]));
        i = e;
    }
}

} // namespace

void pretokenize(PreTokenizer kind, std::string_view text, std::vector<std::string_view> &out) {
    const CpText t(text);
    switch (kind) {
    case PreTokenizer::Gpt2: split(Gpt2Matcher(t), t, text, out); break;
    case PreTokenizer::Llama3: split(Llama3Matcher(t, 3), t, text, out); break;
    case PreTokenizer::Qwen2: split(Llama3Matcher(t, 1), t, text, out); break;
    }
}

} // namespace ember::tok
