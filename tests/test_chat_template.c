/* test_chat_template.c — ember_chat_apply_template through the public ABI: the chat templates of real
 * model families, written into small vocab-only GGUF files as tokenizer.chat_template, rendered for a
 * system/user/assistant/user conversation with and without add_generation_prompt and compared with text
 * derived by hand from each template; the ChatML fallback; the templates' raise_exception checks;
 * unsupported and malformed templates; the two-call idiom; NULL arguments; and how the result tokenizes.
 *
 * The template strings are the Jinja text of each model's tokenizer_config.json (chat_template), written
 * out here; where the shared vocab files carry their own template (Phi-3, Qwen2) that is rendered too. */
#define _GNU_SOURCE /* mkstemp */
#include "test_util.h"

#include <ember/ember.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- a minimal GGUF writer: a vocab-only SentencePiece model with a chat template ------------------ */

typedef struct {
    unsigned char *data;
    size_t len, cap;
} bytes;

static void put(bytes *b, const void *p, size_t n) {
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 64;
        b->data = realloc(b->data, b->cap);
        assert_non_null(b->data);
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
}
static void put_u32(bytes *b, uint32_t v) { put(b, &v, 4); } /* x86-64 and arm64: little-endian, as GGUF */
static void put_u64(bytes *b, uint64_t v) { put(b, &v, 8); }
static void put_str(bytes *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void put_key(bytes *b, const char *key, uint32_t type) {
    put_str(b, key);
    put_u32(b, type);
}

enum { GGUF_U32 = 4, GGUF_I32 = 5, GGUF_F32 = 6, GGUF_STRING = 8, GGUF_ARRAY = 9 };

/* Writes a vocab-only GGUF: tokens "<unk>", bos, eos (each NULL: absent), "a", "b"; tmpl NULL: no
 * tokenizer.chat_template; tmpl_as_int: the key holds a u32 instead of a string (malformed). Returns a
 * path under /tmp that the caller unlinks. */
static const char *write_model(const char *bos, const char *eos, const char *tmpl, int tmpl_as_int) {
    static char path[64];
    snprintf(path, sizeof path, "/tmp/ember-chat-XXXXXX");
    const int fd = mkstemp(path);
    assert_true(fd >= 0);

    const char *tokens[5];
    int32_t types[5];
    uint32_t n = 0, bos_id = 0, eos_id = 0;
    tokens[n] = "<unk>"; types[n++] = 2;
    if (bos) { bos_id = n; tokens[n] = bos; types[n++] = 3; }
    if (eos) { eos_id = n; tokens[n] = eos; types[n++] = 3; }
    tokens[n] = "a"; types[n++] = 1;
    tokens[n] = "b"; types[n++] = 1;

    /* general.architecture, tokenizer.ggml.model, .tokens, .scores, .token_type, then the optional ones */
    const uint64_t n_kv = 5 + (bos ? 1 : 0) + (eos ? 1 : 0) + (tmpl || tmpl_as_int ? 1 : 0);
    bytes b = {0};
    put(&b, "GGUF", 4);
    put_u32(&b, 3);
    put_u64(&b, 0); /* tensors */
    put_u64(&b, n_kv);
    put_key(&b, "general.architecture", GGUF_STRING);
    put_str(&b, "llama");
    put_key(&b, "tokenizer.ggml.model", GGUF_STRING);
    put_str(&b, "llama");
    put_key(&b, "tokenizer.ggml.tokens", GGUF_ARRAY);
    put_u32(&b, GGUF_STRING);
    put_u64(&b, n);
    for (uint32_t i = 0; i < n; ++i) put_str(&b, tokens[i]);
    put_key(&b, "tokenizer.ggml.scores", GGUF_ARRAY);
    put_u32(&b, GGUF_F32);
    put_u64(&b, n);
    for (uint32_t i = 0; i < n; ++i) {
        const float s = -(float)i;
        put(&b, &s, 4);
    }
    put_key(&b, "tokenizer.ggml.token_type", GGUF_ARRAY);
    put_u32(&b, GGUF_I32);
    put_u64(&b, n);
    put(&b, types, 4 * n);
    if (bos) { put_key(&b, "tokenizer.ggml.bos_token_id", GGUF_U32); put_u32(&b, bos_id); }
    if (eos) { put_key(&b, "tokenizer.ggml.eos_token_id", GGUF_U32); put_u32(&b, eos_id); }
    if (tmpl_as_int) {
        put_key(&b, "tokenizer.chat_template", GGUF_U32);
        put_u32(&b, 7);
    } else if (tmpl) {
        put_key(&b, "tokenizer.chat_template", GGUF_STRING);
        put_str(&b, tmpl);
    }
    while (b.len % 32) put(&b, "", 1);
    assert_int_equal(write(fd, b.data, b.len), (ssize_t)b.len);
    close(fd);
    free(b.data);
    return path;
}

/* A vocabulary-only load of `path` (asserting success). */
static ember_model *load_vocab(const char *path) {
    ember_model_params p;
    ember_model_params_init(&p);
    p.vocab_only = true;
    ember_model *m = NULL;
    const ember_status st = ember_model_load(path, &p, &m);
    if (st != EMBER_OK) fprintf(stderr, "load %s: %s\n", path, ember_last_error());
    assert_int_equal(st, EMBER_OK);
    return m;
}

/* A file under ../shared/models, loaded vocabulary-only; the test is skipped when it is absent. */
static ember_model *load_shared_vocab(const char *relative) {
    TEST_REQUIRE_MODEL(path, NULL, relative)
    return load_vocab(path);
}

static ember_model *load_model(const char *bos, const char *eos, const char *tmpl) {
    const char *path = write_model(bos, eos, tmpl, 0);
    ember_model *m = load_vocab(path);
    unlink(path);
    return m;
}

/* Renders with the two-call idiom and returns a malloc'ed string (asserting success). */
static char *apply(const ember_model *m, const char *tmpl, const ember_chat_message *msgs, size_t n, bool gen) {
    size_t len = 0;
    ember_status st = ember_chat_apply_template(m, tmpl, msgs, n, gen, NULL, 0, &len);
    if (st != EMBER_OK) fprintf(stderr, "apply: %s\n", ember_last_error());
    assert_int_equal(st, EMBER_OK);
    char *buf = malloc(len + 1);
    assert_non_null(buf);
    size_t len2 = 0;
    assert_int_equal(ember_chat_apply_template(m, tmpl, msgs, n, gen, buf, len + 1, &len2), EMBER_OK);
    assert_int_equal(len2, len);
    assert_int_equal(strlen(buf), len);
    return buf;
}

static void expect_render(const ember_model *m, const char *tmpl, const ember_chat_message *msgs, size_t n, bool gen,
                          const char *want) {
    char *got = apply(m, tmpl, msgs, n, gen);
    if (strcmp(got, want) != 0) {
        fprintf(stderr, "rendered:\n[%s]\nexpected:\n[%s]\n", got, want);
        free(got);
        fail();
    }
    free(got);
}

static void expect_error(const ember_model *m, const char *tmpl, const ember_chat_message *msgs, size_t n,
                         ember_status status, const char *part) {
    size_t len = 123;
    const ember_status st = ember_chat_apply_template(m, tmpl, msgs, n, true, NULL, 0, &len);
    if (st != status || !strstr(ember_last_error(), part)) {
        fprintf(stderr, "status %s, message [%s]; expected %s with [%s]\n", ember_status_string(st), ember_last_error(),
                ember_status_string(status), part);
        fail();
    }
}

/* The conversation every template renders: system, user, assistant, user. The last user message has a
 * space at each end, so that templates which strip or trim contents differ from those that do not. */
static const ember_chat_message kConversation[] = {
    {"system", "You are a helpful assistant."},
    {"user", "Hello!"},
    {"assistant", "Hi! How can I help?"},
    {"user", " Tell me a joke. "},
};
/* The same without the system message, for templates that refuse one. */
static const ember_chat_message *const kNoSystem = kConversation + 1;

/* ---- the templates ------------------------------------------------------------------------------- */

/* meta-llama/Llama-2-7b-chat-hf. */
static const char kLlama2[] =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
    "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
    "{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
    "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";

/* meta-llama/Meta-Llama-3-8B-Instruct. */
static const char kLlama3[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";

/* meta-llama/Llama-3.1-8B-Instruct: a long template over many lines, with tool-calling branches that a
 * plain conversation does not take (they must parse all the same) and `tools is not none` checks. */
static const char kLlama31[] =
    "{{- bos_token }}\n"
    "{%- if custom_tools is defined %}\n"
    "    {%- set tools = custom_tools %}\n"
    "{%- endif %}\n"
    "{%- if not tools_in_user_message is defined %}\n"
    "    {%- set tools_in_user_message = true %}\n"
    "{%- endif %}\n"
    "{%- if not date_string is defined %}\n"
    "    {%- set date_string = \"26 Jul 2024\" %}\n"
    "{%- endif %}\n"
    "{%- if not tools is defined %}\n"
    "    {%- set tools = none %}\n"
    "{%- endif %}\n"
    "\n"
    "{#- This block extracts the system message, so we can slot it into the right place. #}\n"
    "{%- if messages[0]['role'] == 'system' %}\n"
    "    {%- set system_message = messages[0]['content']|trim %}\n"
    "    {%- set messages = messages[1:] %}\n"
    "{%- else %}\n"
    "    {%- set system_message = \"\" %}\n"
    "{%- endif %}\n"
    "\n"
    "{#- System message + builtin tools #}\n"
    "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n"
    "{%- if builtin_tools is defined or tools is not none %}\n"
    "    {{- \"Environment: ipython\\n\" }}\n"
    "{%- endif %}\n"
    "{%- if builtin_tools is defined %}\n"
    "    {{- \"Tools: \" + builtin_tools | reject('equalto', 'code_interpreter') | join(\", \") + \"\\n\\n\"}}\n"
    "{%- endif %}\n"
    "{{- \"Cutting Knowledge Date: December 2023\\n\" }}\n"
    "{{- \"Today Date: \" + date_string + \"\\n\\n\" }}\n"
    "{%- if tools is not none and not tools_in_user_message %}\n"
    "    {{- \"You have access to the following functions. To call a function, please respond with JSON for a function call.\" }}\n"
    "    {{- 'Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.' }}\n"
    "    {{- \"Do not use variables.\\n\\n\" }}\n"
    "    {%- for t in tools %}\n"
    "        {{- t | tojson(indent=4) }}\n"
    "        {{- \"\\n\\n\" }}\n"
    "    {%- endfor %}\n"
    "{%- endif %}\n"
    "{{- system_message }}\n"
    "{{- \"<|eot_id|>\" }}\n"
    "\n"
    "{#- Custom tools are passed in a user message with some extra guidance #}\n"
    "{%- if tools_in_user_message and not tools is none %}\n"
    "    {#- Extract the first user message so we can plug it in here #}\n"
    "    {%- if messages | length != 0 %}\n"
    "        {%- set first_user_message = messages[0]['content']|trim %}\n"
    "        {%- set messages = messages[1:] %}\n"
    "    {%- else %}\n"
    "        {{- raise_exception(\"Cannot put tools in the first user message when there's no first user message!\") }}\n"
    "{%- endif %}\n"
    "    {{- '<|start_header_id|>user<|end_header_id|>\\n\\n' -}}\n"
    "    {{- \"Given the following functions, please respond with a JSON for a function call \" }}\n"
    "    {{- \"with its proper arguments that best answers the given prompt.\\n\\n\" }}\n"
    "    {{- 'Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.' }}\n"
    "    {{- \"Do not use variables.\\n\\n\" }}\n"
    "    {%- for t in tools %}\n"
    "        {{- t | tojson(indent=4) }}\n"
    "        {{- \"\\n\\n\" }}\n"
    "    {%- endfor %}\n"
    "    {{- first_user_message + \"<|eot_id|>\"}}\n"
    "{%- endif %}\n"
    "\n"
    "{%- for message in messages %}\n"
    "    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}\n"
    "        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}\n"
    "    {%- elif 'tool_calls' in message %}\n"
    "        {%- if not message.tool_calls|length == 1 %}\n"
    "            {{- raise_exception(\"This model only supports single tool-calls at once!\") }}\n"
    "        {%- endif %}\n"
    "        {%- set tool_call = message.tool_calls[0].function %}\n"
    "        {%- if builtin_tools is defined and tool_call.name in builtin_tools %}\n"
    "            {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}\n"
    "            {{- \"<|python_tag|>\" + tool_call.name + \".call(\" }}\n"
    "            {%- for arg_name, arg_val in tool_call.arguments | items %}\n"
    "                {{- arg_name + '=\"' + arg_val + '\"' }}\n"
    "                {%- if not loop.last %}\n"
    "                    {{- \", \" }}\n"
    "                {%- endif %}\n"
    "                {%- endfor %}\n"
    "            {{- \")\" }}\n"
    "        {%- else  %}\n"
    "            {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}\n"
    "            {{- '{\"name\": \"' + tool_call.name + '\", ' }}\n"
    "            {{- '\"parameters\": ' }}\n"
    "            {{- tool_call.arguments | tojson }}\n"
    "            {{- \"}\" }}\n"
    "        {%- endif %}\n"
    "        {%- if builtin_tools is defined %}\n"
    "            {#- This means we're in ipython mode #}\n"
    "            {{- \"<|eom_id|>\" }}\n"
    "        {%- else %}\n"
    "            {{- \"<|eot_id|>\" }}\n"
    "        {%- endif %}\n"
    "    {%- elif message.role == \"tool\" or message.role == \"ipython\" %}\n"
    "        {{- \"<|start_header_id|>ipython<|end_header_id|>\\n\\n\" }}\n"
    "        {%- if message.content is mapping or message.content is iterable %}\n"
    "            {{- message.content | tojson }}\n"
    "        {%- else %}\n"
    "            {{- message.content }}\n"
    "        {%- endif %}\n"
    "        {{- \"<|eot_id|>\" }}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n"
    "{%- endif %}\n";

/* ChatML as Qwen2-7B-Instruct writes it (a default system message when there is none). */
static const char kQwen2[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\n"
    "You are a helpful assistant.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";

/* Mistral-7B-Instruct-v0.1: user/assistant only, alternating; BOS once at the start. */
static const char kMistral[] =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token + ' ' }}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}";

