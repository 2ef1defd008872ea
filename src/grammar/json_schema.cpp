// json_schema.cpp — JSON Schema → GBNF text (the subset in json_schema.hpp), parsed then like any grammar.
#include "grammar/json_schema.hpp"

#include "core/error.hpp"
#include "grammar/grammar_rules.hpp"
#include "grammar/schema_pattern.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <vector>

namespace ember::grammar {

namespace {

// Shared building blocks, added to a grammar only when used.
const std::map<std::string, std::string> kPrimitives = {
    {"ws", "\" \"?"},
    {"char", "[^\"\\\\\\x00-\\x1f] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )"},
    {"string", "\"\\\"\" char* \"\\\"\""},
    {"integer", "\"-\"? ( \"0\" | [1-9] [0-9]{0,15} )"},
    {"number", "integer ( \".\" [0-9]{1,6} )?"},
    {"boolean", "\"true\" | \"false\""},
    {"null", "\"null\""},
    {"value", "object | array | string | number | boolean | null"},
    {"object", "\"{\" ws ( string ws \":\" ws value ws ( \",\" ws string ws \":\" ws value ws )* )? \"}\""},
    {"array", "\"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\""},
};
// What each primitive refers to (so that using one adds the others).
const std::map<std::string, std::vector<std::string>> kPrimitiveDeps = {
    {"string", {"char"}}, {"number", {"integer"}},
    {"value", {"object", "array", "string", "number", "boolean", "null"}},
    {"object", {"ws", "string", "value"}}, {"array", {"ws", "value"}},
};

const std::set<std::string> kAnnotations = {"title", "description", "default", "examples", "$schema", "$id",
                                            "$comment", "deprecated", "readOnly", "writeOnly", "$defs", "definitions",
                                            "additionalProperties"};
const std::set<std::string> kSupported = {"type", "properties", "required", "items", "minItems", "maxItems", "enum",
                                          "const", "minLength", "maxLength", "pattern", "minimum", "maximum",
                                          "exclusiveMinimum", "exclusiveMaximum", "anyOf", "oneOf", "$ref"};
constexpr size_t kMaxOptionalRun = 1024;             // consecutive optional properties of one object
constexpr uint64_t kMaxBound = 999999999999999ull;   // 15 digits: integer bounds are clamped to this

// A key as a JSON pointer component, for messages and rule names. Long keys are cut (whole UTF-8
// characters, with "...") so that the pointers handed down a deep schema stay short: each node copies
// its pointer, and full keys made that quadratic in the schema's size.
std::string pointer_escape(const std::string &key) {
    constexpr size_t kMaxKeyBytes = 64;
    std::string out;
    for (size_t i = 0; i < key.size(); ++i) {
        if (out.size() >= kMaxKeyBytes && (static_cast<unsigned char>(key[i]) & 0xC0) != 0x80) {
            out += "...";
            break;
        }
        const char c = key[i];
        out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
    }
    return out;
}

// A GBNF string literal for bytes.
std::string literal(std::string_view bytes) {
    std::string out = "\"";
    for (unsigned char c : bytes) {
        if (c == '"' || c == '\\') out += '\\', out += static_cast<char>(c);
        else if (c < 0x20 || c == 0x7f) out += format("\\x%02x", c);
        else out += static_cast<char>(c);
    }
    return out + "\"";
}

// Decimal numbers in [lo, hi] without leading zeros, as GBNF alternatives.
std::string digits_same_length(const std::string &lo, const std::string &hi) {
    // lo and hi have the same length; leading zeros allowed (these are suffixes).
    const size_t d = lo.size();
    if (d == 0) return "\"\"";
    if (lo == hi) return literal(lo);
    if (lo[0] == hi[0]) return literal(lo.substr(0, 1)) + " (" + digits_same_length(lo.substr(1), hi.substr(1)) + ")";
    const std::string rest_lo = lo.substr(1), rest_hi = hi.substr(1);
    const bool lo_full = rest_lo.find_first_not_of('0') == std::string::npos;
    const bool hi_full = rest_hi.find_first_not_of('9') == std::string::npos;
    std::vector<std::string> alts;
    char first = lo[0], last = hi[0];
    if (!lo_full) alts.push_back(literal(lo.substr(0, 1)) + " (" + digits_same_length(rest_lo, std::string(d - 1, '9')) + ")"), ++first;
    if (!hi_full) --last;
    if (first <= last) {
        std::string a = format("[%c-%c]", first, last);
        if (d > 1) a += format(" [0-9]{%zu}", d - 1);
        alts.push_back(a);
    }
    if (!hi_full) alts.push_back(literal(hi.substr(0, 1)) + " (" + digits_same_length(std::string(d - 1, '0'), rest_hi) + ")");
    std::string out;
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out;
}

std::string uint_range(uint64_t lo, uint64_t hi) {
    std::vector<std::string> alts;
    std::string slo = std::to_string(lo), shi = std::to_string(hi);
    while (slo.size() < shi.size()) {   // one alternative per digit count
        alts.push_back("(" + digits_same_length(slo, std::string(slo.size(), '9')) + ")");
        slo = "1" + std::string(slo.size(), '0');
    }
    alts.push_back("(" + digits_same_length(slo, shi) + ")");
    std::string out;
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out;
}

class Converter {
public:
    explicit Converter(const JsonValue &root) : root_(root) {}

