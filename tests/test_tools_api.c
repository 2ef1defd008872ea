/* test_tools_api.c — tool calls and reasoning through the C ABI: a conversation with tools, calls and
 * results rendered by ember_chat_apply_template_v2; errors named (duplicate tools, a schema that cannot
 * be compiled, a template without tool support, struct_size too small); a reply parsed whole and one
 * byte at a time; and on stories15M, generations under ember_chat_tool_grammar (required) through
 * ember_generate and through the engine (ember_chat_parser_feed_request) whose text the parser turns into
 * calls; under tool_choice auto's lazy grammar, free text as without a grammar until the opener. Also the
 * sampling defaults a GGUF file carries (ember_sampler_params_from_model). */
#include "test_api_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A Hermes-style template: tools in a system block, calls as <tool_call> JSON, tool results. */
static const char kTemplate[] =
    "{%- if tools %}<tools>{% for t in tools %}{{ t.function.name }};{% endfor %}</tools>\n{% endif %}"
    "{%- for m in messages %}<|{{ m.role }}|>{{ m.content }}"
    "{%- if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>{{ c.function | tojson }}</tool_call>{% endfor %}{% endif %}"
    "{%- if m.tool_call_id %}[{{ m.tool_call_id }}]{% endif %}\n{% endfor %}"
    "{%- if add_generation_prompt %}<|assistant|>{% if enable_thinking is defined and not enable_thinking %}<think></think>{% endif %}{% endif %}";

static const ember_chat_tool kTools[] = {
    {"open_door", "Opens a door.",
     "{\"type\": \"object\", \"properties\": {\"door\": {\"type\": \"string\", \"enum\": [\"north\", \"south\"]}}, \"required\": [\"door\"]}"},
    {"wait", NULL, NULL},
};

static void test_render(void **state) {
    (void)state;
    const ember_chat_tool_call call = {"abc123XYZ", "open_door", "{\"door\": \"north\"}"};
    const ember_chat_turn turns[] = {
        {"user", "Let me out.", NULL, NULL, 0, NULL, NULL},
        {"assistant", NULL, NULL, &call, 1, NULL, NULL},
        {"tool", "opened", NULL, NULL, 0, "abc123XYZ", "open_door"},
    };
    ember_chat_params p;
    ember_chat_params_init(&p);
    assert_true(p.add_generation_prompt);
    p.tmpl = kTemplate;
    p.messages = turns;
    p.n_messages = 3;
    p.tools = kTools;
    p.n_tools = 2;
    p.reasoning = EMBER_REASONING_OFF;
    size_t n = 0;
    assert_int_equal(ember_chat_apply_template_v2(NULL, &p, NULL, 0, &n), EMBER_OK);
    char *buf = malloc(n + 1);
    assert_int_equal(ember_chat_apply_template_v2(NULL, &p, buf, n + 1, &n), EMBER_OK);
    /* As Python's jinja2 renders it (trim_blocks drops the newline after each block tag). */
    assert_string_equal(buf, "<tools>open_door;wait;</tools>\n<|user|>Let me out."
                             "<|assistant|><tool_call>{\"name\": \"open_door\", \"arguments\": {\"door\": \"north\"}}</tool_call>"
                             "<|tool|>opened[abc123XYZ]<|assistant|><think></think>");
    free(buf);

    /* The same tools as OpenAI's JSON array render the same text. */
    p.tools = NULL;
    p.n_tools = 0;
    p.tools_json = "[{\"type\": \"function\", \"function\": {\"name\": \"open_door\", \"parameters\": "
                   "{\"type\": \"object\", \"properties\": {\"door\": {\"enum\": [\"north\"]}}}}}, {\"name\": \"wait\"}]";
    char again[1024];
    assert_int_equal(ember_chat_apply_template_v2(NULL, &p, again, sizeof again, &n), EMBER_OK);
    assert_non_null(strstr(again, "<tools>open_door;wait;</tools>"));
    p.tools_json = "{\"name\": \"x\"}";
    assert_int_equal(ember_chat_apply_template_v2(NULL, &p, NULL, 0, &n), EMBER_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ember_last_error(), "tools_json"));
    p.tools_json = NULL;
    p.tools = kTools;
    p.n_tools = 2;

    /* Errors name the problem. */
    ember_chat_tool dup[] = {kTools[0], kTools[0]};
    p.tools = dup;
    assert_int_equal(ember_chat_apply_template_v2(NULL, &p, NULL, 0, &n), EMBER_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ember_last_error(), "used by an earlier tool"));
    ember_chat_tool bad = {"when", NULL, "{\"type\": \"object\", \"properties\": {\"d\": {\"type\": \"string\", \"format\": \"date\"}}}"};
    p.tools = &bad;
    p.n_tools = 1;
    assert_int_equal(ember_chat_apply_template_v2(NULL, &p, NULL, 0, &n), EMBER_ERR_UNSUPPORTED);
    assert_non_null(strstr(ember_last_error(), "'when'"));
    p.tools = kTools;
    p.tmpl = "{% for m in messages %}{{ m.content }}{% endfor %}";
    assert_int_equal(ember_chat_apply_template_v2(NULL, &p, NULL, 0, &n), EMBER_ERR_UNSUPPORTED);
    assert_non_null(strstr(ember_last_error(), "no tool support"));
    p.tmpl = kTemplate;
    p.reasoning = (ember_reasoning)7;
    assert_int_equal(ember_chat_apply_template_v2(NULL, &p, NULL, 0, &n), EMBER_ERR_INVALID_ARGUMENT);
    p.reasoning = EMBER_REASONING_DEFAULT;
    p.struct_size = 4;
    assert_int_equal(ember_chat_apply_template_v2(NULL, &p, NULL, 0, &n), EMBER_ERR_INVALID_ARGUMENT);
    assert_int_equal(ember_chat_apply_template_v2(NULL, NULL, NULL, 0, &n), EMBER_ERR_INVALID_ARGUMENT);
}

