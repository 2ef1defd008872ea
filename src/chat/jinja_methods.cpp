// jinja_methods.cpp — methods of strings and dicts (`s.strip()`, `d.items()`) and the global functions
// raise_exception, namespace, range and dict, with Python's behaviour.
#include "chat/jinja_builtins.hpp"

#include "chat/jinja_context.hpp"
#include "chat/jinja_error.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <ctime>

namespace ember::jinja {

namespace {

// Python's str.strip() removes these (the ASCII ones; other Unicode spaces are left).
bool is_py_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

std::string arg_string(const CallArgs &a, size_t i, const char *name, const char *fn) {
    const Value v = a.get(i, name);
    if (!v.is_string()) render_error(a.line, "%s: argument '%s' must be a string, not '%s'", fn, name, v.type_name());
    return v.as_string();
}

std::vector<std::string> split(const std::string &s, const Value &sep, int64_t maxsplit, int line, const Context &ctx) {
    std::vector<std::string> parts;
    if (sep.is_undefined() || sep.is_none()) {   // runs of whitespace, no empty parts
        size_t i = 0;
        while (i < s.size()) {
            while (i < s.size() && is_py_space(static_cast<unsigned char>(s[i]))) ++i;
            if (i >= s.size()) break;
            if (maxsplit >= 0 && int64_t(parts.size()) == maxsplit) {
                std::string rest = s.substr(i);
                while (!rest.empty() && is_py_space(static_cast<unsigned char>(rest.back()))) rest.pop_back();
                parts.push_back(rest);
                break;
            }
            size_t j = i;
            while (j < s.size() && !is_py_space(static_cast<unsigned char>(s[j]))) ++j;
            parts.push_back(s.substr(i, j - i));
            ctx.check_items(parts.size(), line);
            i = j;
        }
        return parts;
    }
    if (!sep.is_string()) render_error(line, "split: the separator must be a string, not '%s'", sep.type_name());
    const std::string &d = sep.as_string();
    if (d.empty()) render_error(line, "split: empty separator");
    size_t i = 0;
    for (;;) {
        const size_t j = s.find(d, i);
        if (j == std::string::npos || (maxsplit >= 0 && int64_t(parts.size()) == maxsplit)) {
            parts.push_back(s.substr(i));
            break;
        }
        parts.push_back(s.substr(i, j - i));
        ctx.check_items(parts.size(), line);
        i = j + d.size();
    }
    return parts;
}

std::string replace_all(const std::string &s, const std::string &from, const std::string &to, int64_t count,
                        Context &ctx, int line) {
    std::string out;
    size_t i = 0;
    int64_t done = 0;
    if (from.empty()) {   // Python inserts `to` between every character (and at both ends)
        for (size_t k = 0; k <= s.size(); ++k) {
            if (count < 0 || done < count) {
                out += to;
                ++done;
            }
            if (k < s.size()) out += s[k];
            ctx.check_size(out.size(), line);
        }
        return out;
    }
    for (;;) {
        const size_t j = (count >= 0 && done >= count) ? std::string::npos : s.find(from, i);
        if (j == std::string::npos) break;
        out.append(s, i, j - i).append(to);
        ctx.check_size(out.size(), line);
        i = j + from.size();
        ++done;
    }
    out.append(s, i, std::string::npos);
    ctx.check_size(out.size(), line);
    return out;
}

std::string upper(std::string s) {
    for (char &c : s)
        if (c >= 'a' && c <= 'z') c = char(c - 'a' + 'A');
    return s;
}

std::string lower(std::string s) {
    for (char &c : s)
        if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
    return s;
}

bool is_alpha(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80; }

// Python's str.title(): a letter after a non-letter starts a word (upper), others lower.
std::string py_title(const std::string &s) {
    std::string out = s;
    bool prev_letter = false;
    for (char &c : out) {
        const unsigned char u = static_cast<unsigned char>(c);
        if (is_alpha(u)) {
            if (u < 0x80) c = prev_letter ? char(std::tolower(u)) : char(std::toupper(u));
            prev_letter = true;
        } else {
            prev_letter = false;
        }
    }
    return out;
}

bool affix_match(const std::string &s, const Value &affix, bool prefix, int line, const char *fn) {
    auto one = [&](const Value &v) {
        if (!v.is_string()) render_error(line, "%s: argument must be a string or a list of strings, not '%s'", fn, v.type_name());
        const std::string &a = v.as_string();
        if (a.size() > s.size()) return false;
        return prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
    };
    if (affix.is_list()) {
        for (const Value &v : affix.as_list())
            if (one(v)) return true;
        return false;
    }
    return one(affix);
}

Value bound(const Value &self, const std::string &name, std::function<Value(const Value &, CallArgs &, Context &)> fn) {
    return Value::function(name, [self, fn = std::move(fn)](CallArgs &a, Context &ctx) { return fn(self, a, ctx); });
}

int64_t int_arg(const CallArgs &a, size_t i, const char *name, int64_t dflt, const char *fn) {
    const Value v = a.get(i, name);
    if (v.is_undefined() || v.is_none()) return dflt;
    if (!v.is_int() && !v.is_bool()) render_error(a.line, "%s: argument '%s' must be an integer", fn, name);
    return v.as_int();
}

constexpr const char *kOtherStringMethods[] = {
    "format", "format_map", "zfill", "center", "ljust", "rjust", "encode", "partition", "rpartition", "rsplit",
    "splitlines", "rfind", "index", "rindex", "isdigit", "isalpha", "isspace", "isalnum", "isupper",
    "islower", "isnumeric", "isdecimal", "istitle", "casefold", "swapcase", "expandtabs", "translate",
    "removeprefix", "removesuffix"};
constexpr const char *kListMethods[] = {"append", "pop", "extend", "insert", "remove", "sort", "reverse",
                                        "index", "count", "copy", "clear"};
constexpr const char *kOtherDictMethods[] = {"update", "pop", "setdefault", "clear", "copy", "popitem"};

template <size_t N>
bool listed(const char *const (&names)[N], const std::string &name) {
    for (const char *n : names)
        if (name == n) return true;
    return false;
}

Value string_method(const Value &self, const std::string &name, int line) {
    using F = std::function<Value(const Value &, CallArgs &, Context &)>;
    F fn;
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
        const bool l = name != "rstrip", r = name != "lstrip";
        fn = [l, r](const Value &s, CallArgs &a, Context &) {
            const Value chars = a.get(0, "chars");
            if (!chars.is_undefined() && !chars.is_none() && !chars.is_string())
                render_error(a.line, "strip: chars must be a string");
            return Value::string(strip(s.as_string(), chars.is_string() ? chars.as_string() : "", l, r));
        };
    } else if (name == "startswith" || name == "endswith") {
        const bool prefix = name == "startswith";
        fn = [prefix](const Value &s, CallArgs &a, Context &) {
            return Value::boolean(affix_match(s.as_string(), a.get(0, "prefix"), prefix, a.line,
                                              prefix ? "startswith" : "endswith"));
        };
    } else if (name == "split") {
        fn = [](const Value &s, CallArgs &a, Context &ctx) {
            List out;
            for (auto &p : split(s.as_string(), a.get(0, "sep"), int_arg(a, 1, "maxsplit", -1, "split"), a.line, ctx))
                out.push_back(Value::string(std::move(p)));
            ctx.check_items(out.size(), a.line);
            return Value::list(std::move(out));
        };
    } else if (name == "upper" || name == "lower") {
        const bool up = name == "upper";
        fn = [up](const Value &s, CallArgs &, Context &) { return Value::string(up ? upper(s.as_string()) : lower(s.as_string())); };
    } else if (name == "title") {
        fn = [](const Value &s, CallArgs &, Context &) { return Value::string(py_title(s.as_string())); };
    } else if (name == "capitalize") {
        fn = [](const Value &s, CallArgs &, Context &) {
            std::string r = lower(s.as_string());
            if (!r.empty() && r[0] >= 'a' && r[0] <= 'z') r[0] = char(r[0] - 'a' + 'A');
            return Value::string(std::move(r));
        };
    } else if (name == "replace") {
        fn = [](const Value &s, CallArgs &a, Context &ctx) {
            return Value::string(replace_all(s.as_string(), arg_string(a, 0, "old", "replace"),
                                             arg_string(a, 1, "new", "replace"), int_arg(a, 2, "count", -1, "replace"),
                                             ctx, a.line));
        };
    } else if (name == "find" || name == "count") {
        const bool find = name == "find";
        fn = [find](const Value &s, CallArgs &a, Context &) {
            const std::string sub = arg_string(a, 0, "sub", find ? "find" : "count");
            const std::string &str = s.as_string();
            if (find) {
                const size_t p = str.find(sub);
                return Value::integer(p == std::string::npos ? -1 : int64_t(utf8_length(std::string_view(str).substr(0, p))));
            }
            if (sub.empty()) return Value::integer(int64_t(utf8_length(str)) + 1);
            int64_t n = 0;
            for (size_t p = str.find(sub); p != std::string::npos; p = str.find(sub, p + sub.size())) ++n;
            return Value::integer(n);
        };
    } else if (name == "join") {
        fn = [](const Value &s, CallArgs &a, Context &ctx) {
            const Value items = a.get(0, "iterable");
            if (!items.is_list()) render_error(a.line, "join: argument must be a list, not '%s'", items.type_name());
            std::string out;
            bool first = true;
            for (const Value &v : items.as_list()) {
                if (!v.is_string()) render_error(a.line, "join: expected a list of strings, found '%s'", v.type_name());
                if (!first) out += s.as_string();
                first = false;
                out += v.as_string();
                ctx.check_size(out.size(), a.line);
            }
            return Value::string(std::move(out));
        };
    } else if (listed(kOtherStringMethods, name)) {
        unsupported(line, "the string method '%s' is not supported", name.c_str());
    } else {
        return Value::undefined(name);
    }
    return bound(self, "str." + name, std::move(fn));
}

Value dict_method(const Value &self, const std::string &name, int line) {
    if (name == "items" || name == "keys" || name == "values") {
        const int which = name == "items" ? 0 : name == "keys" ? 1 : 2;
        return bound(self, "dict." + name, [which](const Value &d, CallArgs &, Context &) {
            List out;
            for (const auto &kv : d.as_dict().items) {
                if (which == 0) out.push_back(Value::list(List{kv.first, kv.second}));
                else out.push_back(which == 1 ? kv.first : kv.second);
            }
            return Value::list(std::move(out));
        });
    }
    if (name == "get") {
        return bound(self, "dict.get", [](const Value &d, CallArgs &a, Context &) {
            const Value *v = d.as_dict().find(a.get(0, "key"));
            if (v) return *v;
            const Value dflt = a.get(1, "default");
            return dflt.is_undefined() ? Value::none() : dflt;
        });
    }
    if (listed(kOtherDictMethods, name))
        unsupported(line, "the dict method '%s' is not supported (dicts are immutable in templates)", name.c_str());
    return Value::undefined(name);
}

} // namespace

