// jinja_parser.cpp — tokens to statements and expressions, with Jinja's operator precedence (lowest
// first): `x if c else y`, or, and, not, comparisons and `in`, + -, ~, * / // %, unary - +, then postfix
// `.attr` `[i]` `[a:b:c]` `(args)` and, binding tightest, filters `| f` and tests `is t`.
#include "chat/jinja_ast.hpp"

#include "chat/jinja_builtins.hpp"
#include "chat/jinja_error.hpp"
#include "chat/jinja_lexer.hpp"

#include <initializer_list>

namespace ember::jinja {

namespace {

// Nesting deeper than this (expressions or blocks) is refused rather than risking the stack.
constexpr int kMaxNesting = 100;
// Expression trees deeper than this are refused: `a + a + ... + a` nests without brackets.
constexpr int kMaxExprDepth = 200;

// Jinja tags outside the subset: reported as unsupported rather than as syntax errors.
constexpr const char *kUnsupportedTags[] = {
    "include", "extends", "block", "import", "from", "call", "filter", "with", "raw", "do", "autoescape",
    "trans", "pluralize", "endblock", "endcall", "endfilter", "endwith", "endraw", "endautoescape",
};

class Parser {
public:
    explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

    Body parse_template() {
        Body body = parse_body({});
        if (peek().type != Tok::End) error_here("unexpected tag");
        return body;
    }

private:
    const Token &peek(size_t ahead = 0) const {
        const size_t i = pos_ + ahead;
        return i < t_.size() ? t_[i] : t_.back();
    }
    const Token &next() {
        const Token &t = peek();
        if (pos_ < t_.size() - 1) ++pos_;
        return t;
    }
    bool is_op(const char *op, size_t ahead = 0) const {
        const Token &t = peek(ahead);
        return t.type == Tok::Op && t.text == op;
    }
    bool is_name(const char *name, size_t ahead = 0) const {
        const Token &t = peek(ahead);
        return t.type == Tok::Name && t.text == name;
    }
    [[noreturn]] void error_here(const char *what) {
        const Token &t = peek();
        std::string found;
        switch (t.type) {
        case Tok::End: found = "end of template"; break;
        case Tok::Text: found = "text"; break;
        case Tok::VarBegin: found = "'{{'"; break;
        case Tok::VarEnd: found = "'}}'"; break;
        case Tok::BlockBegin: found = "'{%'"; break;
        case Tok::BlockEnd: found = "'%}'"; break;
        case Tok::String: found = "a string"; break;
        case Tok::Int:
        case Tok::Float: found = "a number"; break;
        default: found = "'" + t.text + "'";
        }
        syntax_error(t.line, t.col, "%s (found %s)", what, found.c_str());
    }
    void expect_op(const char *op) {
        if (!is_op(op)) error_here((std::string("expected '") + op + "'").c_str());
        next();
    }
    void expect(Tok type, const char *what) {
        if (peek().type != type) error_here((std::string("expected ") + what).c_str());
        next();
    }
    std::string expect_name(const char *what) {
        if (peek().type != Tok::Name) error_here((std::string("expected ") + what).c_str());
        return next().text;
    }
    void enter() {
        if (++depth_ > kMaxNesting) error_here("nesting too deep");
    }
    void leave() { --depth_; }

    // Statements until a `{% name %}` whose name is one of `ends` (left unconsumed after its name:
    // the position is at the name) or the end of the template (an error if ends is not empty).
    Body parse_body(std::initializer_list<const char *> ends) {
        enter();
        Body body;
        for (;;) {
            const Token &t = peek();
            if (t.type == Tok::End) {
                if (ends.size() != 0) {
                    std::string want;
                    for (const char *e : ends) want += std::string(want.empty() ? "" : " or ") + "'" + e + "'";
                    error_here(("missing " + want).c_str());
                }
                break;
            }
            if (t.type == Tok::Text) {
                auto s = std::make_unique<Stmt>();
                s->kind = Stmt::Kind::Text;
                s->line = t.line;
                s->text = t.text;
                body.push_back(std::move(s));
                next();
                continue;
            }
            if (t.type == Tok::VarBegin) {
                auto s = std::make_unique<Stmt>();
                s->kind = Stmt::Kind::Output;
                s->line = t.line;
                next();
                s->expr = parse_expr();
                expect(Tok::VarEnd, "'}}'");
                body.push_back(std::move(s));
                continue;
            }
            if (t.type != Tok::BlockBegin) error_here("unexpected token");
            const Token &tag = peek(1);
            if (tag.type != Tok::Name) {
                next();
                error_here("expected a tag name after '{%'");
            }
            bool is_end = false;
            for (const char *e : ends)
                if (tag.text == e) is_end = true;
            if (is_end) {
                next();   // {%
                break;
            }
            next();
            body.push_back(parse_statement());
        }
        leave();
        return body;
    }

