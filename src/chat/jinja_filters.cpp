// jinja_filters.cpp — the filters and tests of the subset, and tojson as transformers defines it
// (json.dumps with ensure_ascii=False: non-ASCII text is written as it is, not as \u escapes).
#include "chat/jinja_builtins.hpp"

#include "chat/jinja_context.hpp"
#include "chat/jinja_error.hpp"
#include "core/json_escape.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ember::jinja {

namespace {

constexpr const char *kFilters[] = {
    "trim", "length", "count", "upper", "lower", "capitalize", "title", "replace", "default", "d", "join",
    "first", "last", "tojson", "string", "int", "float", "list", "items", "selectattr", "rejectattr", "select",
    "reject", "map", "reverse", "abs", "safe", "escape", "e", "indent", "unique", "sort", "dictsort", "sum",
    "min", "max", "wordcount", "round", "center", "truncate", "batch", "slice", "groupby", "attr", "format",
    "filesizeformat", "forceescape", "pprint", "random", "striptags", "urlencode", "urlize", "wordwrap",
    "xmlattr"};
// Jinja filters the parser knows but we do not implement: they parse, and rendering one is reported as
// unsupported (so a template that only uses them in a branch it never takes still renders).
constexpr const char *kUnimplementedFilters[] = {
    "dictsort", "sum", "min", "max", "wordcount", "round", "center", "truncate", "batch", "slice", "groupby",
    "attr", "format", "filesizeformat", "forceescape", "pprint", "random", "striptags", "urlencode", "urlize",
    "wordwrap", "xmlattr", "sort", "unique"};
constexpr const char *kTests[] = {
    "defined", "undefined", "none", "boolean", "false", "true", "integer", "float", "number", "string",
    "mapping", "iterable", "sequence", "callable", "even", "odd", "divisibleby", "lower", "upper", "eq",
    "equalto", "==", "ne", "!=", "lt", "<", "lessthan", "le", "<=", "gt", ">", "greaterthan", "ge", ">=", "in",
    "sameas"};

template <size_t N>
bool listed(const char *const (&names)[N], std::string_view name) {
    for (const char *n : names)
        if (name == n) return true;
    return false;
}

// obj.attr for selectattr/map: a dict's key (dotted paths like "function.name" walk nested dicts).
Value attribute_of(const Value &obj, const std::string &path) {
    Value cur = obj;
    size_t i = 0;
    while (i <= path.size()) {
        const size_t j = std::min(path.find('.', i), path.size());
        const std::string key = path.substr(i, j - i);
        if (!cur.is_dict()) return Value::undefined(key);
        const Value *v = cur.as_dict().find(key);
        if (!v) return Value::undefined(key);
        cur = *v;
        i = j + 1;
    }
    return cur;
}


struct JsonStyle {
    int indent = -1;
    std::string item_sep = ", ", key_sep = ": ";
    bool sort_keys = false;
};

void json_value(std::string &out, const Value &v, const JsonStyle &st, int level, int line) {
    if (level > 100) render_error(line, "tojson: nesting too deep");
    auto newline = [&](int lvl) {
        if (st.indent < 0) return;
        out += '\n';
        out.append(size_t(st.indent) * size_t(lvl), ' ');
    };
    switch (v.kind()) {
    case Value::Kind::None: out += "null"; return;
    case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::Int: out += std::to_string(v.as_int()); return;
    case Value::Kind::Float: {
        const double f = v.as_float();
        out += std::isnan(f) ? "NaN" : std::isinf(f) ? (f < 0 ? "-Infinity" : "Infinity") : float_repr(f);
        return;
    }
    case Value::Kind::String: json_quote(out, v.as_string()); return;
    case Value::Kind::List: {
        const List &l = v.as_list();
        if (l.empty()) {
            out += "[]";
            return;
        }
        out += '[';
        for (size_t i = 0; i < l.size(); ++i) {
            if (i) out += st.item_sep;
            newline(level + 1);
            json_value(out, l[i], st, level + 1, line);
        }
        newline(level);
        out += ']';
        return;
    }
    case Value::Kind::Dict: {
        if (v.as_dict().is_namespace) break;
        std::vector<const std::pair<Value, Value> *> items;
        for (const auto &kv : v.as_dict().items) items.push_back(&kv);
        if (items.empty()) {
            out += "{}";
            return;
        }
        auto key_text = [&](const Value &k) {
            if (k.is_string()) return k.as_string();
            if (k.is_none()) return std::string("null");
            if (k.is_bool()) return std::string(k.as_bool() ? "true" : "false");
            if (k.is_int() || k.is_float()) return to_str(k);
            render_error(line, "tojson: keys must be str, int, float, bool or None, not '%s'", k.type_name());
        };
        if (st.sort_keys)
            std::stable_sort(items.begin(), items.end(),
                             [&](auto *a, auto *b) { return key_text(a->first) < key_text(b->first); });
        out += '{';
        for (size_t i = 0; i < items.size(); ++i) {
            if (i) out += st.item_sep;
            newline(level + 1);
            json_quote(out, key_text(items[i]->first));
            out += st.key_sep;
            json_value(out, items[i]->second, st, level + 1, line);
        }
        newline(level);
        out += '}';
        return;
    }
    default: break;
    }
    render_error(line, "tojson: object of type '%s' is not JSON serializable", v.type_name());
}

std::string ascii_case(std::string s, bool up) {
    for (char &c : s) {
        if (up && c >= 'a' && c <= 'z') c = char(c - 'a' + 'A');
        if (!up && c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
    }
    return s;
}

int64_t int_param(const CallArgs &a, size_t i, const char *name, int64_t dflt) {
    const Value v = a.get(i, name);
    if (v.is_undefined() || v.is_none()) return dflt;
    if (!v.is_int() && !v.is_bool()) render_error(a.line, "argument '%s' must be an integer, not '%s'", name, v.type_name());
    return v.as_int();
}

// Runs a test by name for select/reject/selectattr/rejectattr, with the arguments after `first`.
bool run_test(const std::string &name, const Value &v, const CallArgs &a, size_t first, Context &ctx) {
    if (!is_test(name)) unsupported(a.line, "the test '%s' is not supported", name.c_str());
    CallArgs ta;
    ta.line = a.line;
    for (size_t i = first; i < a.args.size(); ++i) ta.args.push_back(a.args[i]);
    return apply_test(name, v, ta, ctx);
}

Value select(const Value &in, CallArgs &a, Context &ctx, bool by_attr, bool keep, const char *fname) {
    List out;
    const size_t test_pos = by_attr ? 1 : 0;
    std::string attr;
    if (by_attr) {
        const Value an = a.get(0, "attribute");
        if (!an.is_string()) render_error(a.line, "%s: the attribute name must be a string", fname);
        attr = an.as_string();
    }
    std::string test;
    if (a.args.size() > test_pos) {
        if (!a.args[test_pos].is_string()) render_error(a.line, "%s: the test name must be a string", fname);
        test = a.args[test_pos].as_string();
    }
    for (const Value &item : items_of(in, a.line, ctx, fname)) {
        ctx.step(a.line);
        const Value v = by_attr ? attribute_of(item, attr) : item;
        const bool ok = test.empty() ? v.truthy() : run_test(test, v, a, test_pos + 1, ctx);
        if (ok == keep) out.push_back(item);
    }
    return Value::list(std::move(out));
}

std::string html_escape(const std::string &s) {
    std::string out;
    for (char c : s) {
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&#34;"; break;
        case '\'': out += "&#39;"; break;
        default: out += c;
        }
    }
    return out;
}

} // namespace

