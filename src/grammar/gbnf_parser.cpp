// gbnf_parser.cpp — GBNF text → GrammarRules (see grammar_rules.hpp for the syntax accepted).
//
// A recursive-descent parser over the text. Layout follows llama.cpp's grammar files: a rule's sequence
// ends at a newline unless inside parentheses or right after `|` or `::=`, so rules need no terminator.
// Each group and each repetition becomes a generated rule; the checks that need the whole grammar
// (undefined rules, left recursion) run after parsing.
#include "grammar/grammar_rules.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <map>

namespace ember::grammar {

bool CharClass::matches(uint32_t cp) const {
    // ranges are sorted: binary search for the last range starting at or before cp
    auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                               [](uint32_t c, const std::pair<uint32_t, uint32_t> &r) { return c < r.first; });
    const bool in = it != ranges.begin() && cp <= std::prev(it)->second;
    return in != negated;
}

bool CharClass::intersects(uint32_t lo, uint32_t hi) const {
    if (!negated) {
        for (const auto &r : ranges)
            if (r.first <= hi && lo <= r.second) return true;
        return false;
    }
    // Negated: some point of [lo, hi] lies outside every range, i.e. the ranges do not cover [lo, hi].
    uint32_t next = lo;   // the first point of [lo, hi] not yet known to be covered
    for (const auto &r : ranges) {
        if (r.second < next) continue;
        if (r.first > next) return true;
        if (r.second >= hi) return false;
        next = r.second + 1;
    }
    return true;
}

namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

class Parser {
public:
    Parser(const std::string &text) : s_(text) {}

    GrammarRules run(const char *root_name) {
        if (s_.size() > GrammarLimits::kMaxTextBytes)
            fail(EMBER_ERR_INVALID_ARGUMENT, "grammar: the text is %zu bytes, more than the limit of %zu", s_.size(),
                 GrammarLimits::kMaxTextBytes);
        space(true);
        if (at_end()) error(i_, "the grammar is empty (expected `root ::= ...`)");
        while (!at_end()) parse_rule();
        // Every referenced rule must be defined.
        for (size_t r = 0; r < g_.names.size(); ++r)
            if (!defined_[r]) error(first_use_[r], "undefined rule '" + g_.names[r] + "'");
        auto root = ids_.find(root_name);
        if (root == ids_.end()) error(0, std::string("the grammar has no rule '") + root_name + "'");
        g_.root = root->second;
        check_left_recursion();
        return std::move(g_);
    }

private:
    // --- errors with line and column -------------------------------------------------------------
    [[noreturn]] void error(size_t at, const std::string &what) const {
        size_t line = 1, col = 1;
        for (size_t k = 0; k < at && k < s_.size(); ++k) {
            if (s_[k] == '\n') ++line, col = 1;
            else if ((static_cast<uint8_t>(s_[k]) & 0xC0) != 0x80) ++col;   // columns count characters
        }
        fail(EMBER_ERR_INVALID_ARGUMENT, "grammar: line %zu, column %zu: %s", line, col, what.c_str());
    }

    bool at_end() const { return i_ >= s_.size(); }
    char peek(size_t k = 0) const { return i_ + k < s_.size() ? s_[i_ + k] : '\0'; }

    // Spaces, tabs and comments; newlines too where a sequence may continue on the next line.
    void space(bool newline_ok) {
        while (!at_end()) {
            const char c = s_[i_];
            if (c == ' ' || c == '\t') ++i_;
            else if (c == '#') { while (!at_end() && s_[i_] != '\n' && s_[i_] != '\r') ++i_; }
            else if (newline_ok && (c == '\n' || c == '\r')) ++i_;
            else break;
        }
    }

