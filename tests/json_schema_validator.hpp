// json_schema_validator.hpp — the tests' own JSON Schema validator, written from the specification and
// independent of the grammar converter it checks (src/grammar/json_schema.cpp). Covers the keywords the
// converter accepts, with their full meaning (oneOf: exactly one; pattern: a search, as the spec says;
// lengths in code points). Returns "" when valid, else where and why not.
#pragma once

#include "grammar/json_value.hpp"

#include <cmath>
#include <regex>
#include <string>

namespace test_schema {

using ember::grammar::JsonValue;

inline size_t code_points(const std::string &s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
}

inline bool json_equal(const JsonValue &a, const JsonValue &b) {
    if (a.type != b.type) return false;
    switch (a.type) {
    case JsonValue::NUL: return true;
    case JsonValue::BOOL: return a.boolean == b.boolean;
    case JsonValue::NUMBER: return a.number == b.number;
    case JsonValue::STRING: return a.text == b.text;
    case JsonValue::ARRAY:
        if (a.items.size() != b.items.size()) return false;
        for (size_t i = 0; i < a.items.size(); ++i)
            if (!json_equal(a.items[i], b.items[i])) return false;
        return true;
    case JsonValue::OBJECT:
        if (a.members.size() != b.members.size()) return false;
        for (const auto &[k, v] : a.members) {
            const JsonValue *o = b.get(k);
            if (!o || !json_equal(v, *o)) return false;
        }
        return true;
    }
    return false;
}

inline std::string validate(const JsonValue &v, const JsonValue &s, const JsonValue &root, const std::string &at = "");

inline bool has_type(const JsonValue &v, const std::string &t) {
    if (t == "null") return v.type == JsonValue::NUL;
    if (t == "boolean") return v.type == JsonValue::BOOL;
    if (t == "string") return v.type == JsonValue::STRING;
    if (t == "array") return v.type == JsonValue::ARRAY;
    if (t == "object") return v.type == JsonValue::OBJECT;
    if (t == "number") return v.type == JsonValue::NUMBER;
    if (t == "integer") return v.type == JsonValue::NUMBER && v.number == std::floor(v.number);
    return false;
}

inline const JsonValue *resolve_ref(const JsonValue &root, const std::string &ref) {
    const JsonValue *cur = &root;
    size_t i = 2;   // after "#/"
    while (cur && i <= ref.size()) {
        size_t j = ref.find('/', i);
        if (j == std::string::npos) j = ref.size();
        cur = cur->get(ref.substr(i, j - i));
        i = j + 1;
    }
    return cur;
}

inline std::string validate(const JsonValue &v, const JsonValue &s, const JsonValue &root, const std::string &at) {
    if (s.type == JsonValue::BOOL) return s.boolean ? "" : at + ": schema false";
    if (const JsonValue *ref = s.get("$ref")) {
        const JsonValue *t = resolve_ref(root, ref->text);
        if (!t) return at + ": unresolved $ref";
        return validate(v, *t, root, at);
    }
    if (const JsonValue *t = s.get("type")) {
        bool ok = false;
        if (t->type == JsonValue::STRING) ok = has_type(v, t->text);
        else
            for (const JsonValue &x : t->items) ok = ok || has_type(v, x.text);
        if (!ok) return at + ": wrong type";
    }
    if (const JsonValue *c = s.get("const"))
        if (!json_equal(v, *c)) return at + ": not the const";
    if (const JsonValue *e = s.get("enum")) {
        bool ok = false;
        for (const JsonValue &x : e->items) ok = ok || json_equal(v, x);
        if (!ok) return at + ": not in the enum";
    }
    if (const JsonValue *a = s.get("anyOf")) {
        bool ok = false;
        for (const JsonValue &x : a->items) ok = ok || validate(v, x, root, at).empty();
        if (!ok) return at + ": matches no anyOf";
    }
    if (const JsonValue *a = s.get("oneOf")) {
        int n = 0;
        for (const JsonValue &x : a->items) n += validate(v, x, root, at).empty();
        if (n != 1) return at + ": matches " + std::to_string(n) + " of oneOf";
    }
    if (v.type == JsonValue::OBJECT) {
        if (const JsonValue *req = s.get("required"))
            for (const JsonValue &k : req->items)
                if (!v.get(k.text)) return at + ": missing required '" + k.text + "'";
        const JsonValue *props = s.get("properties");
        for (const auto &[k, x] : v.members) {
            const JsonValue *ps = props ? props->get(k) : nullptr;
            if (ps) {
                std::string e = validate(x, *ps, root, at + "/" + k);
                if (!e.empty()) return e;
            } else if (const JsonValue *ap = s.get("additionalProperties")) {
                if (ap->type == JsonValue::BOOL && !ap->boolean) return at + ": additional property '" + k + "'";
            }
        }
    }
    if (v.type == JsonValue::ARRAY) {
        if (const JsonValue *m = s.get("minItems"))
            if (v.items.size() < m->number) return at + ": too few items";
        if (const JsonValue *m = s.get("maxItems"))
            if (v.items.size() > m->number) return at + ": too many items";
        if (const JsonValue *it = s.get("items"))
            for (size_t i = 0; i < v.items.size(); ++i) {
                std::string e = validate(v.items[i], *it, root, at + "/" + std::to_string(i));
                if (!e.empty()) return e;
            }
    }
    if (v.type == JsonValue::STRING) {
        if (const JsonValue *m = s.get("minLength"))
            if (code_points(v.text) < m->number) return at + ": too short";
        if (const JsonValue *m = s.get("maxLength"))
            if (code_points(v.text) > m->number) return at + ": too long";
        if (const JsonValue *p = s.get("pattern"))
            if (!std::regex_search(v.text, std::regex(p->text, std::regex::ECMAScript))) return at + ": pattern does not match";
    }
    if (v.type == JsonValue::NUMBER) {
        if (const JsonValue *m = s.get("minimum"))
            if (v.number < m->number) return at + ": below minimum";
        if (const JsonValue *m = s.get("maximum"))
            if (v.number > m->number) return at + ": above maximum";
        if (const JsonValue *m = s.get("exclusiveMinimum"))
            if (m->type == JsonValue::NUMBER && v.number <= m->number) return at + ": not above exclusiveMinimum";
        if (const JsonValue *m = s.get("exclusiveMaximum"))
            if (m->type == JsonValue::NUMBER && v.number >= m->number) return at + ": not below exclusiveMaximum";
    }
    return "";
}

} // namespace test_schema