    std::string run() {
        const std::string body = visit(root_, "");
        std::string out = "root ::= " + body + "\n";
        for (const auto &[name, rule] : rules_) out += name + " ::= " + rule + "\n";
        for (const std::string &p : primitives_) out += p + " ::= " + kPrimitives.at(p) + "\n";
        return out;
    }

private:
    [[noreturn]] void bad(const std::string &ptr, const std::string &msg) const {
        fail(EMBER_ERR_INVALID_ARGUMENT, "json schema: at '%s': %s", ptr.empty() ? "/" : ptr.c_str(), msg.c_str());
    }
    [[noreturn]] void unsupported(const std::string &ptr, const std::string &msg) const {
        fail(EMBER_ERR_UNSUPPORTED, "json schema: at '%s': %s", ptr.empty() ? "/" : ptr.c_str(), msg.c_str());
    }

    std::string use(const std::string &p) {
        if (primitives_.insert(p).second) {
            auto it = kPrimitiveDeps.find(p);
            if (it != kPrimitiveDeps.end())
                for (const std::string &d : it->second) use(d);
        }
        return p;
    }

    std::string new_rule(std::string hint, const std::string &body) {
        const std::string name = reserve(hint);
        rules_.emplace_back(name, body);
        return name;
    }
    std::string reserve(std::string hint) {
        std::string clean;
        for (char c : hint) clean += (std::isalnum(static_cast<unsigned char>(c)) ? c : '-');
        if (clean.empty()) clean = "s";
        std::string name = "s-" + clean;
        // The next free suffix per hint is remembered: trying 2, 3, ... each time was quadratic in the
        // number of rules sharing a hint (every item of a long array of schemas).
        int &k = next_suffix_[clean];
        for (k = std::max(k, 2); names_.count(name); ++k) name = "s-" + clean + "-" + std::to_string(k);
        names_.insert(name);
        return name;
    }

    const JsonValue *resolve(const std::string &ref, const std::string &ptr) {
        if (ref.rfind("#", 0) != 0) unsupported(ptr + "/$ref", "only references within the schema (\"#/...\") are supported, got '" + ref + "'");
        const JsonValue *v = &root_;
        size_t i = 1;
        while (i < ref.size()) {
            if (ref[i] != '/') bad(ptr + "/$ref", "malformed reference '" + ref + "'");
            size_t j = ref.find('/', i + 1);
            if (j == std::string::npos) j = ref.size();
            std::string key;
            for (size_t k = i + 1; k < j; ++k) {
                if (ref[k] == '~' && k + 1 < j) { key += ref[k + 1] == '1' ? '/' : '~'; ++k; }
                else key += ref[k];
            }
            if (v->type == JsonValue::OBJECT) v = v->get(key);
            else if (v->type == JsonValue::ARRAY && !key.empty() && key.size() <= 9 &&   // beyond any array (stoull throws past 2^64)
                     key.find_first_not_of("0123456789") == std::string::npos && std::stoull(key) < v->items.size())
                v = &v->items[std::stoull(key)];
            else v = nullptr;
            if (!v) bad(ptr + "/$ref", "reference '" + ref + "' does not resolve");
            i = j;
        }
        return v;
    }