/* Phi-3-mini-4k-instruct (the revision with system messages). */
static const char kPhi3[] =
    "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\\n' + message['content'] + "
    "'<|end|>\\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}"
    "{% elif message['role'] == 'assistant' %}{{'<|assistant|>\\n' + message['content'] + '<|end|>\\n'}}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}";

/* google/gemma-7b-it: no system role; the assistant is "model"; contents trimmed. */
static const char kGemma[] =
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
    "{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}"
    "{% endif %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}";

/* HuggingFaceH4/zephyr-7b-beta: written over several lines, with real newlines inside its string
 * literals, so it depends on trim_blocks and lstrip_blocks. */
static const char kZephyr[] =
    "{% for message in messages %}\n"
    "{% if message['role'] == 'user' %}\n"
    "{{ '<|user|>\n' + message['content'] + eos_token }}\n"
    "{% elif message['role'] == 'system' %}\n"
    "{{ '<|system|>\n' + message['content'] + eos_token }}\n"
    "{% elif message['role'] == 'assistant' %}\n"
    "{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n"
    "{% endif %}\n"
    "{% if loop.last and add_generation_prompt %}\n"
    "{{ '<|assistant|>' }}\n"
    "{% endif %}\n"
    "{% endfor %}";

/* ---- tests --------------------------------------------------------------------------------------- */

