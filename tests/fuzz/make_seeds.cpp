// make_seeds.cpp — writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/). Run it
// only to regenerate them (tools/fuzz.sh --make-seeds); the seeds are committed.
//
// gguf:          tiny models written with our GGUF writer: llama with a SentencePiece vocabulary (F32,
//                tied output), qwen2 with a byte-level BPE vocabulary and Q/K/V biases (F16), llama with
//                Q8_0 weights, a vocab-only file of an unknown architecture, an empty version-2 file.
// session_state: real states of models/stories260K.gguf (f16 and Q8_0 caches, with and without logits,
//                empty), each behind the mode byte fuzz_session_state.cpp reads (0x03: repair checksum
//                and fingerprint).
// tokenizer:     texts behind a selector byte (vocabulary and flags, see fuzz_tokenizer.cpp).
// chat_template: templates using each part of the Jinja subset, each with a conversation.
// gbnf:          grammars using each part of GBNF; json_schema: schemas using each supported keyword;
// tool_parser:   replies of each tool-call format.
#include "chat/chat_template.hpp"
#include "core/dtype.hpp"
#include "core/fp16.hpp"
#include "gguf/gguf.hpp"
#include "testing/spm_vocab.hpp"
#include "../structured_cases.hpp"

#include <ember/ember.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace ember;

namespace {

std::string g_out;

void write_file(const std::string &name, const void *data, size_t size) {
    const std::string path = g_out + "/" + name;
    FILE *f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0) {
        std::fprintf(stderr, "make_seeds: cannot write %s\n", path.c_str());
        std::exit(1);
    }
    std::printf("%s (%zu bytes)\n", path.c_str(), size);
}

// Deterministic weights in [-0.5, 0.5).
float next_weight(uint64_t &s) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>((s >> 40) & 0xFFFF) / 65536.0f - 0.5f;
}

// A matrix of n_out rows of n_in values in `type` (F32, F16 or Q8_0), or a vector when n_out == 0.
void add_weight(gguf::Writer &w, const std::string &name, DType type, int64_t n_in, int64_t n_out, uint64_t &seed) {
    const int64_t rows = n_out ? n_out : 1;
    std::vector<float> v(static_cast<size_t>(n_in * rows));
    for (float &x : v) x = next_weight(seed);
    std::vector<int64_t> dims = n_out ? std::vector<int64_t>{n_in, n_out} : std::vector<int64_t>{n_in};
    if (type == DType::F32 || !n_out) {
        if (!n_out) for (float &x : v) x += 1.0f;   // norm weights around 1
        w.add_tensor(name, DType::F32, dims, v.data(), v.size() * sizeof(float));
    } else if (type == DType::F16) {
        std::vector<uint16_t> h(v.size());
        for (size_t i = 0; i < v.size(); ++i) h[i] = fp32_to_fp16(v[i]);
        w.add_tensor(name, DType::F16, dims, h.data(), h.size() * 2);
    } else {  // Q8_0: blocks of 32 values, an f16 scale and 32 int8
        std::vector<uint8_t> q;
        for (size_t b = 0; b < v.size(); b += 32) {
            float amax = 0;
            for (size_t i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(v[b + i]));
            const float d = amax / 127.0f;
            const uint16_t dh = fp32_to_fp16(d);
            q.push_back(static_cast<uint8_t>(dh & 0xFF));
            q.push_back(static_cast<uint8_t>(dh >> 8));
            for (size_t i = 0; i < 32; ++i)
                q.push_back(static_cast<uint8_t>(static_cast<int8_t>(d ? std::lround(v[b + i] / d) : 0)));
        }
        w.add_tensor(name, DType::Q8_0, dims, q.data(), q.size());
    }
}

struct Shape {
    const char *arch;
    uint32_t n_embd, n_head, n_head_kv, n_ff, n_layer;
    DType type;
    bool bias, tied;
};