List items_of(const Value &v, int line, Context &ctx, const char *what) {
    if (v.is_list()) return v.as_list();
    if (v.is_undefined()) return {};
    if (v.is_dict()) {
        List keys;
        for (const auto &kv : v.as_dict().items) keys.push_back(kv.first);
        return keys;
    }
    if (v.is_string()) {
        ctx.check_items(utf8_length(v.as_string()), line);
        ctx.charge(v.as_string().size(), line);
        const std::vector<size_t> off = utf8_offsets(v.as_string());
        List chars;
        for (size_t i = 0; i + 1 < off.size(); ++i)
            chars.push_back(Value::string(v.as_string().substr(off[i], off[i + 1] - off[i])));
        return chars;
    }
    if (what) render_error(line, "%s: '%s' is not iterable", what, v.type_name());
    render_error(line, "'%s' object is not iterable", v.type_name());
}

bool is_filter(std::string_view name) { return listed(kFilters, name); }
bool is_test(std::string_view name) { return listed(kTests, name); }

std::string to_json(const Value &v, int indent, int line) {
    JsonStyle st;
    st.indent = indent;
    if (indent >= 0) st.item_sep = ",";
    std::string out;
    json_value(out, v, st, 0, line);
    return out;
}

Value apply_filter(const std::string &name, const Value &in, CallArgs &a, Context &ctx) {
    const int line = a.line;
    if (!is_filter(name) || listed(kUnimplementedFilters, name))
        unsupported(line, "the filter '%s' is not supported", name.c_str());
    if (name == "trim") {
        const Value chars = a.get(0, "chars");
        return Value::string(strip(to_str(in), chars.is_string() ? chars.as_string() : "", true, true));
    }
    if (name == "length" || name == "count") {
        if (in.is_string()) {
            ctx.charge(in.as_string().size(), line);   // the scan (see the Item case of eval)
            return Value::integer(int64_t(utf8_length(in.as_string())));
        }
        if (in.is_list()) return Value::integer(int64_t(in.as_list().size()));
        if (in.is_dict()) return Value::integer(int64_t(in.as_dict().items.size()));
        if (in.is_undefined()) return Value::integer(0);
        render_error(line, "length: object of type '%s' has no length", in.type_name());
    }
    if (name == "upper" || name == "lower") return Value::string(ascii_case(to_str(in), name == "upper"));
    if (name == "capitalize") {
        std::string s = ascii_case(to_str(in), false);
        if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = char(s[0] - 'a' + 'A');
        return Value::string(std::move(s));
    }
    if (name == "title") {
        // Jinja's title: words begin after whitespace, '-', '(', '{', '[' or '<'.
        std::string s = to_str(in);
        bool start = true;
        for (char &c : s) {
            if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '-' || c == '(' || c == '{' || c == '[' ||
                c == '<') {
                start = true;
                continue;
            }
            if (start && c >= 'a' && c <= 'z') c = char(c - 'a' + 'A');
            else if (!start && c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
            start = false;
        }
        return Value::string(std::move(s));
    }
    if (name == "replace") {
        CallArgs ma = a;
        return method(Value::string(to_str(in)), "replace", line).as_function().call(ma, ctx);
    }
    if (name == "default" || name == "d") {
        const bool boolean = a.get(1, "boolean").truthy();
        if (in.is_undefined() || (boolean && !in.truthy())) {
            const Value dflt = a.get(0, "default_value");
            return dflt.is_undefined() ? Value::string("") : dflt;
        }
        return in;
    }
    if (name == "join") {
        const Value sep = a.get(0, "d");
        const Value attr = a.get(1, "attribute");
        std::string out;
        bool first = true;
        for (const Value &v : items_of(in, line, ctx, "join")) {
            if (!first) out += sep.is_undefined() ? "" : to_str(sep);
            first = false;
            out += to_str(attr.is_string() ? attribute_of(v, attr.as_string()) : v);
            ctx.check_size(out.size(), line);
        }
        return Value::string(std::move(out));
    }
    if (name == "first" || name == "last") {
        const List items = items_of(in, line, ctx, name.c_str());
        if (items.empty()) return Value::undefined();
        return name == "first" ? items.front() : items.back();
    }
    if (name == "tojson") {
        JsonStyle st;
        const Value indent = a.get(0, "indent");
        if (indent.is_int()) {
            if (indent.as_int() < 0 || indent.as_int() > 64) render_error(line, "tojson: indent out of range");
            st.indent = int(indent.as_int());
            st.item_sep = ",";
        } else if (!indent.is_undefined() && !indent.is_none()) {
            render_error(line, "tojson: indent must be an integer");
        }
        const Value seps = a.get(1, "separators");
        if (seps.is_list()) {
            if (seps.as_list().size() != 2 || !seps.as_list()[0].is_string() || !seps.as_list()[1].is_string())
                render_error(line, "tojson: separators must be two strings");
            st.item_sep = seps.as_list()[0].as_string();
            st.key_sep = seps.as_list()[1].as_string();
        }
        st.sort_keys = a.get(2, "sort_keys").truthy();
        std::string out;
        json_value(out, in, st, 0, line);
        ctx.check_size(out.size(), line);
        return Value::string(std::move(out));
    }
    if (name == "string") return Value::string(to_str(in));
    if (name == "int" || name == "float") {
        const bool to_int = name == "int";
        const Value dflt = a.get(0, "default");
        const Value fallback = dflt.is_undefined() ? (to_int ? Value::integer(0) : Value::number(0.0)) : dflt;
        if (in.is_int() || in.is_bool()) return to_int ? Value::integer(in.as_int()) : Value::number(in.as_float());
        if (in.is_float()) {
            const double f = in.as_float();
            if (!to_int) return in;
            if (!std::isfinite(f) || std::fabs(f) >= 9.2e18) return fallback;
            return Value::integer(int64_t(f));
        }
        if (in.is_string()) {
            const std::string s = strip(in.as_string(), "", true, true);
            if (s.empty()) return fallback;
            errno = 0;
            char *end = nullptr;
            if (to_int) {
                const long long v = std::strtoll(s.c_str(), &end, 10);
                if (errno == 0 && *end == '\0') return Value::integer(v);
                const double f = std::strtod(s.c_str(), &end);   // Jinja's int filter reads "1.5" as 1
                if (*end == '\0' && std::isfinite(f) && std::fabs(f) < 9.2e18) return Value::integer(int64_t(f));
                return fallback;
            }
            const double f = std::strtod(s.c_str(), &end);
            return *end == '\0' ? Value::number(f) : fallback;
        }
        return fallback;
    }
    if (name == "list") return Value::list(items_of(in, line, ctx, "list"));
    if (name == "items") {
        if (in.is_undefined()) return Value::list(List{});
        if (!in.is_dict()) render_error(line, "items: expected a dict, not '%s'", in.type_name());
        List out;
        for (const auto &kv : in.as_dict().items) out.push_back(Value::list(List{kv.first, kv.second}));
        return Value::list(std::move(out));
    }
    if (name == "selectattr" || name == "rejectattr") return select(in, a, ctx, true, name == "selectattr", name.c_str());
    if (name == "select" || name == "reject") return select(in, a, ctx, false, name == "select", name.c_str());
    if (name == "map") {
        List out;
        const Value attr = a.get(SIZE_MAX, "attribute");
        if (attr.is_string()) {
            const Value dflt = a.get(SIZE_MAX, "default");
            for (const Value &v : items_of(in, line, ctx, "map")) {
                Value x = attribute_of(v, attr.as_string());
                out.push_back(x.is_undefined() && !dflt.is_undefined() ? dflt : x);
            }
            return Value::list(std::move(out));
        }
        if (a.args.empty() || !a.args[0].is_string()) render_error(line, "map: needs attribute= or a filter name");
        const std::string f = a.args[0].as_string();
        if (!is_filter(f) || f == "map") unsupported(line, "the filter '%s' is not supported", f.c_str());
        CallArgs fa;
        fa.line = line;
        fa.args.assign(a.args.begin() + 1, a.args.end());
        fa.kwargs = a.kwargs;
        for (const Value &v : items_of(in, line, ctx, "map")) {
            ctx.step(line);
            out.push_back(apply_filter(f, v, fa, ctx));
        }
        return Value::list(std::move(out));
    }
    if (name == "reverse") {
        if (in.is_string()) {
            const std::vector<size_t> off = utf8_offsets(in.as_string());
            std::string out;
            for (size_t i = off.size() - 1; i-- > 0;) out.append(in.as_string(), off[i], off[i + 1] - off[i]);
            return Value::string(std::move(out));
        }
        List items = items_of(in, line, ctx, "reverse");
        std::reverse(items.begin(), items.end());
        return Value::list(std::move(items));
    }
    if (name == "abs") {
        if (in.is_int() || in.is_bool()) {
            if (in.as_int() == INT64_MIN) render_error(line, "integer overflow");
            return Value::integer(in.as_int() < 0 ? -in.as_int() : in.as_int());
        }
        if (in.is_float()) return Value::number(std::fabs(in.as_float()));
        render_error(line, "abs: bad operand type '%s'", in.type_name());
    }
    if (name == "safe") return in;
    if (name == "escape" || name == "e") return Value::string(html_escape(to_str(in)));
    if (name == "indent") {
        const Value w = a.get(0, "width");
        std::string pad;
        if (w.is_string()) pad = w.as_string();
        else pad.assign(size_t(std::clamp<int64_t>(int_param(a, 0, "width", 4), 0, 256)), ' ');
        const bool first = a.get(1, "first").truthy(), blank = a.get(2, "blank").truthy();
        const std::string s = to_str(in);
        std::string out;
        size_t i = 0;
        bool is_first = true;
        while (i <= s.size()) {
            const size_t j = std::min(s.find('\n', i), s.size());
            const std::string ln = s.substr(i, j - i);
            if ((is_first ? first : true) && (blank || !strip(ln, "", true, true).empty())) out += pad;
            out += ln;
            if (j < s.size()) out += '\n';
            ctx.check_size(out.size(), line);
            is_first = false;
            i = j + 1;
        }
        return Value::string(std::move(out));
    }
    unsupported(line, "the filter '%s' is not supported", name.c_str());
}