static void test_llama2(void **state) {
    (void)state;
    ember_model *m = load_model("<s>", "</s>", kLlama2);
    /* The system message goes into the first [INST] inside <<SYS>> markers; each user turn is
     * "<s>[INST] {content.strip()} [/INST]", each assistant turn " {content.strip()} </s>". The template
     * ignores add_generation_prompt: the text ends with [/INST] either way. */
    const char *want =
        "<s>[INST] <<SYS>>\nYou are a helpful assistant.\n<</SYS>>\n\nHello! [/INST] Hi! How can I help? </s>"
        "<s>[INST] Tell me a joke. [/INST]";
    expect_render(m, NULL, kConversation, 4, false, want);
    expect_render(m, NULL, kConversation, 4, true, want);
    /* Without a system message, and with the template passed explicitly and no model (bos/eos are ""). */
    expect_render(m, NULL, kNoSystem, 3, true, "<s>[INST] Hello! [/INST] Hi! How can I help? </s><s>[INST] Tell me a joke. [/INST]");
    expect_render(NULL, kLlama2, kNoSystem, 1, true, "[INST] Hello! [/INST]");
    /* Two user messages in a row: the template's own check refuses them. */
    const ember_chat_message twice[] = {{"user", "a"}, {"user", "b"}};
    expect_error(m, NULL, twice, 2, EMBER_ERR_INVALID_ARGUMENT,
                 "Conversation roles must alternate user/assistant/user/assistant/...");
    ember_model_free(m);
}

