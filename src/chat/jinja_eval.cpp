// jinja_eval.cpp — rendering: statements write to the output, expressions compute Values with Python's
// operator semantics (int overflow and division by zero are errors, not undefined behaviour).
#include "chat/jinja.hpp"

#include "chat/jinja_builtins.hpp"
#include "chat/jinja_context.hpp"
#include "chat/jinja_error.hpp"

#include <climits>
#include <cmath>
#include <optional>

namespace ember::jinja {

// Context -------------------------------------------------------------------------------------------

const Value *Context::lookup(const std::string &name) const {
    for (size_t i = frames_.size(); i-- > base_;) {
        auto it = frames_[i].find(name);
        if (it != frames_[i].end()) return &it->second;
    }
    auto it = frames_.front().find(name);
    return it != frames_.front().end() ? &it->second : nullptr;
}

size_t Context::enter_call(int line) {
    if (++call_depth_ > limits_.max_call_depth)
        render_error(line, "macro calls nested deeper than %d (runaway recursion?)", limits_.max_call_depth);
    const size_t saved = base_;
    frames_.emplace_back();
    base_ = frames_.size() - 1;
    return saved;
}

void Context::leave_call(size_t saved_base) {
    frames_.pop_back();
    base_ = saved_base;
    --call_depth_;
}

void Context::write(std::string_view s, int line) {
    check_size(out->size() + s.size(), line);
    out->append(s);
}

void Context::check_size(size_t bytes, int line) const {
    if (bytes > limits_.max_output)
        render_error(line, "a string of the output would exceed %zu bytes (runaway template?)", limits_.max_output);
}

void Context::check_items(size_t n, int line) const {
    if (n > limits_.max_items) render_error(line, "a list would exceed %zu items (runaway template?)", limits_.max_items);
}

void Context::charge(size_t bytes, int line) {
    check_time(line);   // values are built outside steps too (a range(10^6) takes a while)
    allocated_ += bytes;
    if (allocated_ > limits_.max_alloc)
        render_error(line, "the template built more than %llu bytes of values (runaway template?)",
                     (unsigned long long)limits_.max_alloc);
}

// What building v cost, for Context::charge: its text, or its elements.
static size_t value_bytes(const Value &v) {
    if (v.is_string()) return v.as_string().size();
    if (v.is_list()) return v.as_list().size() * sizeof(Value);
    if (v.is_dict()) return v.as_dict().items.size() * 2 * sizeof(Value);
    return 0;
}

void Context::step(int line) {
    if (++steps_ > limits_.max_steps)
        render_error(line, "more than %llu steps executed (runaway loop?)", (unsigned long long)limits_.max_steps);
    // The clock every 256 steps: a step is a microsecond or two, a clock read some 20 ns.
    if ((steps_ & 255) == 0) check_time(line);
}

void Context::check_time(int line) const {
    if (limits_.max_time.count() > 0 && std::chrono::steady_clock::now() > deadline_)
        render_error(line, "the template ran longer than %lld ms (runaway loop?)", (long long)limits_.max_time.count());
}

namespace {

// Expressions ---------------------------------------------------------------------------------------

[[noreturn]] void operand_error(int line, const char *op, const Value &a, const Value &b) {
    if (a.is_undefined() || b.is_undefined()) {
        const Value &u = a.is_undefined() ? a : b;
        render_error(line, "'%s' is undefined (operand of '%s')", u.as_string().empty() ? "value" : u.as_string().c_str(), op);
    }
    render_error(line, "unsupported operand types for %s: '%s' and '%s'", op, a.type_name(), b.type_name());
}

Value arith(const std::string &op, const Value &a, const Value &b, int line, Context &ctx) {
    const bool ints = (a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool());
    if (op == "+") {
        if (ints) {
            int64_t r = 0;
            if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) render_error(line, "integer overflow");
            return Value::integer(r);
        }
        if (a.is_number() && b.is_number()) return Value::number(a.as_float() + b.as_float());
        if (a.is_string() && b.is_string()) {
            ctx.check_size(a.as_string().size() + b.as_string().size(), line);
            return Value::string(a.as_string() + b.as_string());
        }
        if (a.is_list() && b.is_list()) {
            ctx.check_items(a.as_list().size() + b.as_list().size(), line);
            List r = a.as_list();
            r.insert(r.end(), b.as_list().begin(), b.as_list().end());
            return Value::list(std::move(r));
        }
        operand_error(line, "+", a, b);
    }
    if (op == "-") {
        if (ints) {
            int64_t r = 0;
            if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) render_error(line, "integer overflow");
            return Value::integer(r);
        }
        if (a.is_number() && b.is_number()) return Value::number(a.as_float() - b.as_float());
        operand_error(line, "-", a, b);
    }
    if (op == "*") {
        if (ints) {
            int64_t r = 0;
            if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) render_error(line, "integer overflow");
            return Value::integer(r);
        }
        if (a.is_number() && b.is_number()) return Value::number(a.as_float() * b.as_float());
        const Value *seq = a.is_string() || a.is_list() ? &a : b.is_string() || b.is_list() ? &b : nullptr;
        const Value *n = seq == &a ? &b : &a;
        if (seq && (n->is_int() || n->is_bool())) {
            const int64_t k = n->as_int() < 0 ? 0 : n->as_int();
            if (seq->is_string()) {
                const size_t len = seq->as_string().size();
                if (len && uint64_t(k) > ctx.limits().max_output / len) ctx.check_size(ctx.limits().max_output + 1, line);
                std::string r;
                for (int64_t i = 0; i < k; ++i) r += seq->as_string();
                return Value::string(std::move(r));
            }
            const size_t len = seq->as_list().size();
            if (len && uint64_t(k) > ctx.limits().max_items / len) ctx.check_items(ctx.limits().max_items + 1, line);
            List r;
            for (int64_t i = 0; i < k; ++i) r.insert(r.end(), seq->as_list().begin(), seq->as_list().end());
            return Value::list(std::move(r));
        }
        operand_error(line, "*", a, b);
    }
    if (op == "/" || op == "//" || op == "%") {
        if (!a.is_number() || !b.is_number()) {
            if (op == "%" && a.is_string()) unsupported(line, "string formatting with '%%' is not supported");
            operand_error(line, op.c_str(), a, b);
        }
        if (op == "/") {
            if (b.as_float() == 0) render_error(line, "division by zero");
            return Value::number(a.as_float() / b.as_float());
        }
        if (ints) {
            const int64_t x = a.as_int(), y = b.as_int();
            if (y == 0) render_error(line, "integer division or modulo by zero");
            if (x == INT64_MIN && y == -1) {
                if (op == "%") return Value::integer(0);
                render_error(line, "integer overflow");
            }
            int64_t q = x / y, r = x % y;
            if (r != 0 && ((r < 0) != (y < 0))) {   // Python floors toward negative infinity
                --q;
                r += y;
            }
            return Value::integer(op == "//" ? q : r);
        }
        const double x = a.as_float(), y = b.as_float();
        if (y == 0) render_error(line, "float division or modulo by zero");
        if (op == "//") return Value::number(std::floor(x / y));
        double r = std::fmod(x, y);
        if (r != 0 && ((r < 0) != (y < 0))) r += y;
        return Value::number(r);
    }
    if (op == "**") {
        if (ints && b.as_int() >= 0) {
            int64_t r = 1, base = a.as_int();
            for (int64_t e = b.as_int(); e > 0; --e) {
                if (__builtin_mul_overflow(r, base, &r)) render_error(line, "integer overflow");
                if (r == 0 || r == 1) break;
            }
            return Value::integer(r);
        }
        if (a.is_number() && b.is_number()) return Value::number(std::pow(a.as_float(), b.as_float()));
        operand_error(line, "**", a, b);
    }
    render_error(line, "unknown operator '%s'", op.c_str());
}