bool apply_test(const std::string &name, const Value &v, CallArgs &a, Context &) {
    const int line = a.line;
    if (!is_test(name)) unsupported(line, "the test '%s' is not supported", name.c_str());
    // Only the comparisons, divisibleby, in and sameas take an argument (Jinja refuses others').
    const bool takes_arg = name == "divisibleby" || name == "in" || name == "sameas" || name == "eq" ||
                           name == "equalto" || name == "ne" || name == "lt" || name == "lessthan" || name == "le" ||
                           name == "gt" || name == "greaterthan" || name == "ge" || (name.size() <= 2 && !std::isalpha(static_cast<unsigned char>(name[0])));
    const size_t n_args = a.args.size() + a.kwargs.size();
    if (n_args > (takes_arg ? 1u : 0u))
        render_error(line, "the test '%s' takes %s argument%s, %zu given", name.c_str(), takes_arg ? "one" : "no",
                     takes_arg ? "" : "s", n_args);
    if (takes_arg && n_args == 0) render_error(line, "the test '%s' needs an argument", name.c_str());
    const Value arg = a.get(0, "other");
    if (name == "defined") return !v.is_undefined();
    if (name == "undefined") return v.is_undefined();
    if (name == "none") return v.is_none();
    if (name == "boolean") return v.is_bool();
    if (name == "true") return v.is_bool() && v.as_bool();
    if (name == "false") return v.is_bool() && !v.as_bool();
    if (name == "integer") return v.is_int();
    if (name == "float") return v.is_float();
    if (name == "number") return v.is_number();
    if (name == "string") return v.is_string();
    if (name == "mapping") return v.is_dict() && !v.as_dict().is_namespace;
    if (name == "iterable") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
    if (name == "sequence") return v.is_list() || v.is_dict() || v.is_string();
    if (name == "callable") return v.is_function();
    if (name == "even" || name == "odd" || name == "divisibleby") {
        if (!v.is_int() && !v.is_bool()) render_error(line, "test '%s' needs an integer, not '%s'", name.c_str(), v.type_name());
        int64_t d = 2;
        if (name == "divisibleby") {
            if (!arg.is_int()) render_error(line, "divisibleby needs an integer argument");
            d = arg.as_int();
            if (d == 0) render_error(line, "divisibleby(0)");
            if (d == -1) return true;
        }
        const bool divisible = v.as_int() % d == 0;
        return name == "odd" ? !divisible : divisible;
    }
    if (name == "lower" || name == "upper") {
        if (!v.is_string()) return false;
        const std::string &s = v.as_string();
        return s == ascii_case(s, name == "upper");
    }
    if (name == "eq" || name == "equalto" || name == "==") return equals(v, arg);
    if (name == "ne" || name == "!=") return !equals(v, arg);
    if (name == "sameas") {
        if (v.is_none() || v.is_bool() || v.is_undefined()) return v.kind() == arg.kind() && equals(v, arg);
        return false;
    }
    if (name == "in") {
        if (arg.is_string()) return v.is_string() && arg.as_string().find(v.as_string()) != std::string::npos;
        if (arg.is_list()) {
            for (const Value &x : arg.as_list())
                if (equals(x, v)) return true;
            return false;
        }
        if (arg.is_dict()) return arg.as_dict().find(v) != nullptr;
        render_error(line, "test 'in' needs a string, list or dict");
    }
    // Orderings.
    const bool nums = v.is_number() && arg.is_number(), strs = v.is_string() && arg.is_string();
    if (!nums && !strs) render_error(line, "test '%s' cannot compare '%s' and '%s'", name.c_str(), v.type_name(), arg.type_name());
    const int cmp = nums ? (v.as_float() < arg.as_float() ? -1 : v.as_float() > arg.as_float() ? 1 : 0)
                         : v.as_string().compare(arg.as_string());
    if (name == "lt" || name == "<" || name == "lessthan") return cmp < 0;
    if (name == "le" || name == "<=") return cmp <= 0;
    if (name == "gt" || name == ">" || name == "greaterthan") return cmp > 0;
    if (name == "ge" || name == ">=") return cmp >= 0;
    unsupported(line, "the test '%s' is not supported", name.c_str());
}

} // namespace ember::jinja