static void test_llama3(void **state) {
    (void)state;
    ember_model *m = load_model("<|begin_of_text|>", "<|end_of_text|>", kLlama3);
    /* Each message: "<|start_header_id|>{role}<|end_header_id|>\n\n{content | trim}<|eot_id|>", BOS before
     * the first; add_generation_prompt appends the assistant header. */
    const char *want =
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nHi! How can I help?<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nTell me a joke.<|eot_id|>";
    expect_render(m, NULL, kConversation, 4, false, want);
    char with_prompt[1024];
    snprintf(with_prompt, sizeof with_prompt, "%s<|start_header_id|>assistant<|end_header_id|>\n\n", want);
    expect_render(m, NULL, kConversation, 4, true, with_prompt);
    ember_model_free(m);
}

static void test_llama31(void **state) {
    (void)state;
    ember_model *m = load_model("<|begin_of_text|>", "<|eot_id|>", kLlama31);
    /* Every tag strips the whitespace before it ({%- {{- {#-), so the template's own newlines vanish. The
     * system header always comes first, with the knowledge and date lines, then the system message (its
     * content trimmed; `messages` loses it); tools is none, so no tool text; each other message as in
     * Llama-3 (content | trim); the assistant header as the generation prompt. */
    const char *want =
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
        "Today Date: 26 Jul 2024\n\nYou are a helpful assistant.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nHi! How can I help?<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nTell me a joke.<|eot_id|>";
    expect_render(m, NULL, kConversation, 4, false, want);
    char with_prompt[1024];
    snprintf(with_prompt, sizeof with_prompt, "%s<|start_header_id|>assistant<|end_header_id|>\n\n", want);
    expect_render(m, NULL, kConversation, 4, true, with_prompt);
    /* Without a system message the system block is still there, with nothing after the date. */
    expect_render(m, NULL, kNoSystem, 1, false,
                  "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
                  "Today Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>");
    ember_model_free(m);
}