static void test_detect(void **state) {
    (void)state;
    ember_chat_format f = EMBER_CHAT_FORMAT_AUTO;
    assert_int_equal(ember_chat_format_detect(NULL, kTemplate, &f), EMBER_OK);
    assert_int_equal(f, EMBER_CHAT_FORMAT_HERMES);
    assert_string_equal(ember_chat_format_name(f), "hermes");
    assert_string_equal(ember_chat_format_name((ember_chat_format)99), "unknown");
    assert_int_equal(ember_chat_format_detect(NULL, NULL, &f), EMBER_ERR_INVALID_ARGUMENT);
}

static const char kReply[] = "<think>\nNorth is closer.\n</think>\n\nOpening it.\n<tool_call>\n"
                             "{\"name\": \"open_door\", \"arguments\": {\"door\": \"north\"}}\n</tool_call>";

static void test_parser(void **state) {
    (void)state;
    ember_chat_parser_params pp;
    ember_chat_parser_params_init(&pp);
    pp.tmpl = kTemplate;
    pp.tools = kTools;
    pp.n_tools = 2;
    ember_chat_parser *p = NULL;
    assert_int_equal(ember_chat_parser_create(NULL, &pp, &p), EMBER_OK);
    char content[256] = "", reasoning[256] = "";
    size_t n_calls = 0;
    for (size_t i = 0; i <= sizeof kReply - 1; ++i) {
        if (i < sizeof kReply - 1) assert_int_equal(ember_chat_parser_feed(p, kReply + i, 1), EMBER_OK);
        else assert_int_equal(ember_chat_parser_finish(p), EMBER_OK);
        ember_chat_delta d;
        ember_chat_delta_init(&d);
        assert_int_equal(ember_chat_parser_take(p, &d), EMBER_OK);
        strncat(content, d.content, d.content_len);
        strncat(reasoning, d.reasoning, d.reasoning_len);
        assert_int_equal(d.first_call, n_calls);
        n_calls += d.n_calls;
    }
    assert_string_equal(content, "Opening it.");
    assert_string_equal(reasoning, "North is closer.");
    assert_int_equal(n_calls, 1);
    ember_chat_tool_call c;
    assert_int_equal(ember_chat_parser_call(p, 0, &c), EMBER_OK);
    assert_string_equal(c.name, "open_door");
    assert_string_equal(c.arguments, "{\"door\":\"north\"}");
    assert_int_equal(strlen(c.id), 9);
    assert_int_equal(ember_chat_parser_call(p, 1, &c), EMBER_ERR_INVALID_ARGUMENT);
    ember_chat_delta all;
    ember_chat_delta_init(&all);
    assert_int_equal(ember_chat_parser_result(p, &all), EMBER_OK);
    assert_int_equal(all.n_calls, 1);
    assert_false(all.malformed);
    assert_int_equal(ember_chat_parser_feed(p, "x", 1), EMBER_ERR_INVALID_STATE);
    ember_chat_parser_free(p);

    /* A call to a tool not offered stays content, flagged. */
    pp.format = EMBER_CHAT_FORMAT_HERMES;
    pp.tmpl = NULL;
    assert_int_equal(ember_chat_parser_create(NULL, &pp, &p), EMBER_OK);
    const char other[] = "<tool_call>{\"name\": \"fly\", \"arguments\": {}}</tool_call>";
    assert_int_equal(ember_chat_parser_feed(p, other, sizeof other - 1), EMBER_OK);
    assert_int_equal(ember_chat_parser_finish(p), EMBER_OK);
    assert_int_equal(ember_chat_parser_result(p, &all), EMBER_OK);
    assert_int_equal(all.n_calls, 0);
    assert_true(all.malformed);
    assert_int_equal(all.content_len, sizeof other - 1);
    ember_chat_parser_free(p);
    pp.format = (ember_chat_format)42;
    assert_int_equal(ember_chat_parser_create(NULL, &pp, &p), EMBER_ERR_INVALID_ARGUMENT);
    assert_null(p);
    ember_chat_parser_free(NULL);
}

