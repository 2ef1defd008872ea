#include "grammar/schema_pattern.hpp"

#include "core/error.hpp"
#include "grammar/grammar_rules.hpp"

#include <algorithm>
#include <utility>
#include <vector>

namespace ember::grammar {

namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

std::string cp_escape(uint32_t cp) { return cp <= 0xFFFF ? format("\\u%04X", cp) : format("\\U%08X", cp); }

class PatternParser {
public:
    PatternParser(const std::string &p, const std::string &ptr) : p_(p), ptr_(ptr) {}

    std::string run() {
        size_t end = p_.size();
        if (!p_.empty() && p_[0] == '^') i_ = 1;
        if (end > i_ && p_[end - 1] == '$' && (end < 2 || p_[end - 2] != '\\')) --end;
        end_ = end;
        std::string out = alternation(0);
        if (i_ != end_) error(EMBER_ERR_INVALID_ARGUMENT, "unbalanced ')'");
        return out;
    }

private:
    [[noreturn]] void error(ember_status st, const std::string &msg) const {
        fail(st, "json schema: at '%s': pattern offset %zu: %s", ptr_.c_str(), i_, msg.c_str());
    }
    bool more() const { return i_ < end_; }

    std::string alternation(int depth) {
        if (depth > 64) error(EMBER_ERR_UNSUPPORTED, "groups nest too deeply");
        std::vector<std::string> alts{sequence(depth)};
        while (more() && p_[i_] == '|') {
            ++i_;
            alts.push_back(sequence(depth));
        }
        std::string out;
        for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : "") + (alts[k].empty() ? std::string("\"\"") : alts[k]);
        return out;
    }

    std::string sequence(int depth) {
        std::string out;
        while (more() && p_[i_] != '|' && p_[i_] != ')') {
            std::string atom = this->atom(depth);
            atom = quantified("(" + atom + ")");
            out += (out.empty() ? "" : " ") + atom;
        }
        return out;
    }

    uint32_t number() {
        const size_t start = i_;
        uint64_t v = 0;
        while (more() && p_[i_] >= '0' && p_[i_] <= '9') {
            v = v * 10 + static_cast<uint64_t>(p_[i_++] - '0');
            if (v > GrammarLimits::kMaxRepeat) error(EMBER_ERR_UNSUPPORTED, "a repetition count above the limit");
        }
        if (i_ == start) error(EMBER_ERR_INVALID_ARGUMENT, "expected a number in {m,n}");
        return static_cast<uint32_t>(v);
    }

    std::string quantified(std::string atom) {
        if (!more()) return atom;
        const char c = p_[i_];
        std::string q;
        if (c == '*' || c == '+' || c == '?') q = std::string(1, c), ++i_;
        else if (c == '{') {
            ++i_;
            const uint32_t m = number();
            q = "{" + std::to_string(m);
            if (more() && p_[i_] == ',') {
                ++i_;
                q += ",";
                if (more() && p_[i_] != '}') {
                    const uint32_t n = number();
                    if (n < m) error(EMBER_ERR_INVALID_ARGUMENT, "{m,n} with n < m");
                    q += std::to_string(n);
                }
            }
            if (!more() || p_[i_] != '}') error(EMBER_ERR_INVALID_ARGUMENT, "expected '}'");
            ++i_;
            q += "}";
        } else {
            return atom;
        }
        if (more() && p_[i_] == '?') ++i_;   // lazy: the same set of strings
        if (more() && (p_[i_] == '*' || p_[i_] == '+' || p_[i_] == '{'))
            error(EMBER_ERR_UNSUPPORTED, "possessive or stacked quantifiers");
        return atom + q;
    }