    std::unique_ptr<Stmt> parse_statement() {
        const Token tag = next();   // the tag name
        auto s = std::make_unique<Stmt>();
        s->line = tag.line;
        const std::string &n = tag.text;
        if (n == "if") {
            s->kind = Stmt::Kind::If;
            s->conds.push_back(parse_expr());
            expect(Tok::BlockEnd, "'%}'");
            for (;;) {
                s->bodies.push_back(parse_body({"elif", "else", "endif"}));
                const std::string end = next().text;
                if (end == "elif") {
                    s->conds.push_back(parse_expr());
                    expect(Tok::BlockEnd, "'%}'");
                    continue;
                }
                expect(Tok::BlockEnd, "'%}'");
                if (end == "else") {
                    s->else_body = parse_body({"endif"});
                    next();
                    expect(Tok::BlockEnd, "'%}'");
                }
                break;
            }
        } else if (n == "for") {
            s->kind = Stmt::Kind::For;
            s->targets = parse_targets();
            if (!is_name("in")) error_here("expected 'in'");
            next();
            s->expr = parse_or_test();   // no ternary: its `if` would take the loop filter
            if (is_name("if")) {
                next();
                s->cond = parse_or_test();
            }
            if (is_name("recursive")) unsupported(peek().line, "recursive for loops are not supported");
            expect(Tok::BlockEnd, "'%}'");
            s->bodies.push_back(parse_body({"else", "endfor"}));
            const std::string end = next().text;
            expect(Tok::BlockEnd, "'%}'");
            if (end == "else") {
                s->else_body = parse_body({"endfor"});
                next();
                expect(Tok::BlockEnd, "'%}'");
            }
        } else if (n == "set") {
            // set a = x | set a, b = x | set ns.attr = x | set a %}...{% endset
            std::string first = expect_name("a variable name after 'set'");
            if (is_op(".")) {
                next();
                s->kind = Stmt::Kind::Set;
                s->name = first;
                s->targets.push_back(expect_name("an attribute name"));
                expect_op("=");
                s->expr = parse_expr();
                expect(Tok::BlockEnd, "'%}'");
            } else {
                s->targets.push_back(first);
                while (is_op(",")) {
                    next();
                    s->targets.push_back(expect_name("a variable name"));
                }
                if (peek().type == Tok::BlockEnd && s->targets.size() == 1) {
                    next();
                    s->kind = Stmt::Kind::SetBlock;
                    s->bodies.push_back(parse_body({"endset"}));
                    next();
                    expect(Tok::BlockEnd, "'%}'");
                } else {
                    s->kind = Stmt::Kind::Set;
                    expect_op("=");
                    s->expr = parse_tuple_or_expr();
                    expect(Tok::BlockEnd, "'%}'");
                }
            }
        } else if (n == "macro") {
            s->kind = Stmt::Kind::Macro;
            s->name = expect_name("a macro name");
            expect_op("(");
            while (!is_op(")")) {
                s->targets.push_back(expect_name("a parameter name"));
                if (is_op("=")) {
                    next();
                    s->defaults.push_back(parse_expr());
                } else {
                    s->defaults.push_back(nullptr);
                }
                if (!is_op(",")) break;
                next();
            }
            expect_op(")");
            expect(Tok::BlockEnd, "'%}'");
            s->bodies.push_back(parse_body({"endmacro"}));
            next();
            expect(Tok::BlockEnd, "'%}'");
        } else if (n == "break" || n == "continue") {
            s->kind = n == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue;
            expect(Tok::BlockEnd, "'%}'");
        } else if (n == "generation") {
            // transformers' AssistantTracker tag: marks assistant text for training masks. Rendering
            // is unaffected, so its body is inlined (as an always-true if).
            s->kind = Stmt::Kind::If;
            s->conds.push_back(literal(Value::boolean(true), tag.line));
            expect(Tok::BlockEnd, "'%}'");
            s->bodies.push_back(parse_body({"endgeneration"}));
            next();
            expect(Tok::BlockEnd, "'%}'");
        } else {
            for (const char *u : kUnsupportedTags)
                if (n == u) unsupported(tag.line, "the tag '{%% %s %%}' is not supported", n.c_str());
            syntax_error(tag.line, tag.col, "unknown tag '%s'", n.c_str());
        }
        return s;
    }

