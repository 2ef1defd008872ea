// structured.cpp — the options for structured output that `run` and `bench` share.
#include "cli.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace cli {

bool read_text_file(const std::string &path, std::string *out) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        std::fprintf(stderr, "ember: cannot read %s\n", path.c_str());
        return false;
    }
    std::stringstream ss;
    ss << f.rdbuf();
    *out = ss.str();
    return true;
}

bool grammar_option(const Args &a, const ember_model *model, ember_grammar **out) {
    *out = nullptr;
    const bool gbnf = a.has("--grammar"), schema = a.has("--json-schema");
    if (!gbnf && !schema) return true;
    if (gbnf && schema) {
        std::fprintf(stderr, "ember: --grammar and --json-schema exclude each other\n");
        return false;
    }
    const std::string path = a.str(gbnf ? "--grammar" : "--json-schema", "");
    std::string text;
    if (!read_text_file(path, &text)) return false;
    const ember_status st = gbnf ? ember_grammar_create_gbnf(model, text.data(), text.size(), out)
                                 : ember_grammar_create_json_schema(model, text.data(), text.size(), out);
    if (st != EMBER_OK) {
        std::fprintf(stderr, "ember: %s: %s\n", path.c_str(), ember_last_error());
        return false;
    }
    return true;
}

} // namespace cli
