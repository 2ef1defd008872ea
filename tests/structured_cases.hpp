// structured_cases.hpp — the schemas and grammars that the structured-output tests generate from
// (test_json_schema.cpp with random walks over a made-up vocabulary, test_structured_model.cpp with a
// real model): nested objects, arrays, enums, numbers, recursion, alternatives. Every repetition is
// bounded and the recursion is a chain (at most one child), so that a model sampling at temperature 1
// ends its text: a tree with two children per node is a branching process a small model may never
// finish, whatever the grammar engine does.
#pragma once

namespace structured_cases {

struct Case {
    const char *name;
    const char *schema;
};

inline constexpr Case kSchemas[] = {
    {"npc_action",
     R"({"type":"object","properties":{
          "say":{"type":"string","maxLength":40},
          "action":{"enum":["wave","attack","flee","trade"]},
          "target":{"type":"object","properties":{
              "name":{"type":"string","pattern":"^[A-Z][a-z]{1,8}$"},
              "distance":{"type":"integer","minimum":0,"maximum":100}},"required":["name"]},
          "mood":{"type":"number","minimum":0,"maximum":1}},
        "required":["say","action"],"additionalProperties":false})"},
    {"int_array", R"({"type":"array","items":{"type":"integer","minimum":-50,"maximum":50},"minItems":1,"maxItems":5})"},
    {"tree",
     R"({"$defs":{"node":{"type":"object","properties":{
          "value":{"type":"integer"},
          "children":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":1}},"required":["value"]}},
        "$ref":"#/$defs/node"})"},
    {"alternatives",
     R"({"oneOf":[{"type":"string","minLength":1,"maxLength":5},{"type":"null"},{"const":{"k":[1,2]}},{"type":"boolean"}]})"},
    {"numbers",
     R"({"type":"object","properties":{"x":{"type":"number"},"n":{"type":"integer","exclusiveMinimum":-3,"exclusiveMaximum":1000},
        "tags":{"type":"array","items":{"type":"string","enum":["a","b c","\"q\""]},"maxItems":4}},"required":["x","n"]})"},
    {"type_list", R"({"type":["string","integer"],"maxLength":20})"},
};

} // namespace structured_cases