    std::string visit(const JsonValue &s, const std::string &ptr) {
        if (++depth_ > kJsonMaxDepth) bad(ptr, "the schema nests too deeply");
        std::string out = visit_inner(s, ptr);
        --depth_;
        return out;
    }

    std::string visit_inner(const JsonValue &s, const std::string &ptr) {
        if (s.type == JsonValue::BOOL) {
            if (!s.boolean) bad(ptr, "the schema `false` allows no value");
            return use("value");
        }
        if (s.type != JsonValue::OBJECT) bad(ptr, "a schema must be an object or a boolean");
        for (const auto &[k, v] : s.members)
            if (!kSupported.count(k) && !kAnnotations.count(k))
                unsupported(ptr + "/" + pointer_escape(k), "the keyword '" + k + "' is not supported");
        if (const JsonValue *ref = s.get("$ref")) {
            if (ref->type != JsonValue::STRING) bad(ptr + "/$ref", "must be a string");
            for (const auto &[k, v] : s.members)
                if (k != "$ref" && !kAnnotations.count(k))
                    unsupported(ptr + "/" + pointer_escape(k), "keywords beside $ref ('" + k + "') are not supported");
            auto it = refs_.find(ref->text);
            if (it != refs_.end()) return it->second;
            const JsonValue *target = resolve(ref->text, ptr);
            const std::string name = reserve(ref->text.substr(ref->text.rfind('/') + 1));
            refs_.emplace(ref->text, name);   // before visiting: the definition may refer to itself
            const std::string body = visit(*target, ref->text.substr(1));
            rules_.emplace_back(name, body);
            return name;
        }
        if (const JsonValue *c = s.get("const")) return literal(c->dump());
        if (const JsonValue *e = s.get("enum")) {
            if (e->type != JsonValue::ARRAY || e->items.empty()) bad(ptr + "/enum", "must be a non-empty array");
            std::string alts;
            for (size_t i = 0; i < e->items.size(); ++i) alts += (i ? " | " : "") + literal(e->items[i].dump());
            return "(" + alts + ")";
        }
        for (const char *kw : {"anyOf", "oneOf"})
            if (const JsonValue *a = s.get(kw)) {
                if (a->type != JsonValue::ARRAY || a->items.empty()) bad(ptr + "/" + kw, "must be a non-empty array");
                std::string alts;
                for (size_t i = 0; i < a->items.size(); ++i)
                    alts += (i ? " | " : "") + visit(a->items[i], ptr + "/" + kw + "/" + std::to_string(i));
                return "(" + alts + ")";
            }
        const JsonValue *type = s.get("type");
        if (!type) {
            if (s.get("properties") || s.get("required")) return object(s, ptr);
            if (s.get("items") || s.get("minItems") || s.get("maxItems")) return array(s, ptr);
            if (s.get("pattern") || s.get("minLength") || s.get("maxLength")) return string(s, ptr);
            return use("value");
        }
        if (type->type == JsonValue::ARRAY) {
            if (type->items.empty()) bad(ptr + "/type", "an empty list of types allows no value");
            std::string alts;
            for (size_t i = 0; i < type->items.size(); ++i) {
                if (type->items[i].type != JsonValue::STRING) bad(ptr + "/type/" + std::to_string(i), "must be a string");
                alts += (i ? " | " : "") + typed(type->items[i].text, s, ptr + "/type/" + std::to_string(i), ptr);
            }
            return "(" + alts + ")";
        }
        if (type->type != JsonValue::STRING) bad(ptr + "/type", "must be a string or an array of strings");
        return typed(type->text, s, ptr + "/type", ptr);
    }

