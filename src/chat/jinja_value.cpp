// jinja_value.cpp — Python semantics of template values: truthiness, equality, str() and repr().
#include "chat/jinja_value.hpp"

#include "core/error.hpp"

#include <algorithm>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ember::jinja {

Value Value::list(List items) { return list(std::make_shared<List>(std::move(items))); }

const std::string &Value::empty_string() {
    static const std::string empty;
    return empty;
}

namespace {
int checked_depth(int d) {
    if (d > kMaxValueDepth)
        fail(EMBER_ERR_INVALID_ARGUMENT, "template: lists or dicts nested deeper than %d", kMaxValueDepth);
    return d;
}
} // namespace

Value Value::list(std::shared_ptr<List> items) {
    Value v;
    v.kind_ = Kind::List;
    int d = 0;
    for (const Value &x : *items) d = std::max(d, x.depth_);
    v.depth_ = checked_depth(d + 1);
    v.list_ = std::move(items);
    return v;
}

Value Value::dict(std::shared_ptr<Dict> d) {
    Value v;
    v.kind_ = Kind::Dict;
    int depth = 0;
    if (!d->is_namespace)
        for (const auto &kv : d->items) depth = std::max({depth, kv.first.depth_, kv.second.depth_});
    v.depth_ = checked_depth(depth + 1);
    v.dict_ = std::move(d);
    return v;
}

Value Value::function(std::string name, std::function<Value(CallArgs &, Context &)> fn) {
    Value v;
    v.kind_ = Kind::Function;
    v.fn_ = std::make_shared<Function>(Function{std::move(name), std::move(fn)});
    return v;
}

bool Value::truthy() const {
    switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool:
    case Kind::Int: return i_ != 0;
    case Kind::Float: return f_ != 0;
    case Kind::String: return str_ && !str_->empty();
    case Kind::List: return !list_->empty();
    case Kind::Dict: return dict_->is_namespace || !dict_->items.empty();
    case Kind::Function: return true;
    }
    return false;
}

const char *Value::type_name() const {
    switch (kind_) {
    case Kind::Undefined: return "undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return "list";
    case Kind::Dict: return dict_->is_namespace ? "Namespace" : "dict";
    case Kind::Function: return "function";
    }
    return "?";
}

const Value *Dict::find(const Value &key) const {
    for (const auto &kv : items)
        if (equals(kv.first, key)) return &kv.second;
    return nullptr;
}

const Value *Dict::find(std::string_view key) const {
    for (const auto &kv : items)
        if (kv.first.is_string() && kv.first.as_string() == key) return &kv.second;
    return nullptr;
}

void Dict::set(Value key, Value value) {
    for (auto &kv : items)
        if (equals(kv.first, key)) {
            kv.second = std::move(value);
            return;
        }
    items.emplace_back(std::move(key), std::move(value));
}

Value CallArgs::get(size_t i, std::string_view name) const {
    if (i < args.size()) return args[i];
    for (const auto &kv : kwargs)
        if (kv.first == name) return kv.second;
    return Value();
}

bool CallArgs::has(size_t i, std::string_view name) const {
    if (i < args.size()) return true;
    for (const auto &kv : kwargs)
        if (kv.first == name) return true;
    return false;
}

bool equals(const Value &a, const Value &b) {
    using K = Value::Kind;
    if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
        return a.as_int() == b.as_int();
    }
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
    case K::Undefined:
    case K::None: return true;
    case K::String: return a.as_string() == b.as_string();
    case K::List: {
        const List &x = a.as_list(), &y = b.as_list();
        if (x.size() != y.size()) return false;
        for (size_t i = 0; i < x.size(); ++i)
            if (!equals(x[i], y[i])) return false;
        return true;
    }
    case K::Dict: {
        const Dict &x = a.as_dict(), &y = b.as_dict();
        if (&x == &y) return true;
        if (x.is_namespace || y.is_namespace) return false;   // compared by identity in Python
        if (x.items.size() != y.items.size()) return false;
        for (const auto &kv : x.items) {
            const Value *o = y.find(kv.first);
            if (!o || !equals(kv.second, *o)) return false;
        }
        return true;
    }
    case K::Function: return &a.as_function() == &b.as_function();
    default: return false;
    }
}