std::string strip(std::string_view s, std::string_view chars, bool left, bool right) {
    auto strip_char = [&](unsigned char c) {
        return chars.empty() ? is_py_space(c) : chars.find(static_cast<char>(c)) != std::string_view::npos;
    };
    size_t b = 0, e = s.size();
    if (left)
        while (b < e && strip_char(static_cast<unsigned char>(s[b]))) ++b;
    if (right)
        while (e > b && strip_char(static_cast<unsigned char>(s[e - 1]))) --e;
    return std::string(s.substr(b, e - b));
}

Value method(const Value &obj, const std::string &name, int line) {
    if (obj.is_string()) return string_method(obj, name, line);
    if (obj.is_dict() && !obj.as_dict().is_namespace && !obj.as_dict().attrs_only) return dict_method(obj, name, line);
    if (obj.is_list() && listed(kListMethods, name))
        unsupported(line, "the list method '%s' is not supported (lists are immutable in templates)", name.c_str());
    return Value::undefined(name);
}

Value global_function(std::string_view name) {
    if (name == "raise_exception") {
        return Value::function("raise_exception", [](CallArgs &a, Context &) -> Value {
            const Value msg = a.get(0, "message");
            fail(EMBER_ERR_INVALID_ARGUMENT, "template line %d: raise_exception: %s", a.line, to_str(msg).c_str());
        });
    }
    if (name == "namespace" || name == "dict") {
        const bool ns = name == "namespace";
        return Value::function(std::string(name), [ns](CallArgs &a, Context &ctx) {
            auto d = std::make_shared<Dict>();
            d->is_namespace = ns;
            for (const Value &v : a.args) {
                if (!v.is_dict()) render_error(a.line, "%s(): positional arguments must be dicts", ns ? "namespace" : "dict");
                for (const auto &kv : v.as_dict().items) d->set(kv.first, kv.second);
            }
            for (const auto &kv : a.kwargs) d->set(Value::string(kv.first), kv.second);
            if (ns) ctx.keep_namespace(d);
            return Value::dict(std::move(d));
        });
    }
    if (name == "strftime_now") {
        // transformers' strftime_now(format): the local date and time (Llama-3.2 and Mistral templates put
        // today's date into their system prompt).
        return Value::function("strftime_now", [](CallArgs &a, Context &) {
            const Value fmt = a.get(0, "format");
            if (!fmt.is_string()) render_error(a.line, "strftime_now(): the format must be a string");
            if (fmt.as_string().size() > 256) render_error(a.line, "strftime_now(): format longer than 256 bytes");
            const std::time_t now = std::time(nullptr);
            std::tm tm{};
            if (!localtime_r(&now, &tm)) render_error(a.line, "strftime_now(): no local time");
            char buf[1024];
            const size_t n = std::strftime(buf, sizeof buf, fmt.as_string().c_str(), &tm);
            return Value::string(std::string(buf, n));
        });
    }
    if (name == "range") {
        return Value::function("range", [](CallArgs &a, Context &ctx) {
            if (a.args.empty() || a.args.size() > 3) render_error(a.line, "range() takes 1 to 3 arguments");
            for (const Value &v : a.args)
                if (!v.is_int() && !v.is_bool()) render_error(a.line, "range(): arguments must be integers");
            int64_t start = 0, stop, step = 1;
            if (a.args.size() == 1) {
                stop = a.args[0].as_int();
            } else {
                start = a.args[0].as_int();
                stop = a.args[1].as_int();
                if (a.args.size() == 3) step = a.args[2].as_int();
            }
            if (step == 0) render_error(a.line, "range() step must not be zero");
            // The count in double, to stay clear of overflow for extreme arguments.
            const double n = step > 0 ? std::max(0.0, std::ceil((double(stop) - double(start)) / double(step)))
                                      : std::max(0.0, std::ceil((double(start) - double(stop)) / double(-step)));
            if (n > double(ctx.limits().max_items)) ctx.check_items(ctx.limits().max_items + 1, a.line);
            List out;
            out.reserve(size_t(n));
            for (int64_t i = 0; i < int64_t(n); ++i) {   // in uint64_t: wraps to the right value, never overflows
                if ((i & 0xFFFF) == 0xFFFF) ctx.check_time(a.line);
                out.push_back(Value::integer(int64_t(uint64_t(start) + uint64_t(i) * uint64_t(step))));
            }
            return Value::list(std::move(out));
        });
    }
    return Value::undefined(std::string(name));
}

} // namespace ember::jinja