    std::string typed(const std::string &t, const JsonValue &s, const std::string &type_ptr, const std::string &ptr) {
        if (t == "object") return object(s, ptr);
        if (t == "array") return array(s, ptr);
        if (t == "string") return string(s, ptr);
        if (t == "integer") return integer(s, ptr);
        if (t == "number") return number(s, ptr);
        if (t == "boolean") return use("boolean");
        if (t == "null") return use("null");
        bad(type_ptr, "unknown type '" + t + "'");
    }

    uint64_t count(const JsonValue &s, const char *kw, const std::string &ptr, uint64_t dflt, uint64_t limit) {
        const JsonValue *v = s.get(kw);
        if (!v) return dflt;
        if (v->type != JsonValue::NUMBER || !v->integer || v->number < 0) bad(ptr + "/" + kw, "must be a non-negative integer");
        if (v->number > static_cast<double>(limit))
            unsupported(ptr + "/" + kw, format("values above %llu are not supported", (unsigned long long)limit));
        return static_cast<uint64_t>(v->number);
    }

    // Generates the properties in the order of `properties`: after property i may come any optional
    // property before the next required one, or that required one (rule "after i").
    std::string object(const JsonValue &s, const std::string &ptr) {
        const JsonValue *props = s.get("properties");
        if (props && props->type != JsonValue::OBJECT) bad(ptr + "/properties", "must be an object");
        std::vector<std::pair<std::string, const JsonValue *>> list;
        if (props)
            for (const auto &[k, v] : props->members) list.emplace_back(k, &v);
        std::vector<bool> required(list.size(), false);
        static const JsonValue any_schema = [] { JsonValue v; v.type = JsonValue::BOOL, v.boolean = true; return v; }();
        if (const JsonValue *req = s.get("required")) {
            if (req->type != JsonValue::ARRAY) bad(ptr + "/required", "must be an array of strings");
            for (size_t i = 0; i < req->items.size(); ++i) {
                if (req->items[i].type != JsonValue::STRING) bad(ptr + "/required/" + std::to_string(i), "must be a string");
                size_t k = 0;
                while (k < list.size() && list[k].first != req->items[i].text) ++k;
                if (k == list.size()) list.emplace_back(req->items[i].text, &any_schema), required.push_back(false);
                required[k] = true;
            }
        }
        if (list.empty() && !s.get("properties")) return use("object");   // no shape given: any object
        use("ws");
        std::vector<std::string> kv(list.size());
        for (size_t i = 0; i < list.size(); ++i) {
            std::string key;
            json_quote(key, list[i].first);
            kv[i] = literal(key) + " ws \":\" ws " + visit(*list[i].second, ptr + "/properties/" + pointer_escape(list[i].first)) + " ws";
        }
        // Rule "from j": member j and what follows it, or, when j is optional, the same from j + 1 on.
        // Built from the last property backwards, each naming the next, so the text is linear in the
        // number of properties (listing every later choice inline in each rule was quadratic).
        const size_t n = list.size();
        std::vector<bool> optional_from(n + 1, true);   // no required member in [j, n)
        for (size_t j = n; j-- > 0;) optional_from[j] = optional_from[j + 1] && !required[j];
        // The matcher follows a run of optional members rule by rule before it reads a character, and
        // bounds how far (kMaxClosureDepth): a longer run is refused here, at once, rather than when
        // generation reaches it.
        for (size_t j = 0, run = 0; j < n; ++j)
            if ((run = required[j] ? 0 : run + 1) > kMaxOptionalRun)
                unsupported(ptr + "/properties", "more than " + std::to_string(kMaxOptionalRun) + " optional properties in a row");
        std::string next;   // rule "from j + 1"
        for (size_t j = n; j-- > 0;) {
            std::string body = kv[j];
            if (j + 1 < n) body += " (\",\" ws " + next + ")" + (optional_from[j + 1] ? "?" : "");
            if (!required[j] && j + 1 < n) body += " | " + next;
            next = new_rule(hint(ptr) + "-from-" + std::to_string(j), body);
        }
        const std::string first = n == 0 ? "" : next + (optional_from[0] ? "?" : "");
        return "\"{\" ws " + (first.empty() ? "" : first + " ") + "\"}\"";
    }