static void test_chatml_qwen2(void **state) {
    (void)state;
    ember_model *m = load_model(NULL, "<|im_end|>", kQwen2);
    /* "<|im_start|>{role}\n{content}<|im_end|>\n" per message, contents as they are (no strip). */
    const char *want =
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n"
        "<|im_start|>assistant\nHi! How can I help?<|im_end|>\n<|im_start|>user\n Tell me a joke. <|im_end|>\n";
    expect_render(m, NULL, kConversation, 4, false, want);
    char with_prompt[1024];
    snprintf(with_prompt, sizeof with_prompt, "%s<|im_start|>assistant\n", want);
    expect_render(m, NULL, kConversation, 4, true, with_prompt);
    /* Without a system message the template writes its default one first. */
    expect_render(m, NULL, kNoSystem, 1, true,
                  "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n"
                  "<|im_start|>assistant\n");
    ember_model_free(m);
}

static void test_mistral(void **state) {
    (void)state;
    ember_model *m = load_model("<s>", "</s>", kMistral);
    /* BOS, then "[INST] {content} [/INST]" per user turn and "{content}</s> " per assistant turn; the
     * contents as they are (the last one keeps its spaces); no generation prompt of its own. */
    const char *want = "<s>[INST] Hello! [/INST]Hi! How can I help?</s> [INST]  Tell me a joke.  [/INST]";
    expect_render(m, NULL, kNoSystem, 3, false, want);
    expect_render(m, NULL, kNoSystem, 3, true, want);
    /* A system message first breaks the alternation check (role 0 is not "user"). */
    expect_error(m, NULL, kConversation, 4, EMBER_ERR_INVALID_ARGUMENT, "Conversation roles must alternate");
    ember_model_free(m);
}

static void test_phi3(void **state) {
    (void)state;
    ember_model *m = load_model("<s>", "<|endoftext|>", kPhi3);
    /* "<|{role}|>\n{content}<|end|>\n" per message; then "<|assistant|>\n" or, without the generation
     * prompt, the EOS text. */
    const char *body =
        "<|system|>\nYou are a helpful assistant.<|end|>\n<|user|>\nHello!<|end|>\n"
        "<|assistant|>\nHi! How can I help?<|end|>\n<|user|>\n Tell me a joke. <|end|>\n";
    char want[1024];
    snprintf(want, sizeof want, "%s<|endoftext|>", body);
    expect_render(m, NULL, kConversation, 4, false, want);
    snprintf(want, sizeof want, "%s<|assistant|>\n", body);
    expect_render(m, NULL, kConversation, 4, true, want);
    ember_model_free(m);
}

static void test_gemma(void **state) {
    (void)state;
    ember_model *m = load_model("<bos>", "<eos>", kGemma);
    /* BOS, then "<start_of_turn>{user|model}\n{content | trim}<end_of_turn>\n" per message. */
    const char *body =
        "<bos><start_of_turn>user\nHello!<end_of_turn>\n<start_of_turn>model\nHi! How can I help?<end_of_turn>\n"
        "<start_of_turn>user\nTell me a joke.<end_of_turn>\n";
    expect_render(m, NULL, kNoSystem, 3, false, body);
    char want[1024];
    snprintf(want, sizeof want, "%s<start_of_turn>model\n", body);
    expect_render(m, NULL, kNoSystem, 3, true, want);
    /* Gemma's template refuses a system message with its own message. */
    expect_error(m, NULL, kConversation, 4, EMBER_ERR_INVALID_ARGUMENT, "raise_exception: System role not supported");
    ember_model_free(m);
}