bool less(const Value &a, const Value &b, int line, const char *op) {
    if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) return a.as_float() < b.as_float();
        return a.as_int() < b.as_int();
    }
    if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
    if (a.is_list() && b.is_list()) {
        const List &x = a.as_list(), &y = b.as_list();
        for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
            if (!equals(x[i], y[i])) return less(x[i], y[i], line, op);
        }
        return x.size() < y.size();
    }
    render_error(line, "'%s' not supported between '%s' and '%s'", op, a.type_name(), b.type_name());
}

bool contains(const Value &container, const Value &item, int line) {
    if (container.is_string()) {
        if (!item.is_string())
            render_error(line, "'in <string>' requires a string on the left, not '%s'", item.type_name());
        return container.as_string().find(item.as_string()) != std::string::npos;
    }
    if (container.is_list()) {
        for (const Value &x : container.as_list())
            if (equals(x, item)) return true;
        return false;
    }
    if (container.is_dict()) return container.as_dict().find(item) != nullptr;
    if (container.is_undefined()) return false;
    render_error(line, "argument of type '%s' is not iterable", container.type_name());
}

// Python's slice indices for a sequence of length n.
std::vector<size_t> slice_indices(int64_t n, const Value &start, const Value &stop, const Value &stepv, int line) {
    auto as_index = [&](const Value &v, const char *what) -> std::optional<int64_t> {
        if (v.is_undefined() || v.is_none()) return std::nullopt;
        if (!v.is_int() && !v.is_bool()) render_error(line, "slice %s must be an integer, not '%s'", what, v.type_name());
        return v.as_int();
    };
    const int64_t step = as_index(stepv, "step").value_or(1);
    if (step == 0) render_error(line, "slice step cannot be zero");
    auto clamp = [&](std::optional<int64_t> v, int64_t dflt, int64_t lo, int64_t hi) {
        if (!v) return dflt;
        int64_t x = *v;
        if (x < 0) x = x < -n ? lo : x + n;   // x + n cannot overflow: x >= -n here
        if (x < lo) x = lo;
        if (x > hi) x = hi;
        return x;
    };
    std::vector<size_t> idx;
    if (step > 0) {
        const int64_t b = clamp(as_index(start, "start"), 0, 0, n), e = clamp(as_index(stop, "stop"), n, 0, n);
        for (int64_t i = b; i < e; i += step) idx.push_back(size_t(i));
    } else {
        const int64_t b = clamp(as_index(start, "start"), n - 1, -1, n - 1);
        const int64_t e = clamp(as_index(stop, "stop"), -1, -1, n - 1);
        for (int64_t i = b; i > e; i += step) idx.push_back(size_t(i));
    }
    return idx;
}