    static std::string hint(const std::string &ptr) {
        const size_t k = ptr.rfind('/');
        return k == std::string::npos || k + 1 >= ptr.size() ? "root" : ptr.substr(k + 1);
    }

    std::string array(const JsonValue &s, const std::string &ptr) {
        std::string item = use("value");
        if (const JsonValue *items = s.get("items")) {
            if (items->type == JsonValue::ARRAY) unsupported(ptr + "/items", "items as an array (tuples) is not supported");
            item = visit(*items, ptr + "/items");
        }
        const uint64_t min = count(s, "minItems", ptr, 0, GrammarLimits::kMaxRepeat);
        const uint64_t max = count(s, "maxItems", ptr, UINT64_MAX, GrammarLimits::kMaxRepeat);
        if (max < min) bad(ptr + "/maxItems", "is below minItems");
        use("ws");
        const std::string one = new_rule(hint(ptr) + "-item", item + " ws");
        if (max == 0) return "\"[\" ws \"]\"";
        std::string rest;   // after the first item
        const uint64_t rmin = min > 0 ? min - 1 : 0;
        if (max == UINT64_MAX) rest = format("( \",\" ws %s ){%llu,}", one.c_str(), (unsigned long long)rmin);
        else rest = format("( \",\" ws %s ){%llu,%llu}", one.c_str(), (unsigned long long)rmin, (unsigned long long)(max - 1));
        const std::string items = one + " " + rest;
        return "\"[\" ws " + (min == 0 ? "( " + items + " )?" : items) + " \"]\"";
    }

    std::string string(const JsonValue &s, const std::string &ptr) {
        if (const JsonValue *p = s.get("pattern")) {
            if (p->type != JsonValue::STRING) bad(ptr + "/pattern", "must be a string");
            if (s.get("minLength") || s.get("maxLength"))
                unsupported(ptr + "/pattern", "pattern together with minLength/maxLength is not supported");
            return "\"\\\"\" (" + pattern_to_gbnf(p->text, ptr + "/pattern") + ") \"\\\"\"";
        }
        const uint64_t min = count(s, "minLength", ptr, 0, GrammarLimits::kMaxRepeat);
        const uint64_t max = count(s, "maxLength", ptr, UINT64_MAX, GrammarLimits::kMaxRepeat);
        if (max < min) bad(ptr + "/maxLength", "is below minLength");
        if (min == 0 && max == UINT64_MAX) return use("string");
        use("char");
        if (max == UINT64_MAX) return format("\"\\\"\" char{%llu,} \"\\\"\"", (unsigned long long)min);
        return format("\"\\\"\" char{%llu,%llu} \"\\\"\"", (unsigned long long)min, (unsigned long long)max);
    }

    // Inclusive integer bounds from minimum/maximum/exclusive*, as doubles (NaN: absent).
    void bounds(const JsonValue &s, const std::string &ptr, double &lo, double &hi, bool &lo_excl, bool &hi_excl) {
        lo = hi = NAN;
        lo_excl = hi_excl = false;
        auto num = [&](const char *kw) -> const JsonValue * {
            const JsonValue *v = s.get(kw);
            if (v && v->type != JsonValue::NUMBER && v->type != JsonValue::BOOL) bad(ptr + "/" + kw, "must be a number");
            return v;
        };
        const JsonValue *mn = num("minimum"), *mx = num("maximum"), *emn = num("exclusiveMinimum"), *emx = num("exclusiveMaximum");
        if (mn && mn->type == JsonValue::NUMBER) lo = mn->number;
        if (mx && mx->type == JsonValue::NUMBER) hi = mx->number;
        // draft 4: exclusiveMinimum/Maximum are booleans modifying minimum/maximum
        if (emn && emn->type == JsonValue::BOOL) lo_excl = emn->boolean;
        else if (emn && (std::isnan(lo) || emn->number >= lo)) lo = emn->number, lo_excl = true;
        if (emx && emx->type == JsonValue::BOOL) hi_excl = emx->boolean;
        else if (emx && (std::isnan(hi) || emx->number <= hi)) hi = emx->number, hi_excl = true;
    }

