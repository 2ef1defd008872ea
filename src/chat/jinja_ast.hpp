// jinja_ast.hpp — the parsed template: statements holding expressions.
#pragma once

#include "chat/jinja_value.hpp"

#include <memory>
#include <string>
#include <vector>

namespace ember::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
    enum class Kind {
        Literal,   // value
        Name,      // name
        List,      // kids: the items (tuples are lists too)
        Dict,      // kids: key, value, key, value, ...
        Attr,      // kids[0].name
        Item,      // kids[0][kids[1]]
        Slice,     // kids[0][kids[1]:kids[2]:kids[3]] (missing parts are null)
        Call,      // kids[0](kids[1..]); the last kw_names.size() arguments are keyword arguments
        Filter,    // kids[0] | name(kids[1..])
        Test,      // kids[0] is [not] name(kids[1..])
        Unary,     // op kids[0]: "-", "+", "not"
        Binary,    // kids[0] op kids[1]: arithmetic, "~", comparisons, "in", "not in", "and", "or"
        Cond,      // kids[0] if kids[1] else kids[2] (kids[2] null: undefined)
    };
    Kind kind = Kind::Literal;
    int line = 0;
    std::string name;   // Name, Attr, Call (unused), Filter, Test; the operator of Unary/Binary
    Value value;        // Literal
    std::vector<ExprPtr> kids;
    std::vector<std::string> kw_names;
    bool negated = false;   // Test: "is not"
    int depth = 1;          // of the tree below (evaluation recurses this deep)
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
    enum class Kind {
        Text,       // text
        Output,     // {{ expr }}
        If,         // conds[i] -> bodies[i]; else_body
        For,        // for targets in expr [if cond]: bodies[0]; else_body
        Set,        // set targets = expr, or set attr_of.targets[0] = expr (namespace attribute)
        SetBlock,   // set targets[0] %}bodies[0]{% endset
        Macro,      // macro name(targets = defaults): bodies[0]
        Break,
        Continue,
    };
    Kind kind = Kind::Text;
    int line = 0;
    std::string text;
    std::string name;                    // Macro: its name; Set: the namespace variable ("" for plain)
    ExprPtr expr;                        // Output, Set, For (the iterable)
    ExprPtr cond;                        // For: the filter
    std::vector<ExprPtr> conds;          // If
    std::vector<Body> bodies;
    Body else_body;
    std::vector<std::string> targets;    // For/Set: variable names; Macro: parameter names
    std::vector<ExprPtr> defaults;       // Macro: a default per parameter (null: none)
};

// Parses tokens from lex(). Throws syntax errors (EMBER_ERR_INVALID_ARGUMENT, line:column) and, for
// Jinja constructs outside the subset (a tag like {% include %}, an unknown filter or test),
// EMBER_ERR_UNSUPPORTED naming the construct and line.
Body parse(std::string_view src);

} // namespace ember::jinja
