#include "grammar/json_value.hpp"

#include "core/error.hpp"
#include "tokenizer/unicode.hpp"

#include <cmath>
#include <cstdlib>

namespace ember::grammar {

JsonValue::JsonValue() = default;
JsonValue::~JsonValue() = default;
JsonValue::JsonValue(const JsonValue &) = default;
JsonValue::JsonValue(JsonValue &&) noexcept = default;
JsonValue &JsonValue::operator=(const JsonValue &) = default;
JsonValue &JsonValue::operator=(JsonValue &&) noexcept = default;

const JsonValue *JsonValue::get(std::string_view key) const {
    if (type != OBJECT) return nullptr;
    for (const auto &[k, v] : members)
        if (k == key) return &v;
    return nullptr;
}

std::string JsonValue::dump() const {
    std::string out;
    switch (type) {
    case NUL: return "null";
    case BOOL: return boolean ? "true" : "false";
    case NUMBER: return text;
    case STRING: json_quote(out, text); return out;
    case ARRAY:
        out += '[';
        for (size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + items[i].dump();
        return out + ']';
    case OBJECT:
        out += '{';
        for (size_t i = 0; i < members.size(); ++i) {
            if (i) out += ',';
            json_quote(out, members[i].first);
            out += ':' + members[i].second.dump();
        }
        return out + '}';
    }
    return out;
}

namespace {

class Reader {
public:
    Reader(std::string_view s, const char *what) : s_(s), what_(what) {}

    JsonValue document() {
        JsonValue v = value(0);
        skip_ws();
        if (i_ < s_.size()) error("unexpected text after the value");
        return v;
    }

private:
    [[noreturn]] void error(const char *msg) const {
        size_t line = 1, col = 1;
        for (size_t k = 0; k < i_ && k < s_.size(); ++k) {
            if (s_[k] == '\n') ++line, col = 1;
            else if ((static_cast<uint8_t>(s_[k]) & 0xC0) != 0x80) ++col;
        }
        fail(EMBER_ERR_INVALID_ARGUMENT, "%s: line %zu, column %zu: %s", what_, line, col, msg);
    }

    void skip_ws() {
        while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
    }
    bool eat(char c) {
        skip_ws();
        if (i_ < s_.size() && s_[i_] == c) { ++i_; return true; }
        return false;
    }
    bool literal(std::string_view w) {
        if (s_.substr(i_, w.size()) != w) return false;
        i_ += w.size();
        return true;
    }

    JsonValue value(uint32_t depth) {
        if (depth > kJsonMaxDepth) error("nesting is too deep");
        skip_ws();
        if (i_ >= s_.size()) error("unexpected end of the text");
        JsonValue v;
        const char c = s_[i_];
        if (c == '{') {
            ++i_;
            v.type = JsonValue::OBJECT;
            if (eat('}')) return v;
            do {
                skip_ws();
                if (i_ >= s_.size() || s_[i_] != '"') error("expected a member name in quotes");
                std::string k = string();
                if (!eat(':')) error("expected ':'");
                v.members.emplace_back(std::move(k), value(depth + 1));
            } while (eat(','));
            if (!eat('}')) error("expected ',' or '}'");
        } else if (c == '[') {
            ++i_;
            v.type = JsonValue::ARRAY;
            if (eat(']')) return v;
            do v.items.push_back(value(depth + 1));
            while (eat(','));
            if (!eat(']')) error("expected ',' or ']'");
        } else if (c == '"') {
            v.type = JsonValue::STRING;
            v.text = string();
        } else if (literal("true")) {
            v.type = JsonValue::BOOL, v.boolean = true;
        } else if (literal("false")) {
            v.type = JsonValue::BOOL;
        } else if (literal("null")) {
            v.type = JsonValue::NUL;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            number(v);
        } else {
            error("expected a value");
        }
        return v;
    }

    void number(JsonValue &v) {
        const size_t start = i_;
        auto digits = [&] {
            const size_t d = i_;
            while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
            return i_ - d;
        };
        if (s_[i_] == '-') ++i_;
        if (i_ < s_.size() && s_[i_] == '0') ++i_;
        else if (digits() == 0) error("expected digits");
        v.integer = true;
        if (i_ < s_.size() && s_[i_] == '.') {
            ++i_;
            v.integer = false;
            if (digits() == 0) error("expected digits after '.'");
        }
        if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
            ++i_;
            v.integer = false;
            if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
            if (digits() == 0) error("expected exponent digits");
        }
        v.type = JsonValue::NUMBER;
        v.text = std::string(s_.substr(start, i_ - start));
        v.number = std::strtod(v.text.c_str(), nullptr);
    }

    uint32_t hex4() {
        if (i_ + 4 > s_.size()) error("expected four hex digits");
        uint32_t v = 0;
        for (int k = 0; k < 4; ++k) {
            const char h = s_[i_++];
            const int d = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
            if (d < 0) error("expected four hex digits");
            v = (v << 4) | static_cast<uint32_t>(d);
        }
        return v;
    }

    std::string string() {
        ++i_;   // the opening quote
        std::string out;
        for (;;) {
            if (i_ >= s_.size()) error("unterminated string");
            const unsigned char c = static_cast<unsigned char>(s_[i_]);
            if (c == '"') { ++i_; return out; }
            if (c < 0x20) error("control character in a string (escape it)");
            if (c >= 0x80) {   // JSON text is UTF-8 (RFC 8259): a schema's strings become grammar literals
                const tok::Utf8Decoded d =
                    tok::utf8_decode(reinterpret_cast<const uint8_t *>(s_.data()) + i_, s_.size() - i_);
                if (d.kind != tok::Utf8Decoded::Valid) error("invalid UTF-8 in a string");
                out.append(s_.data() + i_, d.len);
                i_ += d.len;
                continue;
            }
            if (c != '\\') { out += static_cast<char>(c); ++i_; continue; }
            ++i_;
            if (i_ >= s_.size()) error("unterminated string");
            const char e = s_[i_++];
            switch (e) {
            case '"': out += '"'; break;
            case '\\': out += '\\'; break;
            case '/': out += '/'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case 'u': {
                uint32_t cp = hex4();
                if (cp >= 0xD800 && cp <= 0xDBFF && s_.substr(i_, 2) == "\\u") {
                    i_ += 2;
                    const uint32_t lo = hex4();
                    if (lo < 0xDC00 || lo > 0xDFFF) error("invalid surrogate pair");
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else if (cp >= 0xD800 && cp <= 0xDFFF) {
                    error("unpaired surrogate");
                }
                tok::utf8_append(out, cp);
                break;
            }
            default: error("unknown escape in a string");
            }
        }
    }

    std::string_view s_;
    const char *what_;
    size_t i_ = 0;
};

} // namespace

JsonValue parse_json(std::string_view text, const char *what) { return Reader(text, what).document(); }

} // namespace ember::grammar