Value get_item(const Value &obj, const Value &key, int line) {
    if (obj.is_undefined())
        render_error(line, "'%s' is undefined (subscripted)", obj.as_string().empty() ? "value" : obj.as_string().c_str());
    if (obj.is_dict()) {
        const Value *v = obj.as_dict().find(key);
        if (v) return *v;
        if (key.is_string()) return method(obj, key.as_string(), line);   // Jinja falls back to attributes
        return Value::undefined();
    }
    if (obj.is_list() || obj.is_string()) {
        if (!key.is_int() && !key.is_bool()) {
            if (key.is_string()) return method(obj, key.as_string(), line);
            render_error(line, "indices must be integers, not '%s'", key.type_name());
        }
        int64_t i = key.as_int();
        if (obj.is_list()) {
            const int64_t n = int64_t(obj.as_list().size());
            if (i < 0) i += n;
            if (i < 0 || i >= n) return Value::undefined();   // Jinja: an undefined, not an error
            return obj.as_list()[size_t(i)];
        }
        const std::string &s = obj.as_string();
        if (i < 0) i += int64_t(utf8_length(s));
        if (i < 0) return Value::undefined();
        // Walk to the i-th code point (a code point starts at every byte that is not a continuation byte).
        auto starts_at = [&](size_t p) { return p == 0 || (static_cast<unsigned char>(s[p]) & 0xC0) != 0x80; };
        size_t p = 0;
        for (int64_t k = 0; p < s.size(); ++k) {
            size_t q = p + 1;
            while (q < s.size() && !starts_at(q)) ++q;
            if (k == i) return Value::string(s.substr(p, q - p));
            p = q;
        }
        return Value::undefined();
    }
    if (obj.is_none()) render_error(line, "'None' has no items (subscripted)");
    return Value::undefined();
}