    // for/set targets: a name or names separated by commas, optionally in parentheses.
    std::vector<std::string> parse_targets() {
        std::vector<std::string> names;
        const bool paren = is_op("(");
        if (paren) next();
        names.push_back(expect_name("a loop variable name"));
        while (is_op(",")) {
            next();
            names.push_back(expect_name("a loop variable name"));
        }
        if (paren) expect_op(")");
        return names;
    }

    static ExprPtr literal(Value v, int line) {
        auto e = std::make_unique<Expr>();
        e->kind = Expr::Kind::Literal;
        e->value = std::move(v);
        e->line = line;
        return e;
    }
    static ExprPtr make(Expr::Kind kind, int line, std::string name = {}) {
        auto e = std::make_unique<Expr>();
        e->kind = kind;
        e->line = line;
        e->name = std::move(name);
        return e;
    }

    // `a, b` without brackets (after `set x =`) is a tuple.
    ExprPtr parse_tuple_or_expr() {
        ExprPtr first = parse_expr();
        if (!is_op(",")) return first;
        auto list = make(Expr::Kind::List, first->line);
        list->kids.push_back(std::move(first));
        while (is_op(",")) {
            next();
            list->kids.push_back(parse_expr());
        }
        return checked(std::move(list));
    }

    ExprPtr parse_expr() {
        enter();
        ExprPtr e = parse_or_test();
        while (is_name("if")) {
            const int line = peek().line;
            next();
            auto c = make(Expr::Kind::Cond, line);
            c->kids.push_back(std::move(e));
            c->kids.push_back(parse_or_test());
            if (is_name("else")) {
                next();
                c->kids.push_back(parse_expr());
            } else {
                c->kids.push_back(nullptr);
            }
            e = checked(std::move(c));
        }
        leave();
        return e;
    }

    ExprPtr binary(const std::string &op, ExprPtr a, ExprPtr b, int line) {
        auto e = make(Expr::Kind::Binary, line, op);
        e->kids.push_back(std::move(a));
        e->kids.push_back(std::move(b));
        return checked(std::move(e));
    }

    // Sets e's depth from its children's, refusing trees too deep to evaluate safely.
    ExprPtr checked(ExprPtr e) {
        int d = 0;
        for (const auto &k : e->kids)
            if (k && k->depth > d) d = k->depth;
        e->depth = d + 1;
        if (e->depth > kMaxExprDepth) error_here("expression nesting too deep");
        return e;
    }