    static bool word_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    }

    std::string name() {
        const size_t start = i_;
        while (!at_end() && word_char(s_[i_])) ++i_;
        if (i_ == start) error(start, "expected a rule name");
        return s_.substr(start, i_ - start);
    }

    // --- rules ------------------------------------------------------------------------------------
    uint32_t rule_id(const std::string &n, size_t at) {
        auto it = ids_.find(n);
        if (it != ids_.end()) return it->second;
        return new_rule(n, at);
    }

    uint32_t new_rule(const std::string &n, size_t at) {
        if (g_.names.size() >= GrammarLimits::kMaxRules)
            error(at, "more than " + std::to_string(GrammarLimits::kMaxRules) + " rules");
        const uint32_t id = static_cast<uint32_t>(g_.names.size());
        g_.names.push_back(n);
        g_.alts.emplace_back();
        defined_.push_back(false);
        first_use_.push_back(at);
        ids_.emplace(n, id);
        return id;
    }

    // A generated rule for a group or repetition: named after the rule being parsed.
    uint32_t generated_rule(size_t at) {
        std::string n;
        do n = current_ + "_" + std::to_string(++generated_); while (ids_.count(n));
        const uint32_t id = new_rule(n, at);
        defined_[id] = true;
        return id;
    }

    void parse_rule() {
        const size_t start = i_;
        current_ = name();
        const uint32_t id = rule_id(current_, start);
        if (defined_[id]) error(start, "rule '" + current_ + "' is defined twice");
        defined_[id] = true;
        space(false);
        if (s_.compare(i_, 3, "::=") != 0) error(i_, "expected '::=' after the rule name '" + current_ + "'");
        i_ += 3;
        space(true);
        set_alternatives(id, parse_alternatives(false, 0));
        space(false);
        if (!at_end() && s_[i_] != '\n' && s_[i_] != '\r') error(i_, "expected a newline or the end after the rule");
        space(true);
    }

    using Seq = std::vector<Sym>;

    std::vector<Seq> parse_alternatives(bool nested, uint32_t depth) {
        std::vector<Seq> alts;
        alts.push_back(parse_sequence(nested, depth));
        while (peek() == '|') {
            ++i_;
            space(true);
            alts.push_back(parse_sequence(nested, depth));
        }
        return alts;
    }

    void set_alternatives(uint32_t rule, const std::vector<Seq> &alts) {
        for (const Seq &seq : alts) {
            g_.alts[rule].push_back(static_cast<uint32_t>(g_.syms.size()));
            for (const Sym &s : seq) push_sym(s);
            push_sym(Sym{Sym::END, 0});
        }
    }

    void push_sym(const Sym &s) {
        if (g_.syms.size() >= GrammarLimits::kMaxSymbols)
            error(i_, "the grammar expands to more than " + std::to_string(GrammarLimits::kMaxSymbols) + " symbols");
        g_.syms.push_back(s);
    }

    Sym char_sym(CharClass c) {
        std::sort(c.ranges.begin(), c.ranges.end());
        // merge overlapping and adjacent ranges, so matches() can binary-search
        std::vector<std::pair<uint32_t, uint32_t>> merged;
        for (const auto &r : c.ranges) {
            if (!merged.empty() && r.first <= merged.back().second + 1) merged.back().second = std::max(merged.back().second, r.second);
            else merged.push_back(r);
        }
        c.ranges = std::move(merged);
        // literals repeat characters: equal classes share one entry
        auto key = std::make_pair(c.negated, c.ranges);
        auto it = class_ids_.find(key);
        if (it != class_ids_.end()) return Sym{Sym::CHAR, it->second};
        const uint32_t id = static_cast<uint32_t>(g_.classes.size());
        g_.classes.push_back(std::move(c));
        class_ids_.emplace(std::move(key), id);
        return Sym{Sym::CHAR, id};
    }

    Seq parse_sequence(bool nested, uint32_t depth) {
        Seq seq;
        size_t last_start = seq.size();   // where the last element (what a repetition applies to) begins
        bool have_last = false;
        while (!at_end()) {
            const char c = s_[i_];
            const size_t at = i_;
            if (c == '"') {
                ++i_;
                last_start = seq.size();
                have_last = true;
                if (peek() == '"') {
                    // "" is the empty sequence: nothing to add, and nothing for a repetition to apply to
                    have_last = false;
                }
                while (peek() != '"') {
                    if (at_end()) error(at, "unterminated string literal");
                    const uint32_t cp = parse_char(at);
                    seq.push_back(char_sym(CharClass{{{cp, cp}}, false}));
                }
                ++i_;
                // a repetition after a literal applies to the whole literal: make it one rule
                if (have_last && seq.size() - last_start > 1) wrap_tail(seq, last_start, at);
                space(nested);
            } else if (c == '[') {
                ++i_;
                CharClass cls;
                if (peek() == '^') { cls.negated = true; ++i_; }
                while (peek() != ']') {
                    if (at_end()) error(at, "unterminated character class");
                    const uint32_t lo = parse_char(at);
                    uint32_t hi = lo;
                    if (peek() == '-' && peek(1) != ']' && peek(1) != '\0') {
                        ++i_;
                        hi = parse_char(at);
                        if (hi < lo) error(at, "character range is reversed");
                    }
                    cls.ranges.push_back({lo, hi});
                }
                ++i_;
                last_start = seq.size();
                have_last = true;
                seq.push_back(char_sym(std::move(cls)));
                space(nested);
            } else if (c == '.') {
                ++i_;
                last_start = seq.size();
                have_last = true;
                seq.push_back(char_sym(CharClass{{{0, kMaxCodePoint}}, false}));
                space(nested);
            } else if (word_char(c)) {
                const std::string n = name();
                last_start = seq.size();
                have_last = true;
                seq.push_back(Sym{Sym::REF, rule_id(n, at)});
                space(nested);
            } else if (c == '(') {
                if (depth + 1 > GrammarLimits::kMaxNesting)
                    error(at, "parentheses nest deeper than " + std::to_string(GrammarLimits::kMaxNesting));
                ++i_;
                space(true);
                const std::string saved = current_;
                std::vector<Seq> alts = parse_alternatives(true, depth + 1);
                if (peek() != ')') error(i_, "expected ')'");
                ++i_;
                const uint32_t id = generated_rule(at);
                set_alternatives(id, alts);
                current_ = saved;
                last_start = seq.size();
                have_last = true;
                seq.push_back(Sym{Sym::REF, id});
                space(nested);
            } else if (c == '*' || c == '+' || c == '?' || c == '{') {
                if (!have_last) error(at, std::string("'") + c + "' has nothing before it to repeat");
                uint32_t min = 0, max = UINT32_MAX;   // UINT32_MAX: unbounded
                ++i_;
                if (c == '+') min = 1;
                else if (c == '?') max = 1;
                else if (c == '{') {
                    space(nested);
                    min = parse_count();
                    space(nested);
                    max = min;
                    if (peek() == ',') {
                        ++i_;
                        space(nested);
                        max = peek() == '}' ? UINT32_MAX : parse_count();
                        space(nested);
                    }
                    if (peek() != '}') error(i_, "expected '}'");
                    ++i_;
                    if (max < min) error(at, "repetition {m,n} has n < m");
                }
                const Sym item = seq[last_start];
                seq.resize(last_start);
                repeat(seq, item, min, max, at);
                have_last = false;   // x** is not GBNF
                space(nested);
            } else {
                break;
            }
        }
        return seq;
    }

    // Replaces seq[from..] with a reference to a new rule holding them (a literal under a repetition).
    void wrap_tail(Seq &seq, size_t from, size_t at) {
        const uint32_t id = generated_rule(at);
        set_alternatives(id, {Seq(seq.begin() + static_cast<std::ptrdiff_t>(from), seq.end())});
        seq.resize(from);
        seq.push_back(Sym{Sym::REF, id});
    }

    uint32_t parse_count() {
        const size_t start = i_;
        uint64_t v = 0;
        while (peek() >= '0' && peek() <= '9') {
            v = v * 10 + static_cast<uint64_t>(peek() - '0');
            if (v > GrammarLimits::kMaxRepeat) error(start, "repetition count above the limit of " + std::to_string(GrammarLimits::kMaxRepeat));
            ++i_;
        }
        if (i_ == start) error(start, "expected a number");
        return static_cast<uint32_t>(v);
    }

    // x{min,max}: min copies of x, then (max - min) nested optionals, or x* (a right-recursive rule:
    // the matcher's tail calls keep its stack flat) when unbounded.
    void repeat(Seq &seq, Sym item, uint32_t min, uint32_t max, size_t at) {
        for (uint32_t k = 0; k < min; ++k) {
            if (seq.size() >= GrammarLimits::kMaxSymbols) error(at, "the repetition expands beyond the symbol limit");
            seq.push_back(item);
        }
        if (max == min) return;
        if (max == UINT32_MAX) {
            const uint32_t star = generated_rule(at);   // star ::= item star |
            set_alternatives(star, {Seq{item, Sym{Sym::REF, star}}, Seq{}});
            seq.push_back(Sym{Sym::REF, star});
            return;
        }
        // opt_k ::= item opt_{k-1} | ; opt_1 ::= item |
        uint32_t inner = 0;
        bool have_inner = false;
        for (uint32_t k = 0; k < max - min; ++k) {
            const uint32_t opt = generated_rule(at);
            Seq first{item};
            if (have_inner) first.push_back(Sym{Sym::REF, inner});
            set_alternatives(opt, {first, Seq{}});
            inner = opt;
            have_inner = true;
        }
        seq.push_back(Sym{Sym::REF, inner});
    }

    // One character of a literal or class: an escape or one UTF-8 character.
    uint32_t parse_char(size_t literal_start) {
        if (at_end()) error(literal_start, "unexpected end of the text");
        const uint8_t c = static_cast<uint8_t>(s_[i_]);
        if (c == '\\') {
            const size_t at = i_;
            ++i_;
            const char e = peek();
            ++i_;
            switch (e) {
            case 'n': return '\n';
            case 'r': return '\r';
            case 't': return '\t';
            case '\\': return '\\';
            case '"': return '"';
            case '[': return '[';
            case ']': return ']';
            case '-': return '-';
            case '^': return '^';
            case 'x': return hex(2, at);
            case 'u': return hex(4, at);
            case 'U': return hex(8, at);
            default: error(at, std::string("unknown escape '\\") + (e ? std::string(1, e) : std::string()) + "'");
            }
        }
        if (c == '\n' || c == '\r') error(i_, "newline inside a literal or class (write \\n)");
        // UTF-8
        int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (n == 0 || i_ + static_cast<size_t>(n) > s_.size()) error(i_, "invalid UTF-8 in the grammar");
        uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
        for (int k = 1; k < n; ++k) {
            const uint8_t b = static_cast<uint8_t>(s_[i_ + static_cast<size_t>(k)]);
            if ((b & 0xC0) != 0x80) error(i_, "invalid UTF-8 in the grammar");
            cp = (cp << 6) | (b & 0x3F);
        }
        // Overlong forms (\xC0\xAF for '/') and surrogates are not UTF-8: the matcher refuses them in
        // generated text, and a literal must not mean a character other than the one it spells.
        static constexpr uint32_t kMinOfLength[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp > kMaxCodePoint || cp < kMinOfLength[n] || (cp >= 0xD800 && cp <= 0xDFFF))
            error(i_, "invalid UTF-8 in the grammar");
        i_ += static_cast<size_t>(n);
        return cp;
    }

    uint32_t hex(int digits, size_t at) {
        uint32_t v = 0;
        for (int k = 0; k < digits; ++k) {
            const char h = peek();
            int d = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
            if (d < 0) error(at, "expected " + std::to_string(digits) + " hex digits in the escape");
            v = (v << 4) | static_cast<uint32_t>(d);
            ++i_;
        }
        if (v > kMaxCodePoint) error(at, "escape beyond U+10FFFF");
        return v;
    }

    // --- left recursion ---------------------------------------------------------------------------
    // Which rules can match the empty string, in time linear in the grammar: each alternative counts
    // its references not yet known nullable (one with a character class never is), and a rule found
    // nullable lowers the count of every alternative that refers to it. (Sweeping all rules until
    // nothing changed took one sweep per link of a chain of rules: quadratic, seconds for a 400 KB text.)
    std::vector<char> nullable_rules() const {
        const size_t n = g_.names.size();
        std::vector<char> nullable(n, 0);
        std::vector<uint32_t> pending;                          // per alternative: references left
        std::vector<uint32_t> alt_rule;                         // per alternative: its rule
        std::vector<std::vector<uint32_t>> used_in(n);          // per rule: the alternatives referring to it
        std::vector<uint32_t> queue;
        for (size_t r = 0; r < n; ++r)
            for (uint32_t p : g_.alts[r]) {
                const uint32_t a = static_cast<uint32_t>(pending.size());
                uint32_t refs = 0;
                bool has_char = false;
                for (uint32_t q = p; g_.syms[q].kind != Sym::END; ++q) {
                    if (g_.syms[q].kind == Sym::CHAR) has_char = true;
                    else ++refs, used_in[g_.syms[q].id].push_back(a);
                }
                pending.push_back(has_char ? UINT32_MAX : refs);
                alt_rule.push_back(static_cast<uint32_t>(r));
                if (!has_char && refs == 0 && !nullable[r]) nullable[r] = 1, queue.push_back(static_cast<uint32_t>(r));
            }
        while (!queue.empty()) {
            const uint32_t t = queue.back();
            queue.pop_back();
            for (uint32_t a : used_in[t])
                if (pending[a] != UINT32_MAX && --pending[a] == 0 && !nullable[alt_rule[a]]) {
                    nullable[alt_rule[a]] = 1;
                    queue.push_back(alt_rule[a]);
                }
        }
        return nullable;
    }

    // A rule that can reach itself without consuming a character would make the matcher's expansion
    // loop. Nullable rules first, then a depth-first search over "may start with" edges.
    void check_left_recursion() {
        const size_t n = g_.names.size();
        const std::vector<char> nullable = nullable_rules();
        std::vector<std::vector<uint32_t>> starts(n);
        for (size_t r = 0; r < n; ++r)
            for (uint32_t p : g_.alts[r])
                for (; g_.syms[p].kind == Sym::REF; ++p) {
                    starts[r].push_back(g_.syms[p].id);
                    if (!nullable[g_.syms[p].id]) break;
                }
        // iterative DFS (the grammar may have thousands of rules): 0 new, 1 on the path, 2 done
        std::vector<uint8_t> color(n, 0);
        std::vector<std::pair<uint32_t, size_t>> stack;
        for (uint32_t r0 = 0; r0 < n; ++r0) {
            if (color[r0]) continue;
            stack.push_back({r0, 0});
            color[r0] = 1;
            while (!stack.empty()) {
                auto &[r, k] = stack.back();
                if (k < starts[r].size()) {
                    const uint32_t t = starts[r][k++];
                    if (color[t] == 1) {
                        std::string base = g_.names[t];
                        fail(EMBER_ERR_INVALID_ARGUMENT,
                             "grammar: rule '%s' is left-recursive (it can reach itself before matching a character)",
                             base.c_str());
                    }
                    if (color[t] == 0) { color[t] = 1; stack.push_back({t, 0}); }
                } else {
                    color[r] = 2;
                    stack.pop_back();
                }
            }
        }
    }

    const std::string &s_;
    size_t i_ = 0;
    GrammarRules g_;
    std::map<std::string, uint32_t> ids_;
    std::vector<bool> defined_;
    std::vector<size_t> first_use_;
    std::map<std::pair<bool, std::vector<std::pair<uint32_t, uint32_t>>>, uint32_t> class_ids_;
    std::string current_;
    uint32_t generated_ = 0;
};

} // namespace

GrammarRules parse_gbnf(const std::string &text, const char *root_name) { return Parser(text).run(root_name); }

} // namespace ember::grammar