Value get_attr(const Value &obj, const std::string &name, int line) {
    if (obj.is_undefined())
        render_error(line, "'%s' is undefined (reading its attribute '%s')",
                     obj.as_string().empty() ? "value" : obj.as_string().c_str(), name.c_str());
    if (obj.is_dict()) {
        const Dict &d = obj.as_dict();
        if (!d.is_namespace && !d.attrs_only) {
            Value m = method(obj, name, line);
            if (!m.is_undefined()) return m;
        }
        const Value *v = d.find(name);
        return v ? *v : Value::undefined(name);
    }
    if (obj.is_none()) render_error(line, "'None' has no attribute '%s'", name.c_str());
    Value m = method(obj, name, line);
    return m.is_undefined() ? Value::undefined(name) : m;
}

void eval_args(const Expr &e, size_t first, CallArgs &args, Context &ctx) {
    args.line = e.line;
    const size_t n_pos = e.kids.size() - first - e.kw_names.size();
    for (size_t i = 0; i < n_pos; ++i) args.args.push_back(eval(*e.kids[first + i], ctx));
    for (size_t k = 0; k < e.kw_names.size(); ++k)
        args.kwargs.emplace_back(e.kw_names[k], eval(*e.kids[first + n_pos + k], ctx));
}

} // namespace

