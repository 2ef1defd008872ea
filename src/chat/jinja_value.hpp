// jinja_value.hpp — the values a template computes with, with Python's semantics where templates rely on
// them (truthiness, equality, str(), repr(), int/float arithmetic).
//
// Chat templates were written for Hugging Face's Jinja (Python): `{{ x }}` prints str(x), so None prints
// "None" and a list prints "['a', 'b']"; dicts keep insertion order; strings index and count by code
// point. Lists and dicts are shared, immutable once built (HF renders in an immutable sandbox); the one
// mutable object is a namespace(), whose attributes `{% set ns.x = ... %}` assigns.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ember::jinja {

class Value;
struct CallArgs;
class Context;

using List = std::vector<Value>;
struct Dict;
// A built-in function, a bound method or a macro: called with evaluated arguments.
struct Function {
    std::string name;
    std::function<Value(CallArgs &, Context &)> call;
};

class Value {
public:
    enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Function };

    Value() = default;   // Undefined
    static Value undefined(std::string name = {}) { Value v; v.set_str(std::move(name)); return v; }
    static Value none() { Value v; v.kind_ = Kind::None; return v; }
    static Value boolean(bool b) { Value v; v.kind_ = Kind::Bool; v.i_ = b; return v; }
    static Value integer(int64_t i) { Value v; v.kind_ = Kind::Int; v.i_ = i; return v; }
    static Value number(double f) { Value v; v.kind_ = Kind::Float; v.f_ = f; return v; }
    static Value string(std::string s) { Value v; v.kind_ = Kind::String; v.set_str(std::move(s)); return v; }
    static Value list(List items);
    static Value list(std::shared_ptr<List> items);
    static Value dict(std::shared_ptr<Dict> d);
    static Value function(std::string name, std::function<Value(CallArgs &, Context &)> fn);

    Kind kind() const { return kind_; }
    bool is_undefined() const { return kind_ == Kind::Undefined; }
    bool is_none() const { return kind_ == Kind::None; }
    bool is_bool() const { return kind_ == Kind::Bool; }
    bool is_int() const { return kind_ == Kind::Int; }
    bool is_float() const { return kind_ == Kind::Float; }
    bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
    bool is_string() const { return kind_ == Kind::String; }
    bool is_list() const { return kind_ == Kind::List; }
    bool is_dict() const { return kind_ == Kind::Dict; }
    bool is_function() const { return kind_ == Kind::Function; }

    bool as_bool() const { return i_ != 0; }
    int64_t as_int() const { return i_; }
    double as_float() const { return kind_ == Kind::Float ? f_ : static_cast<double>(i_); }
    const std::string &as_string() const { return str_ ? *str_ : empty_string(); }   // also an Undefined's name
    const List &as_list() const { return *list_; }
    const std::shared_ptr<List> &list_ptr() const { return list_; }
    Dict &as_dict() const { return *dict_; }
    const std::shared_ptr<Dict> &dict_ptr() const { return dict_; }
    const Function &as_function() const { return *fn_; }

    bool truthy() const;
    // How deeply lists and dicts nest inside this value (0 for scalars; a namespace counts as 1 whatever
    // it holds, since its attributes change after it is built).
    int depth() const { return depth_; }
    // Python's type name, for messages ("str", "int", "list", "dict", "NoneType", "undefined").
    const char *type_name() const;

private:
    static const std::string &empty_string();
    void set_str(std::string s) {
        if (!s.empty()) str_ = std::make_shared<const std::string>(std::move(s));
    }

    Kind kind_ = Kind::Undefined;
    int depth_ = 0;
    int64_t i_ = 0;
    double f_ = 0;
    // Strings are shared, not copied: a template passing a long message around (or putting it into a
    // list many times) holds one copy of its text.
    std::shared_ptr<const std::string> str_;
    std::shared_ptr<List> list_;
    std::shared_ptr<Dict> dict_;
    std::shared_ptr<Function> fn_;
};

// An insertion-ordered mapping (Python's dict). Small in practice (a message's keys), so lookups scan.
struct Dict {
    std::vector<std::pair<Value, Value>> items;
    bool is_namespace = false;   // namespace(): attributes may be assigned
    bool attrs_only = false;     // `loop`: attributes only (`loop.items` is no dict method)

    const Value *find(const Value &key) const;
    const Value *find(std::string_view key) const;
    void set(Value key, Value value);
};

// Lists and dicts nested deeper than this are refused when built (EMBER_ERR_INVALID_ARGUMENT): printing,
// comparing and freeing a value recurse through its nesting.
constexpr int kMaxValueDepth = 64;

// Arguments of a call, positional then keyword.
struct CallArgs {
    std::vector<Value> args;
    std::vector<std::pair<std::string, Value>> kwargs;
    int line = 0;

    // The i-th positional argument or the keyword `name`, else Undefined.
    Value get(size_t i, std::string_view name) const;
    bool has(size_t i, std::string_view name) const;
};

// Python equality (1 == 1.0 == True; lists and dicts element-wise; Undefined equals only Undefined).
bool equals(const Value &a, const Value &b);
// str(v): what `{{ v }}` prints. Undefined prints "".
std::string to_str(const Value &v);
// repr(v), as inside a printed list: strings quoted.
std::string to_repr(const Value &v);
// Python's repr of a float ("1.0", "0.1", "1e+16", "inf").
std::string float_repr(double f);

// UTF-8 code points: length, and the byte offset of each code point (plus the end).
size_t utf8_length(std::string_view s);
std::vector<size_t> utf8_offsets(std::string_view s);

} // namespace ember::jinja