static void test_zephyr(void **state) {
    (void)state;
    ember_model *m = load_model("<s>", "</s>", kZephyr);
    /* Each tag line's newline goes (trim_blocks); each {{ }} line keeps its newline, so a message is
     * "<|{role}|>\n{content}</s>\n"; the generation prompt is "<|assistant|>\n" after the last one. */
    const char *body =
        "<|system|>\nYou are a helpful assistant.</s>\n<|user|>\nHello!</s>\n"
        "<|assistant|>\nHi! How can I help?</s>\n<|user|>\n Tell me a joke. </s>\n";
    expect_render(m, NULL, kConversation, 4, false, body);
    char want[1024];
    snprintf(want, sizeof want, "%s<|assistant|>\n", body);
    expect_render(m, NULL, kConversation, 4, true, want);
    ember_model_free(m);
}

static void test_chatml_fallback(void **state) {
    (void)state;
    /* No tokenizer.chat_template: the built-in ChatML template, which adds no system message. */
    ember_model *m = load_model("<s>", "</s>", NULL);
    expect_render(m, NULL, kNoSystem, 2, true,
                  "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\nHi! How can I help?<|im_end|>\n"
                  "<|im_start|>assistant\n");
    expect_render(m, NULL, kNoSystem, 1, false, "<|im_start|>user\nHello!<|im_end|>\n");
    expect_render(m, NULL, NULL, 0, true, "<|im_start|>assistant\n");
    /* An explicit template wins over the fallback; bos_token and eos_token come from the model. */
    expect_render(m, "{{ bos_token }}|{{ eos_token }}|{{ messages | length }}", kConversation, 4, true, "<s>|</s>|4");
    ember_model_free(m);
    /* An empty template in the file counts as none. */
    m = load_model(NULL, NULL, "");
    expect_render(m, NULL, kNoSystem, 1, false, "<|im_start|>user\nHello!<|im_end|>\n");
    expect_render(m, "[{{ bos_token }}][{{ eos_token }}]", NULL, 0, false, "[][]");
    ember_model_free(m);
}

static void test_errors(void **state) {
    (void)state;
    /* Outside the subset: EMBER_ERR_UNSUPPORTED naming the construct and line. */
    expect_error(NULL, "ok\n{% include 'other.jinja' %}", kConversation, 4, EMBER_ERR_UNSUPPORTED,
                 "line 2: the tag '{% include %}' is not supported");
    expect_error(NULL, "{{ messages | groupby('role') }}", kConversation, 4, EMBER_ERR_UNSUPPORTED, "filter 'groupby'");
    /* Syntax errors: EMBER_ERR_INVALID_ARGUMENT with line:column. */
    expect_error(NULL, "{% for m in messages %}\n{{ m.content }", kConversation, 4, EMBER_ERR_INVALID_ARGUMENT,
                 "syntax error at line 2:");
    expect_error(NULL, "{% if x %}never closed", kConversation, 4, EMBER_ERR_INVALID_ARGUMENT, "missing 'elif'");
    /* Runtime errors name the line. */
    expect_error(NULL, "\n\n{{ messages[0].content + 1 }}", kConversation, 4, EMBER_ERR_INVALID_ARGUMENT,
                 "template line 3: unsupported operand types for +: 'str' and 'int'");
    /* The model's template is not a string. */
    const char *path = write_model("<s>", "</s>", NULL, 1);
    ember_model *m = load_vocab(path);
    unlink(path);
    expect_error(m, NULL, kConversation, 4, EMBER_ERR_INVALID_MODEL, "tokenizer.chat_template");
    ember_model_free(m);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Renders `tmpl` with `msgs`; expects EMBER_ERR_INVALID_ARGUMENT naming `why` within `limit_s`. */
static void expect_stopped(const char *tmpl, const ember_chat_message *msgs, size_t n, const char *why, double limit_s) {
    size_t len = 0;
    const double t0 = now_s();
    const ember_status st = ember_chat_apply_template(NULL, tmpl, msgs, n, true, NULL, 0, &len);
    const double t = now_s() - t0;
    printf("stopped in %.3f s: %s\n", t, ember_last_error());
    assert_int_equal(st, EMBER_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ember_last_error(), why));
    assert_true(t < limit_s);
}

/* The budgets every render runs under (2 s, 256 MiB, 1 MiB of template): nested range(1000000) loops
 * ran 36 s, 200,000 messages 62 s, an 18 MB template peaked at 1.3 GiB; and '\ud800' put a surrogate,
 * invalid UTF-8, into the output. Each now stops with an error (the time limit allows some slack for
 * a loaded machine and sanitizer builds). */