Value eval(const Expr &e, Context &ctx) {
    using K = Expr::Kind;
    switch (e.kind) {
    case K::Literal: return e.value;
    case K::Name: {
        if (const Value *v = ctx.lookup(e.name)) return *v;
        Value g = global_function(e.name);
        return g.is_undefined() ? Value::undefined(e.name) : g;
    }
    case K::List: {
        List items;
        for (const auto &k : e.kids) items.push_back(eval(*k, ctx));
        return Value::list(std::move(items));
    }
    case K::Dict: {
        auto d = std::make_shared<Dict>();
        for (size_t i = 0; i + 1 < e.kids.size(); i += 2) d->set(eval(*e.kids[i], ctx), eval(*e.kids[i + 1], ctx));
        return Value::dict(std::move(d));
    }
    case K::Attr: return get_attr(eval(*e.kids[0], ctx), e.name, e.line);
    case K::Item: {
        Value obj = eval(*e.kids[0], ctx);
        // Indexing a string scans it for code points: counted like building it, so that a loop indexing
        // a long text character by character stops rather than running for hours.
        if (obj.is_string()) ctx.charge(obj.as_string().size(), e.line);
        return get_item(obj, eval(*e.kids[1], ctx), e.line);
    }
    case K::Slice: {
        const Value obj = eval(*e.kids[0], ctx);
        Value parts[3];
        for (int i = 0; i < 3; ++i)
            if (e.kids[size_t(i) + 1]) parts[i] = eval(*e.kids[size_t(i) + 1], ctx);
        if (obj.is_list()) {
            List r;
            for (size_t i : slice_indices(int64_t(obj.as_list().size()), parts[0], parts[1], parts[2], e.line))
                r.push_back(obj.as_list()[i]);
            ctx.charge(r.size() * sizeof(Value), e.line);
            return Value::list(std::move(r));
        }
        if (obj.is_string()) {
            ctx.charge(obj.as_string().size() * 2, e.line);   // the scan, and the offsets' memory
            const std::vector<size_t> off = utf8_offsets(obj.as_string());
            std::string r;
            for (size_t i : slice_indices(int64_t(off.size()) - 1, parts[0], parts[1], parts[2], e.line))
                r.append(obj.as_string(), off[i], off[i + 1] - off[i]);
            ctx.charge(r.size(), e.line);
            return Value::string(std::move(r));
        }
        render_error(e.line, "'%s' cannot be sliced", obj.type_name());
    }
    case K::Call: {
        const Value fn = eval(*e.kids[0], ctx);
        if (!fn.is_function()) {
            if (fn.is_undefined()) {
                const Expr &callee = *e.kids[0];
                if (callee.kind == K::Name)
                    unsupported(e.line, "the function '%s' is not available", callee.name.c_str());
                render_error(e.line, "'%s' is undefined and cannot be called", fn.as_string().c_str());
            }
            render_error(e.line, "'%s' object is not callable", fn.type_name());
        }
        CallArgs args;
        eval_args(e, 1, args, ctx);
        ctx.step(e.line);
        Value r = fn.as_function().call(args, ctx);
        ctx.charge(value_bytes(r), e.line);
        return r;
    }
    case K::Filter: {
        const Value in = eval(*e.kids[0], ctx);
        CallArgs args;
        eval_args(e, 1, args, ctx);
        Value r = apply_filter(e.name, in, args, ctx);
        ctx.charge(value_bytes(r), e.line);
        return r;
    }
    case K::Test: {
        const Value v = eval(*e.kids[0], ctx);
        CallArgs args;
        eval_args(e, 1, args, ctx);
        return Value::boolean(apply_test(e.name, v, args, ctx) != e.negated);
    }
    case K::Unary: {
        const Value v = eval(*e.kids[0], ctx);
        if (e.name == "not") return Value::boolean(!v.truthy());
        if (v.is_int() || v.is_bool()) {
            if (e.name == "+") return Value::integer(v.as_int());
            if (v.as_int() == INT64_MIN) render_error(e.line, "integer overflow");
            return Value::integer(-v.as_int());
        }
        if (v.is_float()) return Value::number(e.name == "-" ? -v.as_float() : v.as_float());
        render_error(e.line, "bad operand type for unary %s: '%s'", e.name.c_str(), v.type_name());
    }
    case K::Binary: {
        const std::string &op = e.name;
        if (op == "and") {
            Value a = eval(*e.kids[0], ctx);
            return a.truthy() ? eval(*e.kids[1], ctx) : a;
        }
        if (op == "or") {
            Value a = eval(*e.kids[0], ctx);
            return a.truthy() ? a : eval(*e.kids[1], ctx);
        }
        const Value a = eval(*e.kids[0], ctx);
        const Value b = eval(*e.kids[1], ctx);
        if (op == "==") return Value::boolean(equals(a, b));
        if (op == "!=") return Value::boolean(!equals(a, b));
        if (op == "<") return Value::boolean(less(a, b, e.line, "<"));
        if (op == ">") return Value::boolean(less(b, a, e.line, ">"));
        if (op == "<=") return Value::boolean(!less(b, a, e.line, "<="));
        if (op == ">=") return Value::boolean(!less(a, b, e.line, ">="));
        if (op == "in") return Value::boolean(contains(b, a, e.line));
        if (op == "not in") return Value::boolean(!contains(b, a, e.line));
        if (op == "~") {
            std::string s = to_str(a);
            const std::string t = to_str(b);
            ctx.check_size(s.size() + t.size(), e.line);
            ctx.charge(s.size() + t.size(), e.line);
            return Value::string(s + t);
        }
        Value r = arith(op, a, b, e.line, ctx);
        ctx.charge(value_bytes(r), e.line);
        return r;
    }
    case K::Cond:
        if (eval(*e.kids[1], ctx).truthy()) return eval(*e.kids[0], ctx);
        return e.kids[2] ? eval(*e.kids[2], ctx) : Value::undefined();
    }
    render_error(e.line, "unknown expression");
}