void add_decoder(gguf::Writer &w, const Shape &s, uint32_t n_vocab) {
    const std::string a = std::string(s.arch) + ".";
    w.add_string("general.architecture", s.arch);
    w.add_string("general.name", std::string("fuzz seed ") + s.arch);
    w.add_u32(a + "context_length", 64);
    w.add_u32(a + "embedding_length", s.n_embd);
    w.add_u32(a + "block_count", s.n_layer);
    w.add_u32(a + "feed_forward_length", s.n_ff);
    w.add_u32(a + "attention.head_count", s.n_head);
    w.add_u32(a + "attention.head_count_kv", s.n_head_kv);
    w.add_f32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
    w.add_f32(a + "rope.freq_base", 10000.0f);
    uint64_t seed = 7;
    const int64_t hd = s.n_embd / s.n_head, nq = s.n_embd, nkv = hd * s.n_head_kv;
    add_weight(w, "token_embd.weight", s.type, s.n_embd, n_vocab, seed);
    add_weight(w, "output_norm.weight", DType::F32, s.n_embd, 0, seed);
    if (!s.tied) add_weight(w, "output.weight", s.type, s.n_embd, n_vocab, seed);
    for (uint32_t l = 0; l < s.n_layer; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        add_weight(w, p + "attn_norm.weight", DType::F32, s.n_embd, 0, seed);
        add_weight(w, p + "attn_q.weight", s.type, s.n_embd, nq, seed);
        add_weight(w, p + "attn_k.weight", s.type, s.n_embd, nkv, seed);
        add_weight(w, p + "attn_v.weight", s.type, s.n_embd, nkv, seed);
        add_weight(w, p + "attn_output.weight", s.type, nq, s.n_embd, seed);
        if (s.bias) {
            add_weight(w, p + "attn_q.bias", DType::F32, nq, 0, seed);
            add_weight(w, p + "attn_k.bias", DType::F32, nkv, 0, seed);
            add_weight(w, p + "attn_v.bias", DType::F32, nkv, 0, seed);
        }
        add_weight(w, p + "ffn_norm.weight", DType::F32, s.n_embd, 0, seed);
        add_weight(w, p + "ffn_gate.weight", s.type, s.n_embd, s.n_ff, seed);
        add_weight(w, p + "ffn_up.weight", s.type, s.n_embd, s.n_ff, seed);
        add_weight(w, p + "ffn_down.weight", s.type, s.n_ff, s.n_embd, seed);
    }
}

// SentencePiece: <unk> <s> </s>, the 256 byte tokens (these scoring 0), a few pieces.
uint32_t add_spm_vocab(gguf::Writer &w) {
    SpmVocab v;
    v.add_byte_tokens();
    const size_t first_piece = v.tokens.size();
    for (const char *p : {"\xe2\x96\x81", "\xe2\x96\x81the", "\xe2\x96\x81" "a", "on", "ce", "\xe2\x96\x81up", "ti", "me"}) v.add(p);
    v.write(w, first_piece);
    return static_cast<uint32_t>(v.tokens.size());
}

// Byte-level BPE: the 256 byte characters of GPT-2's mapping, some merges, two control tokens.
uint32_t add_bpe_vocab(gguf::Writer &w, const char *pre) {
    std::vector<std::string> toks;
    std::vector<int32_t> types;
    auto utf8 = [](uint32_t cp) {
        std::string s;
        if (cp < 0x80) s += static_cast<char>(cp);
        else {
            s += static_cast<char>(0xC0 | (cp >> 6));
            s += static_cast<char>(0x80 | (cp & 0x3F));
        }
        return s;
    };
    // GPT-2's bytes_to_unicode: printable bytes map to themselves, the others to 256 + n.
    uint32_t extra = 0;
    for (int b = 0; b < 256; ++b) {
        const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        toks.push_back(utf8(printable ? static_cast<uint32_t>(b) : 256 + extra++));
        types.push_back(1);
    }
    const std::vector<std::string> merges = {"\xc4\xa0 t", "h e", "\xc4\xa0t he", "i n", "o n", "\xc4\xa0 a"};
    for (const char *t : {"\xc4\xa0t", "he", "\xc4\xa0the", "in", "on", "\xc4\xa0" "a"}) {
        toks.push_back(t);
        types.push_back(1);
    }
    toks.push_back("<|endoftext|>");
    types.push_back(3);
    toks.push_back("<|im_start|>");
    types.push_back(3);
    w.add_string("tokenizer.ggml.model", "gpt2");
    w.add_string("tokenizer.ggml.pre", pre);
    w.add_array_string("tokenizer.ggml.tokens", toks);
    w.add_array_i32("tokenizer.ggml.token_type", types);
    w.add_array_string("tokenizer.ggml.merges", merges);
    w.add_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(toks.size() - 2));
    return static_cast<uint32_t>(toks.size());
}