/* A GGUF file of metadata only (no tensors): general.architecture and the sampling keys an author may
 * set, written by hand (version 3: u32 version, u64 counts, u64-length strings). */
static void put(FILE *f, const void *p, size_t n) { assert_int_equal(fwrite(p, 1, n, f), n); }
static void put_key(FILE *f, const char *key, uint32_t type) {
    const uint64_t n = strlen(key);
    put(f, &n, 8);
    put(f, key, n);
    put(f, &type, 4);
}

static void test_sampling_defaults(void **state) {
    (void)state;
    char path[] = "/tmp/ember_sampling_XXXXXX";
    const int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "wb");
    const uint32_t version = 3;
    const uint64_t n_tensors = 0, n_kv = 5;
    put(f, "GGUF", 4);
    put(f, &version, 4);
    put(f, &n_tensors, 8);
    put(f, &n_kv, 8);
    put_key(f, "general.architecture", 8);
    const uint64_t arch_len = 5;
    put(f, &arch_len, 8);
    put(f, "llama", 5);
    const float temp = 0.6f, top_p = 0.95f, rep = 1.05f;
    const uint32_t top_k = 20;
    put_key(f, "general.sampling.temp", 6);
    put(f, &temp, 4);
    put_key(f, "general.sampling.top_k", 4);
    put(f, &top_k, 4);
    put_key(f, "general.sampling.top_p", 6);
    put(f, &top_p, 4);
    put_key(f, "general.sampling.penalty_repeat", 6);
    put(f, &rep, 4);
    fclose(f);
    ember_model *m = NULL;
    assert_int_equal(ember_model_load_metadata(path, NULL, &m), EMBER_OK);
    unlink(path);
    ember_sampler_params sp;
    ember_sampler_params_init(&sp);
    sp.seed = 77;
    size_t n = 0;
    assert_int_equal(ember_sampler_params_from_model(m, &sp, &n), EMBER_OK);
    assert_int_equal(n, 4);
    assert_float_equal(sp.temperature, 0.6f, 1e-6);
    assert_int_equal(sp.top_k, 20);
    assert_float_equal(sp.top_p, 0.95f, 1e-6);
    assert_float_equal(sp.repeat_penalty, 1.05f, 1e-6);
    assert_float_equal(sp.min_p, 0.0f, 0);          /* not in the file: as it was */
    assert_int_equal(sp.penalty_last_n, 64);
    assert_int_equal(sp.seed, 77);
    sp.struct_size = 8;
    assert_int_equal(ember_sampler_params_from_model(m, &sp, &n), EMBER_ERR_INVALID_ARGUMENT);
    ember_model_free(m);

    /* Logit bias through the ABI: a banned favourite, a favoured outsider, bad input refused. */
    ember_sampler *g = test_greedy_sampler();
    const float logits[4] = {1.0f, 3.0f, 2.9f, -1.0f};
    ember_token t = -1;
    const ember_logit_bias ban = {1, -100.0f};
    assert_int_equal(ember_sampler_set_logit_bias(g, &ban, 1), EMBER_OK);
    assert_int_equal(ember_sampler_sample(g, logits, 4, &t), EMBER_OK);
    assert_int_equal(t, 2);
    const ember_logit_bias up[2] = {{1, -100.0f}, {3, 10.0f}};
    assert_int_equal(ember_sampler_set_logit_bias(g, up, 2), EMBER_OK);
    assert_int_equal(ember_sampler_sample(g, logits, 4, &t), EMBER_OK);
    assert_int_equal(t, 3);
    const ember_logit_bias bad = {-3, 1.0f};
    assert_int_equal(ember_sampler_set_logit_bias(g, &bad, 1), EMBER_ERR_INVALID_ARGUMENT);
    assert_int_equal(ember_sampler_set_logit_bias(g, NULL, 1), EMBER_ERR_INVALID_ARGUMENT);
    assert_int_equal(ember_sampler_set_logit_bias(g, NULL, 0), EMBER_OK);
    assert_int_equal(ember_sampler_sample(g, logits, 4, &t), EMBER_OK);
    assert_int_equal(t, 1);
    ember_sampler_free(g);
}

