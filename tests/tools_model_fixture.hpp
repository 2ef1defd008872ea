// tools_model_fixture.hpp — what the tool tests on stories15M share (test_tools_model.cpp,
// test_tools_lazy.cpp): the model with a session fed a story prompt (its logits kept, so each
// generation starts from the same place without feeding the prompt again), the grammar vocabulary,
// three NPC tools whose schemas have enums, bounded strings, bounded integers and booleans, and the
// check that a call's arguments validate against its tool's schema.
#pragma once

#include "test_util.h"

#include "json_schema_validator.hpp"

#include "grammar/grammar.hpp"
#include "model/model.hpp"
#include "session/session.hpp"
#include "tools/tool_types.hpp"

#include <memory>
#include <vector>

namespace tools_fixture {

#if defined(EMBER_TEST_SANITIZED)
constexpr int kDivisor = 5;   // a fifth of the samples in sanitizer builds
#else
constexpr int kDivisor = 1;
#endif

struct Fixture {
    std::unique_ptr<ember::Model> model;
    std::unique_ptr<ember::Session> session;
    std::vector<float> prompt_logits;
    uint32_t n_prompt = 0;
    std::shared_ptr<const ember::grammar::GrammarVocab> vocab;
};
inline Fixture *g_fx;

inline int setup(void **) {
    const char *path = test_find_model("stories15M-q8_0.gguf", "stories15M/stories15M-q8_0.gguf");
    test_require(path, "stories15M-q8_0.gguf");
    g_fx = new Fixture;
    g_fx->model = ember::Model::load(path, ember::LoadOptions{});
    ember::SessionOptions o;
    o.n_ctx = 1024;
    g_fx->session = std::make_unique<ember::Session>(*g_fx->model, o);
    const auto prompt = g_fx->model->tokenizer().tokenize("The knight walked to the door and", true, false);
    g_fx->session->feed(prompt.data(), prompt.size());
    g_fx->n_prompt = static_cast<uint32_t>(prompt.size());
    g_fx->prompt_logits.assign(g_fx->session->logits(), g_fx->session->logits() + g_fx->session->n_vocab());
    g_fx->vocab = ember::grammar::GrammarVocab::from_tokenizer(g_fx->model->tokenizer());
    return 0;
}

inline int teardown(void **) {
    delete g_fx;
    return 0;
}

// Back to the prompt's end, with the text stream flushed of what the previous generation left in it.
inline void restart() {
    ember::Session &s = *g_fx->session;
    s.truncate(g_fx->n_prompt, g_fx->prompt_logits.data());
    s.text_of(g_fx->model->tokenizer().eos());
}

inline std::vector<ember::tools::Tool> npc_tools() {
    using ember::grammar::parse_json;
    return {
        {"open_door", "Opens a door.", parse_json(R"({"type": "object", "properties": {"door": {"type": "string", "enum": ["north", "south", "east"]}}, "required": ["door"]})")},
        {"say", "Says something aloud.", parse_json(R"({"type": "object", "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 40}, "mood": {"type": "string", "enum": ["calm", "angry"]}}, "required": ["text"]})")},
        {"walk", "Walks to a tile.", parse_json(R"({"type": "object", "properties": {"x": {"type": "integer", "minimum": 0, "maximum": 63}, "y": {"type": "integer", "minimum": 0, "maximum": 63}, "run": {"type": "boolean"}}, "required": ["x", "y"]})")},
    };
}

// Fails the test unless `c` calls one of `tools` with arguments its schema accepts.
inline void expect_valid_call(const std::vector<ember::tools::Tool> &tools, const ember::tools::ToolCall &c) {
    const ember::tools::Tool *t = nullptr;
    for (const ember::tools::Tool &x : tools)
        if (x.name == c.name) t = &x;
    if (!t) fail_msg("a call to the unknown tool '%s'", c.name.c_str());
    const std::string err = test_schema::validate(ember::grammar::parse_json(c.arguments), t->parameters, t->parameters);
    if (!err.empty()) fail_msg("%s(%s): %s", c.name.c_str(), c.arguments.c_str(), err.c_str());
}

} // namespace tools_fixture
