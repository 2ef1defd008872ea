// test_tools.cpp — tool calls and reasoning inside the library: conversations with tools render as the
// families' reference templates do under Python's jinja2 (tests/data/chat_templates, rendered by
// render_expected.py); recorded outputs of every family parse into the same content, reasoning and
// calls whole and fed one byte at a time; every complete random walk through a tool_choice grammar
// parses back into calls whose arguments validate against their schema.
#include "test_util.h"

#include "core/error.hpp"
#include "grammar/grammar.hpp"
#include "grammar/json_schema.hpp"
#include "json_schema_validator.hpp"
#include "tools/tool_grammar.hpp"
#include "tools/tool_parser.hpp"
#include "tools/tool_render.hpp"

#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace ember;
using namespace ember::tools;
using grammar::JsonValue;

namespace {

std::string data_dir() {
    const char *src = getenv("EMBER_SOURCE_DIR");
    return std::string(src ? src : ".") + "/tests/data/chat_templates/";
}

std::string read_text(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) fail_msg("cannot read %s", path.c_str());
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

const JsonValue &member(const JsonValue &v, const char *key) {
    const JsonValue *m = v.get(key);
    if (!m) fail_msg("conversations.json: no '%s'", key);
    return *m;
}

Tool tool_of(const JsonValue &t) {
    return {member(t, "name").text, member(t, "description").text, member(t, "parameters")};
}

ToolRenderInput input_of(const JsonValue &conv) {
    ToolRenderInput in;
    in.add_generation_prompt = member(conv, "add_generation_prompt").boolean;
    in.bos_token = "<s>";
    in.eos_token = "</s>";
    if (const JsonValue *e = conv.get("enable_thinking")) in.reasoning = e->boolean ? Reasoning::On : Reasoning::Off;
    for (const JsonValue &t : member(conv, "tools").items) in.tools.push_back(tool_of(t));
    for (const JsonValue &m : member(conv, "messages").items) {
        Turn t;
        t.role = member(m, "role").text;
        t.content = member(m, "content").text;
        if (const JsonValue *r = m.get("reasoning_content")) t.has_reasoning = true, t.reasoning = r->text;
        if (const JsonValue *id = m.get("tool_call_id")) t.has_tool_call_id = true, t.tool_call_id = id->text;
        if (const JsonValue *n = m.get("name")) t.has_name = true, t.name = n->text;
        if (const JsonValue *calls = m.get("tool_calls"))
            for (const JsonValue &c : calls->items)
                t.tool_calls.push_back({member(c, "id").text, member(c, "name").text, member(c, "arguments").dump()});
        in.messages.push_back(std::move(t));
    }
    return in;
}

void test_render_matches_reference(void **) {
    const JsonValue convs = grammar::parse_json(read_text(data_dir() + "conversations.json"));
    int compared = 0;
    for (const char *name : {"Qwen3-0.6B", "Llama-3.3-70B-Instruct", "Mistral-Nemo-Instruct-2407"}) {
        const std::string tmpl = read_text(data_dir() + name + ".jinja");
        for (const JsonValue &conv : convs.items) {
            if (const JsonValue *only = conv.get("only")) {
                bool listed = false;
                for (const JsonValue &o : only->items) listed = listed || o.text == name;
                if (!listed) continue;
            }
            const std::string want = read_text(data_dir() + name + "." + member(conv, "name").text + ".expected");
            const std::string got = render_with_tools(tmpl, input_of(conv));
            if (got != want) fail_msg("%s / %s:\n--- got\n%s\n--- want\n%s", name, member(conv, "name").text.c_str(), got.c_str(), want.c_str());
            ++compared;
        }
    }
    assert_int_equal(compared, 7);
}

ember_status render_status(const std::string &tmpl, const ToolRenderInput &in, std::string *message) {
    try {
        render_with_tools(tmpl, in);
    } catch (const Error &e) {
        *message = e.what();
        return e.status();
    }
    return EMBER_OK;
}

void test_render_errors(void **) {
    const JsonValue convs = grammar::parse_json(read_text(data_dir() + "conversations.json"));
    const std::string qwen = read_text(data_dir() + "Qwen3-0.6B.jinja");
    std::string msg;
    ToolRenderInput dup = input_of(convs.items[0]);
    dup.tools.push_back(dup.tools[0]);
    assert_int_equal(render_status(qwen, dup, &msg), EMBER_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(msg.c_str(), "'get_weather' is used by an earlier tool"));

    ToolRenderInput bad = input_of(convs.items[0]);
    bad.tools[1].parameters = grammar::parse_json(R"({"type": "object", "properties": {"d": {"type": "string", "format": "date"}}})");
    assert_int_equal(render_status(qwen, bad, &msg), EMBER_ERR_UNSUPPORTED);
    assert_non_null(strstr(msg.c_str(), "tools[1] 'open_door'"));
    assert_non_null(strstr(msg.c_str(), "format"));

    bad = input_of(convs.items[0]);
    bad.tools[0].name = "get weather";
    assert_int_equal(render_status(qwen, bad, &msg), EMBER_ERR_INVALID_ARGUMENT);

    bad = input_of(convs.items[0]);
    bad.messages[2].tool_calls[0].arguments = "[1, 2]";
    assert_int_equal(render_status(qwen, bad, &msg), EMBER_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(msg.c_str(), "messages[2].tool_calls[0]"));

    // A template that never reads `tools` would drop them without a word.
    assert_int_equal(render_status("{% for m in messages %}{{ m.content }}{% endfor %}", input_of(convs.items[0]), &msg),
                     EMBER_ERR_UNSUPPORTED);
    assert_non_null(strstr(msg.c_str(), "no tool support"));
}

void test_detect_format(void **) {
    assert_int_equal((int)detect_format(read_text(data_dir() + "Qwen3-0.6B.jinja")), (int)Format::Hermes);
    assert_int_equal((int)detect_format(read_text(data_dir() + "Llama-3.3-70B-Instruct.jinja")), (int)Format::Llama3);
    assert_int_equal((int)detect_format(read_text(data_dir() + "Mistral-Nemo-Instruct-2407.jinja")), (int)Format::Mistral);
    assert_int_equal((int)detect_format("{{ '<|start|>assistant<|channel|>final<|message|>' }}"), (int)Format::GptOss);
    assert_int_equal((int)detect_format("{{ '<|tool_call|>' }}"), (int)Format::Granite);
    assert_int_equal((int)detect_format("{{ '<|tool|>' + tools|tojson + '<|/tool|>' }}"), (int)Format::Phi4);
    assert_int_equal((int)detect_format("{{ messages[0].content }}"), (int)Format::Content);
}

// A recorded output and what it must parse into.
struct Case {
    const char *what;
    Format format;
    const char *text;
    const char *content, *reasoning;
    std::vector<std::pair<const char *, const char *>> calls;   // name, arguments (compact JSON)
    bool malformed = false;
    bool reasoning_open = false;
};

const std::vector<Case> &cases() {
    static const std::vector<Case> c = {
        {"qwen3 thinking, text, two calls", Format::Hermes,
         "<think>\nThe user wants the weather and the door.\n</think>\n\nLet me do both.\n\n<tool_call>\n"
         "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n"
         "{\"name\": \"open_door\", \"arguments\": {\"door\": \"north\"}}\n</tool_call>",
         "Let me do both.", "The user wants the weather and the door.",
         {{"get_weather", "{\"city\":\"Paris\"}"}, {"open_door", "{\"door\":\"north\"}"}}},
        {"qwen3 thinking off, plain answer", Format::Hermes, "<think>\n\n</think>\n\nHello! How can I help?",
         "Hello! How can I help?", "", {}},
        {"qwen3 arguments as a string", Format::Hermes,
         "<tool_call>\n{\"name\": \"open_door\", \"arguments\": \"{\\\"door\\\": \\\"south\\\"}\"}\n</tool_call>", "", "",
         {{"open_door", "{\"door\":\"south\"}"}}},
        {"qwen3.5 XML call", Format::Hermes,
         "<think>\nCheck Paris.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
         "</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
         "", "Check Paris.", {{"get_weather", "{\"city\":\"Paris\",\"days\":3}"}}},
        {"qwen3 malformed call kept as content", Format::Hermes,
         "Sure <tool_call>\n{\"name\": get_weather}\n</tool_call> done",
         "Sure <tool_call>\n{\"name\": get_weather}\n</tool_call> done", "", {}, true},
        {"qwen3 unfinished call at the end", Format::Hermes, "Trying.\n<tool_call>\n{\"name\": \"open_door\", \"argu",
         "Trying.\n<tool_call>\n{\"name\": \"open_door\", \"argu", "", {}, true},
        {"qwen3 text that only looks like an opener", Format::Hermes, "Use <tool> tags or <tool_cal",
         "Use <tool> tags or <tool_cal", "", {}},
        {"reasoning opened by the prompt", Format::Hermes, "Think more.\n</think>\n\nDone.", "Done.", "Think more.", {},
         false, true},
        {"llama 3 bare JSON call", Format::Llama3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", "",
         "", {{"get_weather", "{\"city\":\"Oslo\"}"}}},
        {"llama 3 python_tag call", Format::Llama3,
         "<|python_tag|>{\"name\": \"open_door\", \"parameters\": {\"door\": \"south\"}}", "", "",
         {{"open_door", "{\"door\":\"south\"}"}}},
        {"llama 3 plain answer", Format::Llama3, "The door is open.", "The door is open.", "", {}},
        {"llama 3 JSON that is no call", Format::Llama3, "{\"answer\": 42}", "{\"answer\": 42}", "", {}},
        {"mistral array", Format::Mistral,
         "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}, \"id\": \"abc123XYZ\"}, "
         "{\"name\": \"open_door\", \"arguments\": {\"door\": \"north\"}}]",
         "", "", {{"get_weather", "{\"city\":\"Rome\"}"}, {"open_door", "{\"door\":\"north\"}"}}},
        {"mistral name[ARGS]", Format::Mistral,
         "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\"}[TOOL_CALLS]open_door[CALL_ID]k9k9k9k9k[ARGS]{\"door\": \"south\"}",
         "", "", {{"get_weather", "{\"city\":\"Rome\"}"}, {"open_door", "{\"door\":\"south\"}"}}},
        {"mistral broken", Format::Mistral, "[TOOL_CALLS][{\"name\": 3}]", "[TOOL_CALLS][{\"name\": 3}]", "", {}, true},
        {"gpt-oss analysis then call", Format::GptOss,
         "<|channel|>analysis<|message|>Need the weather: call the tool.<|end|><|start|>assistant<|channel|>commentary "
         "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Lima\"}<|call|>",
         "", "Need the weather: call the tool.", {{"get_weather", "{\"city\":\"Lima\"}"}}},
        {"gpt-oss recipient before channel", Format::GptOss,
         "<|start|>assistant to=functions.open_door<|channel|>commentary json<|message|>{\"door\": \"north\"}<|call|>", "",
         "", {{"open_door", "{\"door\":\"north\"}"}}},
        {"gpt-oss final", Format::GptOss,
         "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>Hello, traveller!<|return|>",
         "Hello, traveller!", "Easy.", {}},
        {"gpt-oss bad arguments", Format::GptOss,
         "<|channel|>commentary to=functions.open_door <|constrain|>json<|message|>{door: north}<|call|>",
         "{door: north}", "", {}, true},
        {"granite", Format::Granite, "<|tool_call|>[{\"name\": \"open_door\", \"arguments\": {\"door\": \"north\"}}]", "",
         "", {{"open_door", "{\"door\":\"north\"}"}}},
        {"phi-4", Format::Phi4,
         "Opening.<|tool_call|>[{\"type\": \"function\", \"function\": {\"name\": \"open_door\", \"arguments\": "
         "{\"door\": \"south\"}}}]<|/tool_call|>",
         "Opening.", "", {{"open_door", "{\"door\":\"south\"}"}}},
        {"content with a reasoning block", Format::Content, "<think>hmm</think>Answer.", "Answer.", "hmm", {}},
    };
    return c;
}

ParseResult parse_whole(const Case &c) {
    ToolCallParser p(c.format, {c.reasoning_open, {}});
    p.feed(c.text);
    p.finish();
    return p.result();
}

// Fed one byte at a time: the takes add up to the whole result, and no content take ends inside what
// becomes a call.
ParseResult parse_bytes(const Case &c) {
    ToolCallParser p(c.format, {c.reasoning_open, {}});
    std::string content, reasoning;
    size_t calls = 0;
    const std::string text = c.text;
    for (size_t i = 0; i <= text.size(); ++i) {
        if (i < text.size()) p.feed(std::string_view(text).substr(i, 1));
        else p.finish();
        const ParseDelta d = p.take();
        content += d.content;
        reasoning += d.reasoning;
        if (d.first_call != calls) fail_msg("%s: delta calls start at %zu, not %zu", c.what, d.first_call, calls);
        calls += d.n_calls;
        for (const char *opener : {"<tool_call>", "[TOOL_CALLS]", "<|python_tag|>", "<|tool_call|>"})
            if (!c.malformed && d.content.find(opener) != std::string::npos)
                fail_msg("%s: a content delta carries '%s'", c.what, opener);
    }
    if (content != p.result().content) fail_msg("%s: the content takes add up to '%s'", c.what, content.c_str());
    if (reasoning != p.result().reasoning) fail_msg("%s: the reasoning takes add up to '%s'", c.what, reasoning.c_str());
    assert_int_equal(calls, p.result().calls.size());
    return p.result();
}

void check(const Case &c, const ParseResult &r, const char *how) {
    if (r.content != c.content) fail_msg("%s (%s): content '%s', want '%s'", c.what, how, r.content.c_str(), c.content);
    if (r.reasoning != c.reasoning)
        fail_msg("%s (%s): reasoning '%s', want '%s'", c.what, how, r.reasoning.c_str(), c.reasoning);
    if (r.calls.size() != c.calls.size()) fail_msg("%s (%s): %zu calls, want %zu", c.what, how, r.calls.size(), c.calls.size());
    for (size_t i = 0; i < c.calls.size(); ++i) {
        if (r.calls[i].name != c.calls[i].first || r.calls[i].arguments != c.calls[i].second)
            fail_msg("%s (%s): call %zu is %s(%s)", c.what, how, i, r.calls[i].name.c_str(), r.calls[i].arguments.c_str());
        if (r.calls[i].id.size() != 9) fail_msg("%s: call id '%s' is not 9 characters", c.what, r.calls[i].id.c_str());
    }
    if (r.malformed != c.malformed) fail_msg("%s (%s): malformed is %d", c.what, how, r.malformed);
}

void test_parse_recorded(void **) {
    for (const Case &c : cases()) {
        check(c, parse_whole(c), "whole");
        check(c, parse_bytes(c), "byte by byte");
    }
}

void test_parse_ids_and_names(void **) {
    // The model's own id is kept; a call to a tool not offered is malformed.
    ToolCallParser p(Format::Mistral, {false, {"open_door"}});
    p.feed("[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {}, \"id\": \"abc123XYZ\"}]");
    p.finish();
    assert_int_equal(p.result().calls.size(), 0);
    assert_true(p.result().malformed);
    ToolCallParser q(Format::Mistral, {});
    q.feed("[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {}, \"id\": \"abc123XYZ\"}]");
    q.finish();
    assert_string_equal(q.result().calls.at(0).id.c_str(), "abc123XYZ");
    assert_int_equal(q.result().calls.size(), 1);
    // Feeding after finish is an error, not a crash.
    try {
        q.feed("x");
        fail_msg("feed after finish succeeded");
    } catch (const Error &e) {
        assert_int_equal(e.status(), EMBER_ERR_INVALID_STATE);
    }
}

// Printable ASCII, newline, and tokens of the openers; EOS last.
std::shared_ptr<grammar::GrammarVocab> byte_vocab() {
    auto v = std::make_shared<grammar::GrammarVocab>();
    for (int c = 0x20; c < 0x7f; ++c) v->pieces.push_back(std::string(1, static_cast<char>(c)));
    for (const char *p : {"\n", "<tool_call>", "</tool_call>", "{\"", "\":", "é"}) v->pieces.push_back(p);
    v->pieces.push_back("");
    v->n_vocab = static_cast<int32_t>(v->pieces.size());
    v->eog.push_back(v->n_vocab - 1);
    v->trie = grammar::TokenTrie::build(v->pieces);
    return v;
}

// A walk that picks uniformly among allowed tokens, then prefers closing after a while.
bool random_walk(grammar::CompiledGrammar &g, std::mt19937 &rng, std::string &out) {
    const grammar::GrammarVocab &v = g.vocab();
    const int32_t eos = v.eog[0];
    int32_t s = g.start();
    out.clear();
    for (int step = 0; step < 600; ++step) {
        auto m = g.mask(s);
        if (m->n_allowed == 0) fail_msg("dead end after '%s'", out.c_str());
        std::vector<int32_t> allowed;
        for (int32_t id = 0; id < v.n_vocab; ++id)
            if (m->test(id)) allowed.push_back(id);
        int32_t pick = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
        if (step > 40 && rng() % 4 != 0)
            for (const char *closing : {"", "]", "}", "\"", "\n", "<", "0"}) {
                int32_t id = eos;
                if (*closing) id = *closing == '\n' ? 95 : static_cast<int32_t>(closing[0] - 0x20);
                if (m->test(id)) { pick = id; break; }
            }
        if (pick == eos) return true;
        out += v.pieces[static_cast<size_t>(pick)];
        s = g.advance(s, pick);
        assert_int_not_equal(s, grammar::GrammarAutomaton::kDead);
    }
    return false;
}

std::vector<Tool> game_tools() {
    return {
        {"open_door", "", grammar::parse_json(R"({"type": "object", "properties": {"door": {"type": "string", "enum": ["north", "south"]}}, "required": ["door"]})")},
        {"say", "", grammar::parse_json(R"({"type": "object", "properties": {"text": {"type": "string", "maxLength": 12}, "loud": {"type": "boolean"}}, "required": ["text"]})")},
        {"move", "", grammar::parse_json(R"({"type": "object", "properties": {"x": {"type": "integer", "minimum": -5, "maximum": 5}, "y": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["x", "y"]})")},
    };
}

void check_walks(Format format, ToolChoice choice, const std::string &name, bool calls_required) {
    const std::vector<Tool> tools = game_tools();
    const ToolGrammar tg = tool_grammar(format, tools, choice, name);
    grammar::CompiledGrammar g(grammar::parse_gbnf(tg.gbnf), byte_vocab());
    std::mt19937 rng(7);
    int ended = 0, with_calls = 0;
    for (int i = 0; i < 100; ++i) {
        std::string text;
        if (!random_walk(g, rng, text)) continue;
        ++ended;
        ToolCallParser p(format, {});
        p.feed(tg.prefix + text);
        p.finish();
        const ParseResult &r = p.result();
        if (r.malformed) fail_msg("%s: a walk's output is malformed: '%s'", format_name(format), text.c_str());
        if (calls_required && r.calls.empty()) fail_msg("%s: no call in '%s'", format_name(format), text.c_str());
        with_calls += !r.calls.empty();
        for (const ToolCall &c : r.calls) {
            if (choice == ToolChoice::Named && c.name != name) fail_msg("call to %s, not %s", c.name.c_str(), name.c_str());
            const Tool *t = nullptr;
            for (const Tool &x : tools) if (x.name == c.name) t = &x;
            if (!t) fail_msg("a call to the unknown tool '%s'", c.name.c_str());
            const std::string err = test_schema::validate(grammar::parse_json(c.arguments), t->parameters, t->parameters);
            if (!err.empty()) fail_msg("%s: %s(%s): %s", format_name(format), c.name.c_str(), c.arguments.c_str(), err.c_str());
        }
    }
    if (ended < 90) fail_msg("%s: only %d of 100 walks ended", format_name(format), ended);
    if (!calls_required && with_calls == 0) fail_msg("%s auto: no walk made a call", format_name(format));
}

void test_grammar_walks_parse_and_validate(void **) {
    for (Format f : {Format::Hermes, Format::Llama3, Format::Mistral, Format::Granite, Format::Phi4}) {
        check_walks(f, ToolChoice::Required, "", true);
        check_walks(f, ToolChoice::Named, "move", true);
    }
    check_walks(Format::GptOss, ToolChoice::Named, "say", true);
    // Auto's grammar is lazy: from its trigger on (the walk starts there) it writes one call, opener
    // included where the opener is text (as it is in this vocabulary).
    for (Format f : {Format::Hermes, Format::Llama3, Format::Mistral, Format::Granite, Format::Phi4})
        check_walks(f, ToolChoice::Auto, "", true);
}

void test_grammar_errors(void **) {
    auto status_of = [](Format f, std::vector<Tool> tools, ToolChoice c, const std::string &name) {
        try {
            tool_grammar(f, tools, c, name);
        } catch (const Error &e) {
            return e.status();
        }
        return EMBER_OK;
    };
    assert_int_equal(status_of(Format::Hermes, {}, ToolChoice::Required, ""), EMBER_ERR_INVALID_ARGUMENT);
    assert_int_equal(status_of(Format::Hermes, game_tools(), ToolChoice::Named, "fly"), EMBER_ERR_INVALID_ARGUMENT);
    assert_int_equal(status_of(Format::Mistral, game_tools(), ToolChoice::Auto, ""), EMBER_OK);
    assert_int_equal(status_of(Format::GptOss, game_tools(), ToolChoice::Auto, ""), EMBER_OK);
    assert_int_equal(status_of(Format::Content, game_tools(), ToolChoice::Auto, ""), EMBER_ERR_UNSUPPORTED);
    assert_int_equal(status_of(Format::GptOss, game_tools(), ToolChoice::Required, ""), EMBER_ERR_UNSUPPORTED);
    assert_int_equal(status_of(Format::Content, game_tools(), ToolChoice::Required, ""), EMBER_ERR_UNSUPPORTED);
    assert_int_equal(status_of(Format::Hermes, game_tools(), ToolChoice::None, ""), EMBER_OK);
    std::vector<Tool> dup = game_tools();
    dup.push_back(dup[0]);
    assert_int_equal(status_of(Format::Hermes, dup, ToolChoice::Required, ""), EMBER_ERR_INVALID_ARGUMENT);
    // The rule renaming leaves literals, classes and repetition counts alone.
    assert_string_equal(prefix_rules("root ::= \"a-b\" [a-z]{0,15} x-y\n", "t0-").c_str(),
                        "t0-root ::= \"a-b\" [a-z]{0,15} t0-x-y\n");
}

} // namespace

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render_matches_reference),
        cmocka_unit_test(test_render_errors),
        cmocka_unit_test(test_detect_format),
        cmocka_unit_test(test_parse_recorded),
        cmocka_unit_test(test_parse_ids_and_names),
        cmocka_unit_test(test_grammar_walks_parse_and_validate),
        cmocka_unit_test(test_grammar_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