void gguf_seeds() {
    {
        gguf::Writer w;
        const uint32_t nv = add_spm_vocab(w);
        add_decoder(w, {"llama", 8, 2, 1, 16, 1, DType::F32, false, true}, nv);
        const std::vector<uint8_t> b = w.to_bytes();
        write_file("llama-spm-f32.gguf", b.data(), b.size());
    }
    {
        gguf::Writer w;
        const uint32_t nv = add_bpe_vocab(w, "qwen2");
        add_decoder(w, {"qwen2", 8, 2, 2, 8, 1, DType::F16, true, false}, nv);
        const std::vector<uint8_t> b = w.to_bytes();
        write_file("qwen2-bpe-f16.gguf", b.data(), b.size());
    }
    {
        gguf::Writer w;
        const uint32_t nv = add_spm_vocab(w);
        add_decoder(w, {"llama", 32, 4, 2, 32, 1, DType::Q8_0, false, true}, nv);
        const std::vector<uint8_t> b = w.to_bytes();
        write_file("llama-spm-q8_0.gguf", b.data(), b.size());
    }
    {
        gguf::Writer w;
        w.set_version(2);
        w.add_string("general.architecture", "mamba");
        add_bpe_vocab(w, "llama-bpe");
        w.add_bool("tokenizer.ggml.add_bos_token", true);
        const std::vector<uint8_t> b = w.to_bytes();
        write_file("vocab-only-bpe-v2.gguf", b.data(), b.size());
    }
    {
        gguf::Writer w;
        w.set_version(2);
        const std::vector<uint8_t> b = w.to_bytes();
        write_file("empty-v2.gguf", b.data(), b.size());
    }
}

void state_seed(const std::string &name, const ember_session *s) {
    size_t len = 0;
    ember_session_save(s, nullptr, 0, &len);
    std::vector<uint8_t> bytes(len + 1);
    bytes[0] = 0x03;  // repair checksum and fingerprint
    ember_session_save(s, bytes.data() + 1, len, &len);
    write_file(name, bytes.data(), bytes.size());
}

void session_seeds(const char *model_path) {
    ember_model *m = nullptr;
    if (ember_model_load(model_path, nullptr, &m) != EMBER_OK) {
        std::fprintf(stderr, "make_seeds: %s\n", ember_last_error());
        std::exit(1);
    }
    for (int q8 = 0; q8 < 2; ++q8) {
        ember_session_params sp;
        ember_session_params_init(&sp);
        sp.n_ctx = 64;
        sp.n_threads = 1;
        sp.kv_type = q8 ? EMBER_KV_Q8_0 : EMBER_KV_F16;
        ember_session *s = nullptr;
        ember_session_create(m, &sp, &s);
        const std::string kind = q8 ? "q8_0" : "f16";
        state_seed("empty-" + kind + ".state", s);
        const ember_token prompt[3] = {1, 403, 407};
        ember_session_feed(s, prompt, 3);
        state_seed("three-tokens-" + kind + ".state", s);
        ember_session_truncate(s, 2);
        state_seed("two-tokens-no-logits-" + kind + ".state", s);
        ember_session_free(s);
    }
    ember_model_free(m);
}

void tokenizer_seeds() {
    const struct {
        const char *name;
        unsigned char selector;
        const char *text;
    } texts[] = {
        {"spm-plain", 0x00, "Once upon a time, there was a little girl named Lily."},
        {"spm-special", 0x30, "<s>Hello</s> world <unk> \n\n  spaces  "},
        {"bpe-gpt2", 0x01, "Hello world! It's 2024, isn't it? 12345 \xf0\x9f\x98\x80"},
        {"bpe-llama3", 0x32, "<|begin_of_text|>The quick brown fox\r\n\tjumps \xe4\xbd\xa0\xe5\xa5\xbd"},
        {"bpe-qwen2", 0x33, "<|im_start|>user\nWhat's 3+4?<|im_end|>\n   trailing"},
        {"invalid-utf8", 0xC0, "\xff\xfe\xc3\x28 \xe2\x82 \xf0\x9f\x98 \xed\xa0\x80 ok"},
        {"empty", 0x10, ""},
    };
    for (const auto &t : texts) {
        std::string bytes(1, static_cast<char>(t.selector));
        bytes += t.text;
        write_file(std::string(t.name) + ".txt", bytes.data(), bytes.size());
    }
}