static void test_budgets(void **state) {
    (void)state;
    expect_stopped("{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}", NULL, 0,
                   "ms", 4.0);
    const size_t n = 200000;
    ember_chat_message *msgs = malloc(n * sizeof *msgs);
    for (size_t i = 0; i < n; ++i) msgs[i] = (ember_chat_message){i % 2 ? "assistant" : "user", "hello there"};
    const double t0 = now_s();
    size_t len = 0;
    const ember_status st = ember_chat_apply_template(NULL,
        "{% for m in messages %}{{ loop.index ~ m['role'] ~ messages[loop.index0]['content'] }}{% endfor %}", msgs, n,
        true, NULL, 0, &len);
    printf("200000 messages: %s in %.3f s\n", ember_status_string(st), now_s() - t0);
    assert_true(st == EMBER_OK || st == EMBER_ERR_INVALID_ARGUMENT);
    assert_true(now_s() - t0 < 4.0);
    free(msgs);
    char *huge = malloc((18u << 20) + 1);
    memset(huge, 'x', 18u << 20);
    huge[18u << 20] = 0;
    expect_stopped(huge, NULL, 0, "over the limit", 1.0);
    free(huge);
    /* The time budget is the process's to change. */
    setenv("EMBER_CHAT_TIME_LIMIT_MS", "200", 1);
    expect_stopped("{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}", NULL, 0,
                   "200 ms", 1.5);
    unsetenv("EMBER_CHAT_TIME_LIMIT_MS");
    expect_stopped("{{ '\\ud800' }}", NULL, 0, "surrogate", 1.0);
    expect_stopped("{{ \"\\udfff\" }}", NULL, 0, "surrogate", 1.0);
}

static void test_buffer_and_nulls(void **state) {
    (void)state;
    const char *tmpl = "{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}";
    const char *want = "user:Hello!;assistant:Hi! How can I help?;";
    size_t len = 0;
    assert_int_equal(ember_chat_apply_template(NULL, tmpl, kNoSystem, 2, false, NULL, 0, &len), EMBER_OK);
    assert_int_equal(len, strlen(want));
    char buf[128];
    memset(buf, 'X', sizeof buf);
    /* Exactly the length is too small: the NUL needs one more byte. The size is still reported. */
    len = 0;
    assert_int_equal(ember_chat_apply_template(NULL, tmpl, kNoSystem, 2, false, buf, strlen(want), &len),
                     EMBER_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(len, strlen(want));
    assert_non_null(strstr(ember_last_error(), "too small"));
    assert_int_equal(ember_chat_apply_template(NULL, tmpl, kNoSystem, 2, false, buf, strlen(want) + 1, &len), EMBER_OK);
    assert_string_equal(buf, want);

    assert_int_equal(ember_chat_apply_template(NULL, tmpl, kNoSystem, 2, false, buf, sizeof buf, NULL),
                     EMBER_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ember_last_error(), "out_len"));
    assert_int_equal(ember_chat_apply_template(NULL, NULL, kNoSystem, 2, false, buf, sizeof buf, &len),
                     EMBER_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ember_last_error(), "model"));
    assert_int_equal(ember_chat_apply_template(NULL, tmpl, NULL, 2, false, buf, sizeof buf, &len),
                     EMBER_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ember_last_error(), "messages"));
    assert_int_equal(ember_chat_apply_template(NULL, tmpl, kNoSystem, 2, false, NULL, 10, &len),
                     EMBER_ERR_INVALID_ARGUMENT);
    const ember_chat_message bad_role[] = {{NULL, "x"}};
    assert_int_equal(ember_chat_apply_template(NULL, tmpl, bad_role, 1, false, buf, sizeof buf, &len),
                     EMBER_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ember_last_error(), "messages[0].role"));
    const ember_chat_message bad_content[] = {{"user", "x"}, {"user", NULL}};
    assert_int_equal(ember_chat_apply_template(NULL, tmpl, bad_content, 2, false, buf, sizeof buf, &len),
                     EMBER_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ember_last_error(), "messages[1].content"));
    /* Zero messages is a valid conversation. */
    assert_int_equal(ember_chat_apply_template(NULL, tmpl, NULL, 0, false, buf, sizeof buf, &len), EMBER_OK);
    assert_string_equal(buf, "");
}

/* One model, several threads rendering at once: each render keeps its state to itself. */
typedef struct {
    const ember_model *model;
    const char *want;
    int mismatches;
} render_job;