// Statements -----------------------------------------------------------------------------------------

namespace {

enum class Flow { Normal, Break, Continue };

Flow exec(const Body &body, Context &ctx);

void bind_targets(const std::vector<std::string> &targets, const Value &v, Context &ctx, int line) {
    if (targets.size() == 1) {
        ctx.set(targets[0], v);
        return;
    }
    if (!v.is_list()) render_error(line, "cannot unpack '%s' into %zu names", v.type_name(), targets.size());
    if (v.as_list().size() != targets.size())
        render_error(line, "cannot unpack %zu values into %zu names", v.as_list().size(), targets.size());
    for (size_t i = 0; i < targets.size(); ++i) ctx.set(targets[i], v.as_list()[i]);
}

Value make_loop(const List &items, size_t i) {
    auto d = std::make_shared<Dict>();
    const int64_t n = int64_t(items.size()), k = int64_t(i);
    d->set(Value::string("index"), Value::integer(k + 1));
    d->set(Value::string("index0"), Value::integer(k));
    d->set(Value::string("revindex"), Value::integer(n - k));
    d->set(Value::string("revindex0"), Value::integer(n - k - 1));
    d->set(Value::string("first"), Value::boolean(k == 0));
    d->set(Value::string("last"), Value::boolean(k == n - 1));
    d->set(Value::string("length"), Value::integer(n));
    d->set(Value::string("depth"), Value::integer(1));
    d->set(Value::string("depth0"), Value::integer(0));
    if (i > 0) d->set(Value::string("previtem"), items[i - 1]);
    if (i + 1 < items.size()) d->set(Value::string("nextitem"), items[i + 1]);
    d->set(Value::string("cycle"), Value::function("loop.cycle", [k](CallArgs &a, Context &) {
        if (a.args.empty()) render_error(a.line, "loop.cycle() needs at least one argument");
        return a.args[size_t(k) % a.args.size()];
    }));
    d->attrs_only = true;
    return Value::dict(std::move(d));
}

Flow exec_for(const Stmt &s, Context &ctx) {
    const Value seq = eval(*s.expr, ctx);
    List all = items_of(seq, s.line, ctx);
    ctx.push_frame();
    List items;
    if (s.cond) {
        for (const Value &v : all) {
            ctx.step(s.line);
            bind_targets(s.targets, v, ctx, s.line);
            if (eval(*s.cond, ctx).truthy()) items.push_back(v);
        }
    } else {
        items = std::move(all);
    }
    for (size_t i = 0; i < items.size(); ++i) {
        ctx.step(s.line);
        bind_targets(s.targets, items[i], ctx, s.line);
        ctx.set("loop", make_loop(items, i));
        if (exec(s.bodies[0], ctx) == Flow::Break) break;
    }
    ctx.pop_frame();
    if (items.empty()) return exec(s.else_body, ctx);
    return Flow::Normal;
}

Value make_macro(const Stmt &s) {
    const Stmt *m = &s;   // the template's body outlives every render, hence every macro value
    return Value::function(s.name, [m](CallArgs &a, Context &ctx) {
        if (a.args.size() > m->targets.size())
            render_error(a.line, "macro '%s' takes %zu arguments, %zu given", m->name.c_str(), m->targets.size(),
                         a.args.size());
        // Defaults are evaluated in the caller's scope before the macro's frame is entered.
        List values;
        for (size_t i = 0; i < m->targets.size(); ++i) {
            Value v = a.get(i, m->targets[i]);
            if (!a.has(i, m->targets[i]) && m->defaults[i]) v = eval(*m->defaults[i], ctx);
            values.push_back(std::move(v));
        }
        for (const auto &kw : a.kwargs) {
            bool known = false;
            for (const auto &t : m->targets) known = known || t == kw.first;
            if (!known) render_error(a.line, "macro '%s' has no parameter '%s'", m->name.c_str(), kw.first.c_str());
        }
        const size_t saved = ctx.enter_call(a.line);
        std::string out;
        std::string *saved_out = ctx.out;
        ctx.out = &out;
        try {
            for (size_t i = 0; i < values.size(); ++i) ctx.set(m->targets[i], values[i]);
            exec(m->bodies[0], ctx);
        } catch (...) {
            ctx.out = saved_out;
            ctx.leave_call(saved);
            throw;
        }
        ctx.out = saved_out;
        ctx.leave_call(saved);
        return Value::string(std::move(out));
    });
}

Flow exec(const Body &body, Context &ctx) {
    for (const auto &sp : body) {
        const Stmt &s = *sp;
        ctx.step(s.line);
        switch (s.kind) {
        case Stmt::Kind::Text: ctx.write(s.text, s.line); break;
        case Stmt::Kind::Output: {
            const Value v = eval(*s.expr, ctx);
            if (v.is_string()) {
                ctx.write(v.as_string(), s.line);
            } else {
                ctx.write(to_str(v), s.line);
            }
            break;
        }
        case Stmt::Kind::If: {
            bool done = false;
            for (size_t i = 0; i < s.conds.size() && !done; ++i) {
                if (eval(*s.conds[i], ctx).truthy()) {
                    done = true;
                    const Flow f = exec(s.bodies[i], ctx);
                    if (f != Flow::Normal) return f;
                }
            }
            if (!done) {
                const Flow f = exec(s.else_body, ctx);
                if (f != Flow::Normal) return f;
            }
            break;
        }
        case Stmt::Kind::For: {
            const Flow f = exec_for(s, ctx);
            if (f != Flow::Normal) return f;
            break;
        }
        case Stmt::Kind::Set: {
            Value v = eval(*s.expr, ctx);
            if (!s.name.empty()) {
                const Value *ns = ctx.lookup(s.name);
                if (!ns || !ns->is_dict() || !ns->as_dict().is_namespace)
                    render_error(s.line, "cannot assign the attribute '%s' of '%s': only a namespace() takes "
                                 "attribute assignments", s.targets[0].c_str(), s.name.c_str());
                ns->as_dict().set(Value::string(s.targets[0]), std::move(v));
            } else {
                bind_targets(s.targets, v, ctx, s.line);
            }
            break;
        }
        case Stmt::Kind::SetBlock: {
            std::string captured;
            std::string *saved = ctx.out;
            ctx.out = &captured;
            try {
                exec(s.bodies[0], ctx);
            } catch (...) {
                ctx.out = saved;
                throw;
            }
            ctx.out = saved;
            ctx.charge(captured.size(), s.line);
            ctx.set(s.targets[0], Value::string(std::move(captured)));
            break;
        }
        case Stmt::Kind::Macro: ctx.set(s.name, make_macro(s)); break;
        case Stmt::Kind::Break: return Flow::Break;
        case Stmt::Kind::Continue: return Flow::Continue;
        }
    }
    return Flow::Normal;
}

} // namespace

// Template -------------------------------------------------------------------------------------------

Template::Template(std::string_view src) : body_(std::make_shared<const Body>(parse(src))) {}

std::string Template::render(const Variables &vars, const Limits &limits) const {
    Context ctx(limits);
    for (const auto &kv : vars) ctx.set_global(kv.first, kv.second);
    std::string out;
    ctx.out = &out;
    exec(*body_, ctx);
    return out;
}

Context::~Context() {
    // A namespace can hold itself (`set ns.me = [ns]`): emptying every namespace breaks such cycles,
    // which shared ownership alone would never free.
    for (const auto &ns : namespaces_) ns->items.clear();
}

} // namespace ember::jinja