    std::string integer(const JsonValue &s, const std::string &ptr) {
        double lo, hi;
        bool lo_excl, hi_excl;
        bounds(s, ptr, lo, hi, lo_excl, hi_excl);
        if (std::isnan(lo) && std::isnan(hi)) return use("integer");
        const double limit = static_cast<double>(kMaxBound);
        int64_t l = std::isnan(lo) ? -static_cast<int64_t>(kMaxBound) : static_cast<int64_t>(std::max(-limit, std::min(limit, lo_excl ? std::floor(lo) + 1 : std::ceil(lo))));
        int64_t h = std::isnan(hi) ? static_cast<int64_t>(kMaxBound) : static_cast<int64_t>(std::max(-limit, std::min(limit, hi_excl ? std::ceil(hi) - 1 : std::floor(hi))));
        if (l > h) bad(ptr, "the bounds allow no integer");
        return int_range(l, h);
    }

    static std::string int_range(int64_t l, int64_t h) {
        std::vector<std::string> alts;
        if (l < 0) alts.push_back("\"-\" (" + uint_range(static_cast<uint64_t>(h < 0 ? -h : 1), static_cast<uint64_t>(-l)) + ")");
        if (h >= 0) alts.push_back(uint_range(static_cast<uint64_t>(std::max<int64_t>(l, 0)), static_cast<uint64_t>(h)));
        std::string out;
        for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
        return "(" + out + ")";
    }

    std::string number(const JsonValue &s, const std::string &ptr) {
        double lo, hi;
        bool lo_excl, hi_excl;
        bounds(s, ptr, lo, hi, lo_excl, hi_excl);
        if (std::isnan(lo) && std::isnan(hi)) return use("number");
        // Supported: integer bounds, minimum >= 0 inclusive; maximum inclusive or exclusive.
        if (std::isnan(lo) || lo < 0 || lo_excl || lo != std::floor(lo))
            unsupported(ptr, "number bounds need an inclusive integer minimum >= 0 (use type integer for other ranges)");
        if (!std::isnan(hi) && hi != std::floor(hi)) unsupported(ptr, "number bounds need an integer maximum");
        if (lo > static_cast<double>(kMaxBound)) unsupported(ptr + "/minimum", "is too large");
        const uint64_t l = static_cast<uint64_t>(lo);
        const std::string frac = " ( \".\" [0-9]{1,6} )?";
        if (std::isnan(hi) || hi > static_cast<double>(kMaxBound)) return "(" + uint_range(l, kMaxBound) + ")" + frac;
        if (hi < lo || (hi == lo && hi_excl)) bad(ptr, "the bounds allow no number");
        const uint64_t h = static_cast<uint64_t>(hi);
        std::string below = h > l ? "(" + uint_range(l, h - 1) + ")" + frac : "";
        if (hi_excl) return below;
        const std::string top = literal(std::to_string(h)) + " ( \".\" \"0\"{1,6} )?";
        return below.empty() ? "(" + top + ")" : "(" + below + " | " + top + ")";
    }

    const JsonValue &root_;
    std::vector<std::pair<std::string, std::string>> rules_;
    std::set<std::string> names_;
    std::map<std::string, int> next_suffix_;   // per hint: the suffix to try first
    std::set<std::string> primitives_;
    std::map<std::string, std::string> refs_;
    uint32_t depth_ = 0;
};

} // namespace

std::string json_schema_to_gbnf(const JsonValue &schema) { return Converter(schema).run(); }

std::string json_schema_to_gbnf(std::string_view schema_text) {
    return json_schema_to_gbnf(parse_json(schema_text, "json schema"));
}

std::string json_object_gbnf() { return json_schema_to_gbnf(std::string_view("{\"type\": \"object\"}")); }

} // namespace ember::grammar