static void *render_many(void *arg) {
    render_job *job = arg;
    char buf[2048];
    for (int i = 0; i < 200; ++i) {
        size_t len = 0;
        if (ember_chat_apply_template(job->model, NULL, kConversation, 4, true, buf, sizeof buf, &len) != EMBER_OK ||
            strcmp(buf, job->want) != 0)
            ++job->mismatches;
    }
    return NULL;
}

static void test_threads(void **state) {
    (void)state;
    ember_model *m = load_model("<|begin_of_text|>", "<|eot_id|>", kLlama31);
    char *want = apply(m, NULL, kConversation, 4, true);
    pthread_t threads[4];
    render_job jobs[4];
    for (int t = 0; t < 4; ++t) {
        jobs[t] = (render_job){m, want, 0};
        assert_int_equal(pthread_create(&threads[t], NULL, render_many, &jobs[t]), 0);
    }
    for (int t = 0; t < 4; ++t) {
        pthread_join(threads[t], NULL);
        assert_int_equal(jobs[t].mismatches, 0);
    }
    free(want);
    ember_model_free(m);
}

/* The rendered text tokenized as the header says: PARSE_SPECIAL turns the template's "<s>" into BOS, and
 * ADD_SPECIAL would put a second BOS before it. Needs the real Llama-2 vocabulary. */
static void test_tokenize_result(void **state) {
    (void)state;
    ember_model *m = load_shared_vocab("ggml-vocab/ggml-vocab-llama-spm.gguf");
    char *text = apply(m, kLlama2, kConversation, 4, true);
    const ember_token bos = ember_token_bos(m), eos = ember_token_eos(m);
    ember_token toks[256];
    size_t n = 0;
    assert_int_equal(ember_tokenize(m, text, strlen(text), EMBER_TOKENIZE_PARSE_SPECIAL, toks, 256, &n), EMBER_OK);
    size_t n_bos = 0, n_eos = 0;
    for (size_t i = 0; i < n; ++i) {
        n_bos += toks[i] == bos;
        n_eos += toks[i] == eos;
    }
    assert_int_equal(toks[0], bos);
    assert_int_equal(n_bos, 2); /* one per user turn */
    assert_int_equal(n_eos, 1); /* after the assistant's turn */
    /* "<s>[INST]": after BOS the text starts with the SentencePiece space mark, "▁[" (as transformers). */
    char piece[32];
    size_t len = 0;
    assert_int_equal(ember_token_to_piece(m, toks[1], 0, piece, sizeof piece - 1, &len), EMBER_OK);
    piece[len] = '\0';
    assert_string_equal(piece, " [");
    size_t n2 = 0;
    assert_int_equal(ember_tokenize(m, text, strlen(text), EMBER_TOKENIZE_PARSE_SPECIAL | EMBER_TOKENIZE_ADD_SPECIAL,
                                    toks, 256, &n2),
                     EMBER_OK);
    assert_int_equal(n2, n + 1);
    assert_int_equal(toks[0], bos);
    assert_int_equal(toks[1], bos);
    free(text);
    ember_model_free(m);
}

/* The templates that ship in the shared vocab files render as their text says. */
static void test_shared_vocab_templates(void **state) {
    (void)state;
    ember_model *m = load_shared_vocab("ggml-vocab/ggml-vocab-phi-3.gguf");
    /* This Phi-3 template: BOS, then "<|user|>\n{content}<|end|>\n<|assistant|>\n" per user turn and
     * "{content}<|end|>\n" per assistant turn; system messages are dropped; no add_generation_prompt. */
    expect_render(m, NULL, kConversation, 4, true,
                  "<s><|user|>\nHello!<|end|>\n<|assistant|>\nHi! How can I help?<|end|>\n"
                  "<|user|>\n Tell me a joke. <|end|>\n<|assistant|>\n");
    ember_model_free(m);

    const char *qwen2 = test_shared_model("ggml-vocab/ggml-vocab-qwen2.gguf");
    if (!qwen2) return;
    m = load_vocab(qwen2);
    /* Qwen2's template as that file has it (its default system message has no final period). */
    expect_render(m, NULL, kNoSystem, 1, true,
                  "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n"
                  "<|im_start|>assistant\n");
    ember_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama2),
        cmocka_unit_test(test_llama3),
        cmocka_unit_test(test_llama31),
        cmocka_unit_test(test_chatml_qwen2),
        cmocka_unit_test(test_mistral),
        cmocka_unit_test(test_phi3),
        cmocka_unit_test(test_gemma),
        cmocka_unit_test(test_zephyr),
        cmocka_unit_test(test_chatml_fallback),
        cmocka_unit_test(test_budgets),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_buffer_and_nulls),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_tokenize_result),
        cmocka_unit_test(test_shared_vocab_templates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