// Templates that use each part of the Jinja subset (docs/chat.md), each with a short conversation; the
// input format is fuzz_chat_template.cpp's: template, NUL, flags byte, messages.
void chat_template_seeds() {
    const std::string conversation = std::string("\x01", 1) + "system\x1fYou are terse.\x1euser\x1fHi!\x1e"
                                     "assistant\x1fHello.\x1euser\x1f  Why?  ";
    const struct {
        const char *name;
        std::string tmpl;
    } seeds[] = {
        {"chatml", chat::kChatmlTemplate},
        {"alternating",
         "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set sys = messages[0]['content'] %}"
         "{% set msgs = messages[1:] %}{% else %}{% set sys = false %}{% set msgs = messages %}{% endif %}"
         "{% for m in msgs %}{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
         "{{ raise_exception('roles must alternate user/assistant') }}{% endif %}"
         "{%- if m['role'] == 'user' -%}[INST] {% if loop.first and sys %}<<SYS>>\n{{ sys }}\n<</SYS>>\n\n{% endif %}"
         "{{ m['content'] | trim }} [/INST]{%- else %} {{ m['content'] | trim }} {{ eos_token }}{% endif %}{% endfor %}"},
        {"namespace-filters",
         "{%- set ns = namespace(found=false, n=0) -%}{%- for m in messages if m.role != 'system' -%}"
         "{%- set ns.n = ns.n + 1 -%}{%- if 'Why' in m.content %}{% set ns.found = true %}{% endif -%}"
         "<{{ m.role | upper }}:{{ loop.index }}/{{ loop.length }}>{{ m.content.strip() | replace('!', '.') }}"
         "{{ '|' if not loop.last else '' }}{%- endfor -%}{{ ns.n ~ (' found' if ns.found else ' none') }}"
         "{{ messages | map(attribute='role') | join(',') }}{{ messages | length }}{{ 'abc'[::-1] }}"},
        {"macro-dict",
         "{% macro turn(role, text) %}<|{{ role }}|>\n{{ text | default('empty', true) }}<|end|>\n{% endmacro %}"
         "{% set names = {'user': 'U', 'assistant': 'A', 'system': 'S'} %}{% for k, v in names.items() %}{{ k }}={{ v }};"
         "{% endfor %}{% for m in messages %}{{ turn(names.get(m.role, '?'), m.content) }}{% else %}none{% endfor %}"
         "{% if add_generation_prompt %}<|A|>\n{% endif %}{{ messages | tojson }}"},
        {"tests-and-math",
         "{# a comment #}{% for i in range(3) %}{{ i * 2 + 1 // 1 - 10 % 3 }}{% if i is even %}e{% endif %}{% endfor %}"
         "{{ tools is none }}{{ undefined_name is defined }}{{ messages[-1]['content'].split('?') | first }}"
         "{{ [1, 2, 3] | last }}{{ 'x' if messages | selectattr('role', 'equalto', 'user') | list | length > 1 else 'y' }}"
         "{{ '%s' | format('f') if false else messages[0].content.title() }}"},
    };
    for (const auto &sd : seeds) {
        std::string bytes = sd.tmpl;
        bytes.push_back('\0');
        bytes += conversation;
        write_file(std::string(sd.name) + ".bin", bytes.data(), bytes.size());
    }
}
// Grammars using each part of GBNF (fuzz_gbnf.cpp: the text is the input).
void gbnf_seeds() {
    const struct { const char *name, *text; } seeds[] = {
        {"digits", "root ::= [0-9]{1,3} (\",\" [0-9]+)*\n"},
        {"yes-no", "root ::= (\"yes\" | \"no\") \"\\n\"?   # a comment\n"},
        {"json", "root ::= value\nvalue ::= object | array | string | \"true\" | \"null\" | [0-9]+\n"
                 "object ::= \"{\" ( string \":\" value ( \",\" string \":\" value )* )? \"}\"\n"
                 "array ::= \"[\" ( value ( \",\" value )* )? \"]\"\n"
                 "string ::= \"\\\"\" [^\"\\\\\\x00-\\x1f]* \"\\\"\"\n"},
        {"unicode", "root ::= [\\u00e9-\\u00ff✓]+ [^a-z]? \"😀\"{2} .\n"},
        {"nested", "root ::= \"(\" (root | [a-c]) \")\" | \"x\"\n"},
        {"multiline", "root ::= (\n  \"a\"\n  \"b\"\n) |\n  \"c\" [\\x41-\\x5A]{2,}\n"},
    };
    for (const auto &sd : seeds) write_file(std::string(sd.name) + ".gbnf", sd.text, std::strlen(sd.text));
}