struct collected {
    char text[8192];
    size_t len;
};

static bool collect(ember_token token, const char *text, size_t len, void *user_data) {
    (void)token;
    struct collected *c = user_data;
    if (c->len + len < sizeof c->text) memcpy(c->text + c->len, text, len), c->len += len;
    return true;
}

static void test_generate_required(void **state) {
    (void)state;
    const char *path = test_find_model("stories15M-q8_0.gguf", "stories15M/stories15M-q8_0.gguf");
    test_require(path, "stories15M-q8_0.gguf");
    ember_model *model = NULL;
    assert_int_equal(ember_model_load(path, NULL, &model), EMBER_OK);
    ember_tool_grammar_params gp;
    ember_tool_grammar_params_init(&gp);
    assert_int_equal(gp.choice, EMBER_TOOL_CHOICE_REQUIRED);
    assert_true(gp.parallel);
    gp.parallel = false;   /* one call: stories15M's context is 256 tokens */
    gp.format = EMBER_CHAT_FORMAT_HERMES;
    gp.tools = kTools;
    gp.n_tools = 2;
    ember_grammar *g = NULL;
    assert_int_equal(ember_chat_tool_grammar(model, &gp, &g), EMBER_OK);
    size_t n = 99;
    char prefix[8];
    assert_int_equal(ember_chat_tool_prefix(model, &gp, prefix, sizeof prefix, &n), EMBER_OK);
    assert_int_equal(n, 0);
    gp.choice = EMBER_TOOL_CHOICE_NAMED;
    gp.name = "fly";
    ember_grammar *none = NULL;
    assert_int_equal(ember_chat_tool_grammar(model, &gp, &none), EMBER_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ember_last_error(), "'fly'"));
    gp.choice = EMBER_TOOL_CHOICE_NONE;
    assert_int_equal(ember_chat_tool_grammar(model, &gp, &none), EMBER_OK);
    assert_null(none);

    ember_session *s = NULL;
    assert_int_equal(ember_session_create(model, NULL, &s), EMBER_OK);
    ember_token prompt[16];
    const size_t n_prompt = test_tokenize(model, "The knight", prompt, 16);
    for (uint64_t seed = 1; seed <= 5; ++seed) {
        assert_int_equal(ember_session_truncate(s, 0), EMBER_OK);
        assert_int_equal(ember_session_feed(s, prompt, n_prompt), EMBER_OK);
        ember_sampler_params sp;
        ember_sampler_params_init(&sp);
        sp.seed = seed;
        ember_sampler *smp = NULL;
        assert_int_equal(ember_sampler_create(&sp, &smp), EMBER_OK);
        ember_generate_params ge;
        ember_generate_params_init(&ge);
        ge.max_tokens = 200;
        ge.grammar = g;
        ge.on_token = collect;
        struct collected c = {{0}, 0};
        ge.user_data = &c;
        assert_int_equal(ember_generate(s, smp, &ge, NULL), EMBER_END_OF_GENERATION);
        ember_chat_parser_params pp;
        ember_chat_parser_params_init(&pp);
        pp.format = EMBER_CHAT_FORMAT_HERMES;
        ember_chat_parser *p = NULL;
        assert_int_equal(ember_chat_parser_create(NULL, &pp, &p), EMBER_OK);
        assert_int_equal(ember_chat_parser_feed(p, c.text, c.len), EMBER_OK);
        assert_int_equal(ember_chat_parser_finish(p), EMBER_OK);
        ember_chat_delta d;
        ember_chat_delta_init(&d);
        assert_int_equal(ember_chat_parser_result(p, &d), EMBER_OK);
        if (d.n_calls != 1 || d.malformed || d.content_len) fail_msg("seed %llu: '%s' is not calls", (unsigned long long)seed, c.text);
        ember_chat_parser_free(p);
        ember_sampler_free(smp);
    }
    ember_session_free(s);

    /* The same through the engine: the request's text fed to a parser as it comes. */
    ember_engine_params ep;
    ember_engine_params_init(&ep);
    ep.n_seq_max = 2;
    ember_engine *engine = NULL;
    assert_int_equal(ember_engine_create(model, &ep, &engine), EMBER_OK);
    ember_sampler_params sp;
    ember_sampler_params_init(&sp);
    sp.seed = 9;
    ember_request_params rp;
    ember_request_params_init(&rp);
    rp.prompt = prompt;
    rp.n_prompt = n_prompt;
    rp.max_tokens = 200;
    rp.sampling = &sp;
    rp.grammar = g;
    ember_request *req = NULL;
    assert_int_equal(ember_request_submit(engine, &rp, &req), EMBER_OK);
    ember_chat_parser_params pp;
    ember_chat_parser_params_init(&pp);
    pp.format = EMBER_CHAT_FORMAT_HERMES;
    ember_chat_parser *p = NULL;
    assert_int_equal(ember_chat_parser_create(NULL, &pp, &p), EMBER_OK);
    ember_request_state rs = EMBER_REQUEST_QUEUED;
    size_t calls = 0, content = 0;
    for (int i = 0; i < 10000 && (rs == EMBER_REQUEST_QUEUED || rs == EMBER_REQUEST_RUNNING); ++i) {
        const ember_status w = ember_request_wait(req, 20);   /* EMBER_STOPPED: 20 ms passed */
        assert_true(w == EMBER_OK || w == EMBER_STOPPED);
        assert_int_equal(ember_chat_parser_feed_request(p, req, &rs), EMBER_OK);
        ember_chat_delta d;
        ember_chat_delta_init(&d);
        assert_int_equal(ember_chat_parser_take(p, &d), EMBER_OK);
        calls += d.n_calls;
        content += d.content_len;
    }
    assert_int_equal(rs, EMBER_REQUEST_DONE);
    assert_int_equal(calls, 1);
    assert_int_equal(content, 0);
    assert_int_equal(ember_chat_parser_feed_request(p, NULL, &rs), EMBER_ERR_INVALID_ARGUMENT);
    ember_chat_parser_free(p);
    ember_request_free(req);
    ember_engine_free(engine);
    ember_grammar_free(g);
    ember_model_free(model);
}