    ExprPtr parse_or_test() {
        ExprPtr e = parse_and();
        while (is_name("or")) {
            const int line = next().line;
            e = binary("or", std::move(e), parse_and(), line);
        }
        return e;
    }
    ExprPtr parse_and() {
        ExprPtr e = parse_not();
        while (is_name("and")) {
            const int line = next().line;
            e = binary("and", std::move(e), parse_not(), line);
        }
        return e;
    }
    ExprPtr parse_not() {
        if (is_name("not")) {
            const int line = next().line;
            enter();
            auto e = make(Expr::Kind::Unary, line, "not");
            e->kids.push_back(parse_not());
            leave();
            return checked(std::move(e));
        }
        return parse_compare();
    }
    ExprPtr parse_compare() {
        ExprPtr e = parse_math1();
        for (;;) {
            const Token &t = peek();
            std::string op;
            if (t.type == Tok::Op && (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == "<=" ||
                                      t.text == ">" || t.text == ">=")) {
                op = t.text;
                next();
            } else if (is_name("in")) {
                op = "in";
                next();
            } else if (is_name("not") && is_name("in", 1)) {
                op = "not in";
                next();
                next();
            } else {
                return e;
            }
            e = binary(op, std::move(e), parse_math1(), t.line);
        }
    }
    ExprPtr parse_math1() {
        ExprPtr e = parse_concat();
        while (is_op("+") || is_op("-")) {
            const Token &t = next();
            e = binary(t.text, std::move(e), parse_concat(), t.line);
        }
        return e;
    }
    ExprPtr parse_concat() {
        ExprPtr e = parse_math2();
        while (is_op("~")) {
            const int line = next().line;
            e = binary("~", std::move(e), parse_math2(), line);
        }
        return e;
    }
    ExprPtr parse_math2() {
        ExprPtr e = parse_pow();
        while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
            const Token &t = next();
            e = binary(t.text, std::move(e), parse_pow(), t.line);
        }
        return e;
    }
    ExprPtr parse_pow() {
        ExprPtr e = parse_unary(true);
        while (is_op("**")) {
            const int line = next().line;
            e = binary("**", std::move(e), parse_unary(true), line);
        }
        return e;
    }
    ExprPtr parse_unary(bool with_filter) {
        enter();
        ExprPtr e;
        if (is_op("-") || is_op("+")) {
            const Token &t = next();
            e = make(Expr::Kind::Unary, t.line, t.text);
            e->kids.push_back(parse_unary(false));
            e = checked(std::move(e));
        } else {
            e = parse_primary();
        }
        e = parse_postfix(std::move(e));
        if (with_filter) e = parse_filters(std::move(e));
        leave();
        return e;
    }

    ExprPtr parse_primary() {
        const Token &t = peek();
        switch (t.type) {
        case Tok::Name: {
            next();
            if (t.text == "true" || t.text == "True") return literal(Value::boolean(true), t.line);
            if (t.text == "false" || t.text == "False") return literal(Value::boolean(false), t.line);
            if (t.text == "none" || t.text == "None") return literal(Value::none(), t.line);
            return make(Expr::Kind::Name, t.line, t.text);
        }
        case Tok::String: {
            std::string s = next().text;
            while (peek().type == Tok::String) s += next().text;   // adjacent literals concatenate
            return literal(Value::string(std::move(s)), t.line);
        }
        case Tok::Int: return literal(Value::integer(next().i), t.line);
        case Tok::Float: return literal(Value::number(next().f), t.line);
        case Tok::Op:
            if (t.text == "(") {
                next();
                if (is_op(")")) {   // the empty tuple
                    next();
                    return make(Expr::Kind::List, t.line);
                }
                ExprPtr e = parse_expr();
                if (is_op(",")) {
                    auto list = make(Expr::Kind::List, t.line);
                    list->kids.push_back(std::move(e));
                    while (is_op(",")) {
                        next();
                        if (is_op(")")) break;
                        list->kids.push_back(parse_expr());
                    }
                    e = std::move(list);
                }
                expect_op(")");
                return checked(std::move(e));
            }
            if (t.text == "[") {
                next();
                auto list = make(Expr::Kind::List, t.line);
                while (!is_op("]")) {
                    list->kids.push_back(parse_expr());
                    if (!is_op(",")) break;
                    next();
                }
                expect_op("]");
                return checked(std::move(list));
            }
            if (t.text == "{") {
                next();
                auto dict = make(Expr::Kind::Dict, t.line);
                while (!is_op("}")) {
                    dict->kids.push_back(parse_expr());
                    expect_op(":");
                    dict->kids.push_back(parse_expr());
                    if (!is_op(",")) break;
                    next();
                }
                expect_op("}");
                return checked(std::move(dict));
            }
            break;
        default: break;
        }
        error_here("expected an expression");
    }