// JSON Schemas using each supported keyword (fuzz_json_schema.cpp: the schema is the input).
void json_schema_seeds() {
    for (const auto &c : structured_cases::kSchemas) write_file(std::string(c.name) + ".json", c.schema, std::strlen(c.schema));
    const struct { const char *name, *text; } more[] = {
        {"pattern", R"({"type":"string","pattern":"^[A-Z][a-z]+(-[0-9]{2,4})?\\d*\\.?(?:x|y)$"})"},
        {"bounds", R"({"type":"object","properties":{"n":{"type":"number","minimum":0,"exclusiveMaximum":10},"i":{"type":"integer","minimum":-5}}})"},
        {"any", R"({"$schema":"https://json-schema.org/draft/2020-12/schema","title":"any","description":"x"})"},
        {"required-only", R"({"required":["a","b"],"properties":{"b":{"const":[1,{"c":null}]}}})"},
    };
    for (const auto &sd : more) write_file(std::string(sd.name) + ".json", sd.text, std::strlen(sd.text));
}

// Replies of each family (fuzz_tool_parser.cpp: a format byte, a piece-size byte, the text).
void tool_parser_seeds() {
    const struct { const char *name; char format; const char *text; } seeds[] = {
        {"hermes", 2, "<think>\nWhich door?\n</think>\n\nOpening.\n<tool_call>\n{\"name\": \"open_door\", \"arguments\": "
                      "{\"door\": \"north\"}}\n</tool_call>"},
        {"hermes-xml", 2, "<tool_call>\n<function=walk>\n<parameter=x>\n3\n</parameter>\n</function>\n</tool_call>"},
        {"hermes-broken", 2, "Hm <tool_call>{\"name\": open}</tool_call> and <tool_cal"},
        {"llama3", 3, "{\"name\": \"say\", \"parameters\": {\"text\": \"hi\"}}"},
        {"llama3-tag", 3, "<|python_tag|>{\"name\": \"say\", \"parameters\": {}}"},
        {"mistral", 4, "[TOOL_CALLS][{\"name\": \"say\", \"arguments\": {\"text\": \"a\"}, \"id\": \"abc123XYZ\"}]"},
        {"mistral-args", 4, "[TOOL_CALLS]say[ARGS]{\"text\": \"b\"}[TOOL_CALLS]walk[CALL_ID]x[ARGS]{}"},
        {"gpt-oss", 5, "<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>commentary "
                       "to=functions.say <|constrain|>json<|message|>{\"text\":\"c\"}<|call|>"},
        {"gpt-oss-final", 5, "<|channel|>final<|message|>Done.<|return|>"},
        {"granite", 6, "<|tool_call|>[{\"name\": \"say\", \"arguments\": {}}]"},
        {"phi4", 7, "Sure.<|tool_call|>[{\"name\": \"say\", \"arguments\": {}}]<|/tool_call|>"},
    };
    for (const auto &sd : seeds) {
        std::string bytes(1, static_cast<char>(sd.format - 1));
        bytes.push_back(static_cast<char>(std::strlen(sd.name)));   // pieces of a few bytes
        bytes += sd.text;
        write_file(std::string(sd.name) + ".txt", bytes.data(), bytes.size());
    }
}
} // namespace

int main(int argc, char **argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: make_seeds gguf|session_state|tokenizer|chat_template|gbnf|json_schema|tool_parser OUT_DIR MODEL(stories260K.gguf)\n");
        return 2;
    }
    g_out = argv[2];
    const std::string what = argv[1];
    if (what == "gguf") gguf_seeds();
    else if (what == "session_state") session_seeds(argv[3]);
    else if (what == "tokenizer") tokenizer_seeds();
    else if (what == "chat_template") chat_template_seeds();
    else if (what == "gbnf") gbnf_seeds();
    else if (what == "json_schema") json_schema_seeds();
    else if (what == "tool_parser") tool_parser_seeds();
    else return 2;
    return 0;
}
