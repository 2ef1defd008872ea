// fuzz_json_schema.cpp — libFuzzer target: arbitrary JSON Schemas through the schema → grammar converter
// and the matcher (src/grammar/). A schema comes from a server request (response_format): untrusted.
//
// Input: the schema text; its last 8 bytes also steer a walk through the grammar.
// Promises checked: conversion ends with GBNF or an ember error naming the problem; the GBNF it writes
// parses (or is refused as left-recursive: a $ref cycle that matches nothing first); masks are
// consistent (fuzz_grammar_common.hpp); and a walk that ends at EOS produced JSON.
#include "fuzz_grammar_common.hpp"

#include "core/error.hpp"
#include "grammar/json_schema.hpp"

#include <cstring>
#include <string>

using namespace ember;

namespace {
constexpr size_t kGbnfBytesPerSchemaByte = 64, kGbnfBaseBytes = 64 << 10;
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const fuzz::InputBudget budget;
    const std::string text(reinterpret_cast<const char *>(data), size);
    std::string gbnf;
    try {
        gbnf = grammar::json_schema_to_gbnf(std::string_view(text));
    } catch (const Error &e) {
        if (e.status() != EMBER_ERR_INVALID_ARGUMENT && e.status() != EMBER_ERR_UNSUPPORTED) fuzz::broken("status", e.what());
        budget.check(nullptr);
        return 0;
    }
    // Translation is linear in the schema: the GBNF of the largest primitives, plus a bounded amount per
    // schema byte (quadratic output, 3.5 GB from a 239 KB schema, was what this guards against).
    if (gbnf.size() > kGbnfBytesPerSchemaByte * size + kGbnfBaseBytes)
        fuzz::broken("the GBNF grows faster than the schema", std::to_string(gbnf.size()).c_str());
    budget.check(nullptr);
    std::shared_ptr<grammar::CompiledGrammar> g;
    try {
        g = std::make_shared<grammar::CompiledGrammar>(grammar::parse_gbnf(gbnf), fuzz::small_vocab());
    } catch (const Error &e) {
        // What the converter writes is valid GBNF; only its size or a $ref cycle can be refused.
        if (!std::strstr(e.what(), "left-recursive") && !std::strstr(e.what(), "limit") && !std::strstr(e.what(), "deeper"))
            fuzz::broken("the converter wrote GBNF that does not parse", (std::string(e.what()) + "\n" + gbnf).c_str());
        return 0;
    }
    const size_t tail = size < 8 ? size : 8;
    bool complete = false;
    std::string out;
    try {
        out = fuzz::walk(*g, data + size - tail, tail, 48, complete);
    } catch (const Error &e) {
        if (e.status() != EMBER_ERR_OUT_OF_MEMORY) fuzz::broken("walk threw", e.what());
        return 0;
    }
    budget.check(g.get());
    if (complete) {
        try {
            grammar::parse_json(out);
        } catch (const Error &e) {
            fuzz::broken("a complete text of a schema's grammar is not JSON", (out + "\n" + e.what()).c_str());
        }
    }
    return 0;
}