std::string float_repr(double f) {
    if (std::isnan(f)) return "nan";
    if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
    if (f == 0) return std::signbit(f) ? "-0.0" : "0.0";
    // The shortest digits that read back as the same double, as Python's repr chooses them.
    char buf[64];
    int prec = 1;
    for (; prec <= 17; ++prec) {
        std::snprintf(buf, sizeof buf, "%.*e", prec - 1, f);
        if (std::strtod(buf, nullptr) == f) break;
    }
    // buf is "[-]d.ddde[+-]XX": split into sign, digits and decimal exponent.
    std::string s(buf);
    const bool neg = s[0] == '-';
    if (neg) s.erase(0, 1);
    const size_t e = s.find('e');
    const int exp = std::atoi(s.c_str() + e + 1);
    std::string digits;
    for (size_t i = 0; i < e; ++i)
        if (s[i] != '.') digits += s[i];
    while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
    std::string out = neg ? "-" : "";
    if (exp < -4 || exp >= 16) {   // Python switches to exponent notation outside [1e-4, 1e16)
        out += digits.substr(0, 1);
        if (digits.size() > 1) out += "." + digits.substr(1);
        char ebuf[16];
        std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
        return out + ebuf;
    }
    if (exp < 0) return out + "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    const size_t int_len = static_cast<size_t>(exp) + 1;
    if (digits.size() <= int_len) return out + digits + std::string(int_len - digits.size(), '0') + ".0";
    return out + digits.substr(0, int_len) + "." + digits.substr(int_len);
}

namespace {

std::string repr_string(const std::string &s) {
    // Python prefers single quotes, and double quotes when the text holds a ' and no ".
    const char q = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
    std::string out(1, q);
    for (unsigned char c : s) {
        switch (c) {
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
            if (c == static_cast<unsigned char>(q)) {
                out += '\\';
                out += static_cast<char>(c);
            } else if (c < 0x20 || c == 0x7f) {
                char b[8];
                std::snprintf(b, sizeof b, "\\x%02x", c);
                out += b;
            } else {
                out += static_cast<char>(c);
            }
        }
    }
    out += q;
    return out;
}

} // namespace

std::string to_repr(const Value &v) {
    using K = Value::Kind;
    switch (v.kind()) {
    case K::String: return repr_string(v.as_string());
    case K::List: {
        std::string out = "[";
        bool first = true;
        for (const Value &x : v.as_list()) {
            if (!first) out += ", ";
            first = false;
            out += to_repr(x);
        }
        return out + "]";
    }
    case K::Dict: {
        if (v.as_dict().is_namespace) return "<Namespace>";
        std::string out = "{";
        bool first = true;
        for (const auto &kv : v.as_dict().items) {
            if (!first) out += ", ";
            first = false;
            out += to_repr(kv.first) + ": " + to_repr(kv.second);
        }
        return out + "}";
    }
    default: return to_str(v);
    }
}

std::string to_str(const Value &v) {
    using K = Value::Kind;
    switch (v.kind()) {
    case K::Undefined: return "";
    case K::None: return "None";
    case K::Bool: return v.as_bool() ? "True" : "False";
    case K::Int: return std::to_string(v.as_int());
    case K::Float: return float_repr(v.as_float());
    case K::String: return v.as_string();
    case K::Function: return "<function " + v.as_function().name + ">";
    default: return to_repr(v);
    }
}

size_t utf8_length(std::string_view s) {
    size_t n = 0;
    for (size_t i = 0; i < s.size(); ++i)
        if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 || i == 0) ++n;
    return n;
}

std::vector<size_t> utf8_offsets(std::string_view s) {
    // A code point starts at every byte that is not a continuation byte (invalid bytes count as one each).
    std::vector<size_t> off;
    off.reserve(s.size() + 1);
    for (size_t i = 0; i < s.size(); ++i)
        if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 || i == 0) off.push_back(i);
    off.push_back(s.size());
    return off;
}

} // namespace ember::jinja