    uint32_t utf8() {
        const uint8_t c = static_cast<uint8_t>(p_[i_]);
        const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (n == 0 || i_ + static_cast<size_t>(n) > end_) error(EMBER_ERR_INVALID_ARGUMENT, "invalid UTF-8");
        uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1Fu) : n == 3 ? (c & 0x0Fu) : (c & 0x07u);
        for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>(p_[i_ + static_cast<size_t>(k)]) & 0x3Fu);
        i_ += static_cast<size_t>(n);
        return cp;
    }

    // An escape's class (\d ...) into ranges, or its literal character (returned, ranges untouched).
    bool escape_class(char e, Ranges &r, bool &negated) {
        negated = e == 'D' || e == 'W' || e == 'S';
        switch (e) {
        case 'd': case 'D': r.push_back({'0', '9'}); return true;
        case 'w': case 'W': r.push_back({'0', '9'}), r.push_back({'A', 'Z'}), r.push_back({'_', '_'}), r.push_back({'a', 'z'}); return true;
        case 's': case 'S': r.push_back({' ', ' '}); if (negated) r.push_back({'\t', '\r'}); return true;
        default: return false;
        }
    }

    uint32_t escaped_char(char e) {
        switch (e) {
        case 'n': return '\n';
        case 't': return '\t';
        case 'r': return '\r';
        case 'f': return '\f';
        case 'v': return '\v';
        default:
            if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9'))
                error(EMBER_ERR_UNSUPPORTED, std::string("the escape \\") + e + " is not supported");
            return static_cast<uint8_t>(e);
        }
    }

    // One character as JSON string content: escaped as JSON needs, as a GBNF literal.
    static std::string json_char(uint32_t cp) {
        if (cp == '"') return "\"\\\\\\\"\"";       // the two characters \"
        if (cp == '\\') return "\"\\\\\\\\\"";      // the two characters \\ (written)
        if (cp == '\n') return "\"\\\\n\"";
        if (cp == '\t') return "\"\\\\t\"";
        if (cp == '\r') return "\"\\\\r\"";
        if (cp < 0x20) return "\"\\\\u00" + format("%02x", cp) + "\"";
        return "[" + cp_escape(cp) + "]";
    }

    // A class as JSON string content: what JSON must escape is left out of plain ranges and added back
    // escaped where the class includes it.
    static std::string json_class(Ranges r, bool negated) {
        if (negated) {
            r.push_back({0, 0x1F});
            r.push_back({'"', '"'});
            r.push_back({'\\', '\\'});
            std::string out = "[^";
            for (const auto &[lo, hi] : r) out += cp_escape(lo) + (hi != lo ? "-" + cp_escape(hi) : "");
            return out + "]";
        }
        std::vector<std::string> alts;
        std::string cls;
        for (auto [lo, hi] : r) {
            // split out the characters JSON escapes
            for (uint32_t special : {uint32_t('"'), uint32_t('\\')})
                if (lo <= special && special <= hi) alts.push_back(json_char(special));
            if (lo <= 0x1F) {
                for (uint32_t c : {uint32_t('\t'), uint32_t('\n'), uint32_t('\r')})
                    if (lo <= c && c <= std::min<uint32_t>(hi, 0x1F)) alts.push_back(json_char(c));
                lo = 0x20;
                if (hi < lo) continue;
            }
            // the pieces of [lo, hi] without " and backslash
            uint32_t a = lo;
            for (uint32_t special : {uint32_t('"'), uint32_t('\\')}) {
                if (special < a || special > hi) continue;
                if (special > a) cls += cp_escape(a) + (special - 1 != a ? "-" + cp_escape(special - 1) : "");
                a = special + 1;
            }
            if (a <= hi) cls += cp_escape(a) + (hi != a ? "-" + cp_escape(hi) : "");
        }
        if (!cls.empty()) alts.insert(alts.begin(), "[" + cls + "]");
        if (alts.empty()) return "[^\\x00-\\U0010FFFF]";   // matches nothing: the class had only control characters
        std::string out;
        for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : "") + alts[k];
        return "(" + out + ")";
    }

    std::string atom(int depth) {
        const char c = p_[i_];
        if (c == '(') {
            ++i_;
            if (more() && p_[i_] == '?') {
                if (i_ + 1 < end_ && p_[i_ + 1] == ':') i_ += 2;
                else error(EMBER_ERR_UNSUPPORTED, "lookaround and named groups are not supported");
            }
            std::string inner = alternation(depth + 1);
            if (!more() || p_[i_] != ')') error(EMBER_ERR_INVALID_ARGUMENT, "expected ')'");
            ++i_;
            return inner.empty() ? "\"\"" : inner;
        }
        if (c == '[') return char_class();
        if (c == '.') {
            ++i_;
            return json_class({{'\n', '\n'}}, true);
        }
        if (c == '*' || c == '+' || c == '?' || c == '{') error(EMBER_ERR_INVALID_ARGUMENT, "a quantifier with nothing before it");
        if (c == '^' || c == '$') error(EMBER_ERR_UNSUPPORTED, "anchors are supported only at the start and end");
        if (c == '\\') {
            if (i_ + 1 >= end_) error(EMBER_ERR_INVALID_ARGUMENT, "a trailing backslash");
            const char e = p_[i_ + 1];
            i_ += 2;
            Ranges r;
            bool neg;
            if (escape_class(e, r, neg)) return json_class(r, neg);
            return json_char(escaped_char(e));
        }
        return json_char(utf8());
    }

    std::string char_class() {
        ++i_;   // [
        bool negated = false;
        if (more() && p_[i_] == '^') negated = true, ++i_;
        Ranges r;
        bool first = true;
        while (more() && (p_[i_] != ']' || first)) {
            first = false;
            uint32_t lo;
            if (p_[i_] == '\\') {
                if (i_ + 1 >= end_) error(EMBER_ERR_INVALID_ARGUMENT, "a trailing backslash");
                const char e = p_[i_ + 1];
                i_ += 2;
                Ranges sub;
                bool neg;
                if (escape_class(e, sub, neg)) {
                    if (neg) error(EMBER_ERR_UNSUPPORTED, "negated escapes inside a class");
                    r.insert(r.end(), sub.begin(), sub.end());
                    continue;
                }
                lo = escaped_char(e);
            } else {
                lo = utf8();
            }
            uint32_t hi = lo;
            if (i_ + 1 < end_ && p_[i_] == '-' && p_[i_ + 1] != ']') {
                ++i_;
                if (p_[i_] == '\\') {
                    if (i_ + 1 >= end_) error(EMBER_ERR_INVALID_ARGUMENT, "a trailing backslash");
                    hi = escaped_char(p_[i_ + 1]);
                    i_ += 2;
                } else {
                    hi = utf8();
                }
                if (hi < lo) error(EMBER_ERR_INVALID_ARGUMENT, "a reversed range in a class");
            }
            r.push_back({lo, hi});
        }
        if (!more()) error(EMBER_ERR_INVALID_ARGUMENT, "unterminated class");
        ++i_;   // ]
        std::sort(r.begin(), r.end());
        return json_class(r, negated);
    }

    const std::string &p_;
    const std::string &ptr_;
    size_t i_ = 0, end_ = 0;
};

} // namespace

std::string pattern_to_gbnf(const std::string &pattern, const std::string &ptr) { return PatternParser(pattern, ptr).run(); }

} // namespace ember::grammar