    ExprPtr parse_postfix(ExprPtr e) {
        for (;;) {
            if (is_op(".")) {
                const int line = next().line;
                const Token &t = peek();
                auto a = make(Expr::Kind::Attr, line);
                if (t.type == Tok::Name) {
                    a->name = next().text;
                } else if (t.type == Tok::Int) {   // x.0 is x[0] in Jinja
                    a->kind = Expr::Kind::Item;
                    a->kids.push_back(std::move(e));
                    a->kids.push_back(literal(Value::integer(next().i), line));
                    e = checked(std::move(a));
                    continue;
                } else {
                    error_here("expected an attribute name after '.'");
                }
                a->kids.push_back(std::move(e));
                e = checked(std::move(a));
            } else if (is_op("[")) {
                const int line = next().line;
                ExprPtr parts[3];
                int n = 0;
                bool slice = false;
                for (;;) {
                    if (is_op(":")) {
                        slice = true;
                        next();
                        if (++n > 2) error_here("too many ':' in a slice");
                        continue;
                    }
                    if (is_op("]")) break;
                    if (parts[n]) error_here("expected ':' or ']'");
                    parts[n] = parse_expr();
                }
                next();
                if (!slice) {
                    if (!parts[0]) error_here("empty subscript");
                    auto it = make(Expr::Kind::Item, line);
                    it->kids.push_back(std::move(e));
                    it->kids.push_back(std::move(parts[0]));
                    e = checked(std::move(it));
                } else {
                    auto sl = make(Expr::Kind::Slice, line);
                    sl->kids.push_back(std::move(e));
                    for (auto &p : parts) sl->kids.push_back(std::move(p));
                    e = checked(std::move(sl));
                }
            } else if (is_op("(")) {
                auto c = make(Expr::Kind::Call, peek().line);
                c->kids.push_back(std::move(e));
                parse_call_args(*c);
                e = checked(std::move(c));
            } else {
                return e;
            }
        }
    }

    // "(a, b, k=v)" into e.kids (after what is there) and e.kw_names.
    void parse_call_args(Expr &e) {
        expect_op("(");
        while (!is_op(")")) {
            if (peek().type == Tok::Name && is_op("=", 1)) {
                e.kw_names.push_back(next().text);
                next();
                e.kids.push_back(parse_expr());
            } else {
                if (!e.kw_names.empty()) error_here("positional argument after a keyword argument");
                e.kids.push_back(parse_expr());
            }
            if (!is_op(",")) break;
            next();
        }
        expect_op(")");
    }

    ExprPtr parse_filters(ExprPtr e) {
        for (;;) {
            if (is_op("|")) {
                next();
                const Token &t = peek();
                const std::string name = expect_name("a filter name after '|'");
                if (!is_filter(name)) unsupported(t.line, "the filter '%s' is not supported", name.c_str());
                auto f = make(Expr::Kind::Filter, t.line, name);
                f->kids.push_back(std::move(e));
                if (is_op("(")) parse_call_args(*f);
                e = checked(std::move(f));
            } else if (is_name("is")) {
                next();
                bool negated = false;
                if (is_name("not")) {
                    next();
                    negated = true;
                }
                const Token &t = peek();
                std::string name;
                if (t.type == Tok::Name) {
                    name = next().text;
                } else if (t.type == Tok::Op && (t.text == "==" || t.text == "!=" || t.text == "<" ||
                                                 t.text == "<=" || t.text == ">" || t.text == ">=")) {
                    name = next().text;
                } else {
                    error_here("expected a test name after 'is'");
                }
                if (name == "none" || name == "None") name = "none";
                if (name == "true" || name == "True") name = "true";
                if (name == "false" || name == "False") name = "false";
                if (!is_test(name)) unsupported(t.line, "the test '%s' is not supported", name.c_str());
                auto x = make(Expr::Kind::Test, t.line, name);
                x->negated = negated;
                x->kids.push_back(std::move(e));
                if (is_op("(")) {
                    parse_call_args(*x);
                } else if (starts_test_argument()) {
                    // `is divisibleby 3`, `is sameas false`: one argument without parentheses.
                    x->kids.push_back(parse_unary(false));
                }
                e = checked(std::move(x));
            } else {
                return e;
            }
        }
    }

    bool starts_test_argument() const {
        const Token &t = peek();
        if (t.type == Tok::String || t.type == Tok::Int || t.type == Tok::Float) return true;
        if (t.type == Tok::Op) return t.text == "[" || t.text == "{" || t.text == "-";
        if (t.type != Tok::Name) return false;
        for (const char *kw : {"and", "or", "if", "else", "in", "not", "is"})
            if (t.text == kw) return false;
        return true;
    }

    std::vector<Token> t_;
    size_t pos_ = 0;
    int depth_ = 0;
};

} // namespace

Body parse(std::string_view src) { return Parser(lex(src)).parse_template(); }

} // namespace ember::jinja