/* tool_choice auto: a lazy grammar (EMBER_1.10). Free text under it is the text without it (the opener
 * never comes in a story); the opener accepted switches it on; ember_grammar_create_lazy's bad input. */
static void test_generate_auto(void **state) {
    (void)state;
    const char *path = test_find_model("stories15M-q8_0.gguf", "stories15M/stories15M-q8_0.gguf");
    test_require(path, "stories15M-q8_0.gguf");
    ember_model *model = NULL;
    assert_int_equal(ember_model_load(path, NULL, &model), EMBER_OK);
    ember_tool_grammar_params gp;
    ember_tool_grammar_params_init(&gp);
    gp.format = EMBER_CHAT_FORMAT_MISTRAL;   /* its opener was refused for AUTO before EMBER_1.10 */
    gp.tools = kTools;
    gp.n_tools = 2;
    gp.choice = EMBER_TOOL_CHOICE_AUTO;
    ember_grammar *g = NULL;
    assert_int_equal(ember_chat_tool_grammar(model, &gp, &g), EMBER_OK);
    assert_non_null(g);
    size_t n = 99;
    char prefix[8];
    assert_int_equal(ember_chat_tool_prefix(model, &gp, prefix, sizeof prefix, &n), EMBER_OK);
    assert_int_equal(n, 0);

    ember_session *s = NULL;
    assert_int_equal(ember_session_create(model, NULL, &s), EMBER_OK);
    ember_token prompt[16];
    const size_t n_prompt = test_tokenize(model, "The knight", prompt, 16);
    struct collected texts[2];
    for (int with = 0; with < 2; ++with) {
        assert_int_equal(ember_session_truncate(s, 0), EMBER_OK);
        assert_int_equal(ember_session_feed(s, prompt, n_prompt), EMBER_OK);
        ember_sampler_params sp;
        ember_sampler_params_init(&sp);
        sp.seed = 3;
        ember_sampler *smp = NULL;
        assert_int_equal(ember_sampler_create(&sp, &smp), EMBER_OK);
        ember_generate_params ge;
        ember_generate_params_init(&ge);
        ge.max_tokens = 40;
        ge.grammar = with ? g : NULL;
        ge.on_token = collect;
        memset(&texts[with], 0, sizeof texts[with]);
        ge.user_data = &texts[with];
        const ember_status st = ember_generate(s, smp, &ge, NULL);
        assert_true(st == EMBER_OK || st == EMBER_END_OF_GENERATION);
        bool on = true;
        assert_int_equal(ember_sampler_grammar_constraining(smp, &on), EMBER_OK);
        assert_false(on);
        ember_sampler_free(smp);
    }
    assert_int_equal(texts[0].len, texts[1].len);
    assert_memory_equal(texts[0].text, texts[1].text, texts[0].len);
    ember_session_free(s);

    /* The opener, over several of the model's tokens, switches the grammar on. */
    ember_sampler *smp = NULL;
    assert_int_equal(ember_sampler_create(NULL, &smp), EMBER_OK);
    assert_int_equal(ember_sampler_set_grammar(smp, g), EMBER_OK);
    ember_token opener[16];
    const size_t n_opener = test_tokenize(model, "Then [TOOL_CALLS]", opener, 16);
    bool on = true;
    for (size_t i = 0; i < n_opener; ++i) {
        assert_int_equal(ember_sampler_grammar_constraining(smp, &on), EMBER_OK);
        assert_false(on);
        assert_int_equal(ember_sampler_accept(smp, opener[i]), EMBER_OK);
    }
    assert_int_equal(ember_sampler_grammar_constraining(smp, &on), EMBER_OK);
    assert_true(on);
    assert_int_equal(ember_sampler_accept(smp, opener[0]), EMBER_ERR_INVALID_ARGUMENT);   /* "Then" is no call */
    assert_int_equal(ember_sampler_grammar_constraining(NULL, &on), EMBER_ERR_INVALID_ARGUMENT);
    ember_sampler_free(smp);
    ember_grammar_free(g);

    /* ember_grammar_create_lazy's bad input. */
    const char gbnf[] = "root ::= \"<a>\" [0-9]+ \"</a>\"";
    ember_grammar_triggers t;
    ember_grammar_triggers_init(&t);
    assert_int_equal(t.struct_size, sizeof t);
    ember_grammar *lazy = (ember_grammar *)1;
    assert_int_equal(ember_grammar_create_lazy(model, gbnf, strlen(gbnf), NULL, &lazy), EMBER_ERR_INVALID_ARGUMENT);
    assert_null(lazy);
    assert_int_equal(ember_grammar_create_lazy(model, gbnf, strlen(gbnf), &t, &lazy), EMBER_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ember_last_error(), "trigger"));
    const char *words[] = {"<a>", ""};
    t.words = words;
    t.n_words = 2;
    assert_int_equal(ember_grammar_create_lazy(model, gbnf, strlen(gbnf), &t, &lazy), EMBER_ERR_INVALID_ARGUMENT);
    const ember_token far = 1 << 24;
    t.n_words = 1;
    t.tokens = &far;
    t.n_tokens = 1;
    assert_int_equal(ember_grammar_create_lazy(model, gbnf, strlen(gbnf), &t, &lazy), EMBER_ERR_INVALID_ARGUMENT);
    t.n_tokens = 0;
    t.struct_size = 2;
    assert_int_equal(ember_grammar_create_lazy(model, gbnf, strlen(gbnf), &t, &lazy), EMBER_ERR_INVALID_ARGUMENT);
    t.struct_size = sizeof t;
    assert_int_equal(ember_grammar_create_lazy(model, gbnf, strlen(gbnf), &t, &lazy), EMBER_OK);
    ember_grammar_free(lazy);
    ember_model_free(model);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render),
        cmocka_unit_test(test_detect),
        cmocka_unit_test(test_parser),
        cmocka_unit_test(test_sampling_defaults),
        cmocka_unit_test(test_generate_required),
        cmocka_unit_test(test_generate_auto),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
