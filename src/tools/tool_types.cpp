// tool_types.cpp — tool definitions checked once, where they enter the library.
#include "tools/tool_types.hpp"

#include "core/error.hpp"
#include "grammar/json_schema.hpp"

#include <set>

namespace ember::tools {

const char *format_name(Format f) {
    switch (f) {
    case Format::Auto: return "auto";
    case Format::Content: return "content";
    case Format::Hermes: return "hermes";
    case Format::Llama3: return "llama3";
    case Format::Mistral: return "mistral";
    case Format::GptOss: return "gpt-oss";
    case Format::Granite: return "granite";
    case Format::Phi4: return "phi4";
    }
    return "unknown";
}

namespace {

// OpenAI limits function names to 64 characters of [a-zA-Z0-9_-]; '.' is allowed too, as gpt-oss
// writes namespaced names (functions.NAME).
bool valid_name(const std::string &n) {
    if (n.empty() || n.size() > 64) return false;
    for (char c : n)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              c == '.'))
            return false;
    return true;
}

} // namespace

void check_tools(const std::vector<Tool> &tools) {
    std::set<std::string> seen;
    for (size_t i = 0; i < tools.size(); ++i) {
        const Tool &t = tools[i];
        if (!valid_name(t.name))
            fail(EMBER_ERR_INVALID_ARGUMENT, "tools[%zu]: the name '%s' is not 1 to 64 characters of [A-Za-z0-9_.-]", i,
                 t.name.c_str());
        if (!seen.insert(t.name).second)
            fail(EMBER_ERR_INVALID_ARGUMENT, "tools[%zu]: the name '%s' is used by an earlier tool", i, t.name.c_str());
        if (t.parameters.type != grammar::JsonValue::OBJECT)
            fail(EMBER_ERR_INVALID_ARGUMENT, "tools[%zu] '%s': parameters must be a JSON Schema object", i, t.name.c_str());
        if (const grammar::JsonValue *type = t.parameters.get("type");
            type && !(type->type == grammar::JsonValue::STRING && type->text == "object"))
            fail(EMBER_ERR_INVALID_ARGUMENT, "tools[%zu] '%s': parameters must describe an object (\"type\": \"object\")",
                 i, t.name.c_str());
        try {
            (void)grammar::json_schema_to_gbnf(t.parameters);
        } catch (const Error &e) {
            throw Error(e.status(), format("tools[%zu] '%s': parameters: %s", i, t.name.c_str(), e.what()));
        }
    }
}

} // namespace ember::tools
