// test_tokenizer_pre.cpp — every pre-tokenizer name against llama.cpp's token ids, on vocabularies written
// from the ones in ../shared/models/ggml-vocab (tokenizer.ggml.pre rewritten, or SentencePiece the way
// Gemma's is: no space prefix, user-defined and control tokens added).
//
// llama.cpp's ids for tests/data/tokenizer_pre/texts.txt (hard cases written by hand) and texts_random.txt
// (bench/tokenizer_random_texts.py) are stored beside them (<variant>[.special|.random].out), made by
// bench/tokenizer_peer.mjs from the files `test_tokenizer_pre --write DIR` writes, so CI needs no peer.
// Also: each family's splitting on hand-worked examples, and the name table itself (no data needed).
// Every other header comes before cmocka's, whose fail() macro clashes with ember::fail.
#include "core/error.hpp"
#include "core/mapped_file.hpp"
#include "gguf/gguf.hpp"
#include "tokenizer/pretokenize.hpp"
#include "tokenizer/tokenizer.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"
#include "tokenizer_test_data.hpp"

using namespace ember;
using namespace tokenizer_test;

namespace {

// ---- the vocabularies ----------------------------------------------------------------------------------

// Tokens appended to a vocabulary, with their GGUF token type.
struct ExtraToken {
    const char *text;
    TokenType type;
};
using ExtraTokens = std::span<const ExtraToken>;

// User-defined tokens (cut out of any text, as Gemma's HTML tags and tab runs are) and control ones
// (only with parse_special), with overlapping texts.
constexpr ExtraToken kHtmlTokens[] = {
    {"<h1>", TokenType::USER_DEFINED},          {"</h1>", TokenType::USER_DEFINED},
    {"<h1", TokenType::USER_DEFINED},           {"\t\t", TokenType::USER_DEFINED},
    {"<start_of_turn>", TokenType::CONTROL},    {"<end_of_turn>", TokenType::CONTROL},
};
// gpt-oss's chat format (o200k_harmony), as its GGUFs type them.
constexpr ExtraToken kHarmonyTokens[] = {
    {"<|start|>", TokenType::CONTROL},   {"<|end|>", TokenType::CONTROL},       {"<|message|>", TokenType::CONTROL},
    {"<|channel|>", TokenType::CONTROL}, {"<|constrain|>", TokenType::CONTROL}, {"<|return|>", TokenType::CONTROL},
    {"<|call|>", TokenType::CONTROL},
};

// Texts llama.cpp may treat as end-of-generation or fill-in-the-middle tokens whatever their type, added
// as user-defined tokens (where the base lacks them): which ones it turns into control tokens (then not
// cut out of plain text) and which end generation is read off its ids and its "# eog" line.
constexpr ExtraToken kProbeTokens[] = {
    {"<|eot_id|>", TokenType::USER_DEFINED},       {"<|im_end|>", TokenType::USER_DEFINED},
    {"<|end|>", TokenType::USER_DEFINED},          {"<|return|>", TokenType::USER_DEFINED},
    {"<|call|>", TokenType::USER_DEFINED},         {"<|flush|>", TokenType::USER_DEFINED},
    {"<|calls|>", TokenType::USER_DEFINED},        {"<end_of_turn>", TokenType::USER_DEFINED},
    {"<|eom_id|>", TokenType::USER_DEFINED},       {"<EOT>", TokenType::USER_DEFINED},
    {"_<EOT>", TokenType::USER_DEFINED},           {"<|end_of_text|>", TokenType::USER_DEFINED},
    {"<end_of_utterance>", TokenType::USER_DEFINED}, {"</s>", TokenType::USER_DEFINED},
    {"<eos>", TokenType::USER_DEFINED},            {"<|END_OF_TURN_TOKEN|>", TokenType::USER_DEFINED},
    {"<|im_start|>", TokenType::USER_DEFINED},     {"<unused0>", TokenType::USER_DEFINED},
    {"<|fim_prefix|>", TokenType::USER_DEFINED},   {"<|fim_suffix|>", TokenType::USER_DEFINED},
    {"<|fim_middle|>", TokenType::USER_DEFINED},   {"<|fim_pad|>", TokenType::USER_DEFINED},
    {"<|repo_name|>", TokenType::USER_DEFINED},    {"<|file_sep|>", TokenType::USER_DEFINED},
    {"<turn|>", TokenType::USER_DEFINED},          {"<|tool_response>", TokenType::USER_DEFINED},
};

// A vocabulary file made from ggml-vocab-<base>.gguf.
struct Variant {
    std::string name;   // file stem: "<pre>.<base>", or a name of its own for those with added tokens
    std::string base;
    std::string pre;    // written as tokenizer.ggml.pre; "" keeps the base's
    ExtraTokens extra = {};           // appended to the vocabulary
    bool no_space_prefix = false;     // tokenizer.ggml.add_space_prefix = false (Gemma)
    std::string general_name;         // written as general.name when not empty
    int64_t eot_id = -1;              // written as tokenizer.ggml.eot_token_id when >= 0
    bool random_texts = false;        // also compared on texts_random.txt (<name>.random.out)
    // tokenizer.ggml.model = "gemma4" on a SentencePiece base: merges made from its vocabulary (see
    // spm_merges), tokenizer.ggml.add_bos_token = false (which Gemma 4 overrides)
    bool gemma4 = false;
};

// Every name on the Llama 3 vocabulary (128k tokens, merges for code and many scripts); the first name
// of each family also on GPT-2's (a different merge list); SentencePiece as Llama 2 and as Gemma have it.
std::vector<Variant> variants() {
    std::vector<Variant> v;
    auto add = [&](std::string name, std::string base, std::string pre, ExtraTokens extra = {}) -> Variant & {
        Variant var;
        var.name = std::move(name);
        var.base = std::move(base);
        var.pre = std::move(pre);
        var.extra = extra;
        return v.emplace_back(std::move(var));
    };
    std::set<int> kinds_seen;
    for (const tok::PreTokenizerSpec &s : tok::pre_tokenizer_specs()) {
        if (s.spm_style) continue;   // needs a "▁" vocabulary: the gemma4 variant below
        const bool first_of_kind = kinds_seen.insert(int(s.kind)).second;
        add(std::string(s.name) + ".llama-bpe", "llama-bpe", s.name).random_texts = first_of_kind;
        if (first_of_kind) add(std::string(s.name) + ".gpt-2", "gpt-2", s.name);
    }
    add("qwen2-extra.qwen2", "qwen2", "qwen2", kHtmlTokens);
    // Qwen3.5's pre-tokenizer on the vocabulary of its family (its own is not at hand: Qwen2's merges).
    add("qwen35.qwen2", "qwen2", "qwen35").random_texts = true;
    // With its end of turn named: otherwise llama.cpp takes the first token with an end-of-turn text it
    // meets in a hash map (here "<|end|>", or "<|im_end|>"), and "<|end|>" ends generation or not by chance.
    add("harmony.qwen2", "qwen2", "gpt-4o", kHarmonyTokens).eot_id = 151645;
    add("probe.gpt-2", "gpt-2", "gpt-2", kProbeTokens);
    add("spm-extra.llama-spm", "llama-spm", "", kHtmlTokens);
    Variant &gemma = add("spm-gemma.llama-spm", "llama-spm", "", kHtmlTokens);
    gemma.no_space_prefix = true;
    gemma.random_texts = true;
    // Gemma 4's BPE over "▁"-escaped text, on Llama 2's vocabulary (its own is not at hand).
    Variant &gemma4 = add("gemma4.llama-spm", "llama-spm", "");
    gemma4.gemma4 = true;
    gemma4.random_texts = true;
    // Phi-3's own file (its general.name makes llama.cpp strip spaces after special tokens).
    add("phi-3.phi-3", "phi-3", "");
    return v;
}

// Whether the variant's ids are also stored with special tokens parsed (<name>.special.out).
bool special_mode(const Variant &v) { return !v.extra.empty() || v.base == "phi-3"; }

std::string vocab_path(const std::string &base) {
    const std::string rel = "ggml-vocab/ggml-vocab-" + base + ".gguf";
    const char *p = test_shared_model(rel.c_str());
    return p ? p : "";
}

// A merge list for a SentencePiece vocabulary, as BPE over its tokens needs one: every way of writing a
// normal token as two normal tokens, ranked by the token's id (SentencePiece's order: most frequent
// first), then by where it is cut. Any consistent list serves: Ember and llama.cpp get the same one.
std::vector<std::string> spm_merges(const gguf::File &file) {
    const std::vector<std::string_view> &tokens = file.get_array("tokenizer.ggml.tokens")->strs;
    const gguf::Value *types = file.get_array("tokenizer.ggml.token_type");
    auto normal = [&](size_t id) { return types->array_int(id) == int64_t(TokenType::NORMAL); };
    std::map<std::string_view, size_t> ids;
    for (size_t id = 0; id < tokens.size(); ++id)
        if (normal(id)) ids.emplace(tokens[id], id);
    std::vector<std::string> merges;
    for (size_t id = 0; id < tokens.size(); ++id) {
        const std::string_view t = tokens[id];
        if (!normal(id) || t.find(' ') != std::string_view::npos) continue;
        for (size_t cut = 1; cut < t.size(); ++cut) {
            if ((uint8_t(t[cut]) & 0xC0) == 0x80) continue;   // inside a character
            if (ids.count(t.substr(0, cut)) && ids.count(t.substr(cut)))
                merges.push_back(std::string(t.substr(0, cut)) + " " + std::string(t.substr(cut)));
        }
    }
    return merges;
}

// Copies one metadata value into w (the types vocabulary files use).
void copy_kv(gguf::Writer &w, const std::string &key, const gguf::Value &v) {
    using T = gguf::ValueType;
    switch (v.type) {
    case T::U8: w.add_u8(key, uint8_t(v.u)); break;
    case T::I8: w.add_i8(key, int8_t(v.i)); break;
    case T::U16: w.add_u16(key, uint16_t(v.u)); break;
    case T::I16: w.add_i16(key, int16_t(v.i)); break;
    case T::U32: w.add_u32(key, uint32_t(v.u)); break;
    case T::I32: w.add_i32(key, int32_t(v.i)); break;
    case T::U64: w.add_u64(key, v.u); break;
    case T::I64: w.add_i64(key, v.i); break;
    case T::F32: w.add_f32(key, float(v.f)); break;
    case T::F64: w.add_f64(key, v.f); break;
    case T::BOOL: w.add_bool(key, v.u != 0); break;
    case T::STRING: w.add_string(key, std::string(v.str)); break;
    case T::ARRAY:
        if (v.elem_type == T::STRING) {
            w.add_array_string(key, std::vector<std::string>(v.strs.begin(), v.strs.end()));
        } else if (v.elem_type == T::F32) {
            std::vector<float> f(v.count);
            for (uint64_t i = 0; i < v.count; ++i) f[i] = float(v.array_float(i));
            w.add_array_f32(key, f);
        } else if (v.elem_type == T::I32) {
            std::vector<int32_t> n(v.count);
            for (uint64_t i = 0; i < v.count; ++i) n[i] = int32_t(v.array_int(i));
            w.add_array_i32(key, n);
        } else {
            fail(EMBER_ERR_UNSUPPORTED, "%s: arrays of %s are not copied", key.c_str(), gguf::value_type_name(v.elem_type));
        }
        break;
    default: fail(EMBER_ERR_UNSUPPORTED, "%s: type %s is not copied", key.c_str(), gguf::value_type_name(v.type));
    }
}

// The variant as GGUF bytes (metadata only, like the files it is made from).
std::vector<uint8_t> build_variant(const Variant &var) {
    MappedFile mf(vocab_path(var.base));
    const gguf::File file = gguf::File::parse(mf.data(), mf.size());
    const std::vector<std::string_view> &base_tokens = file.get_array("tokenizer.ggml.tokens")->strs;
    const size_t n = base_tokens.size();
    // Added tokens the base already has are left out (a second entry with the same text would shadow it).
    std::vector<ExtraToken> extra;
    for (const ExtraToken &e : var.extra)
        if (std::find(base_tokens.begin(), base_tokens.end(), std::string_view(e.text)) == base_tokens.end())
            extra.push_back(e);
    gguf::Writer w;
    for (const gguf::KV &kv : file.kvs()) {
        const std::string key(kv.key);
        if (key == "general.alignment") continue;   // the writer's own
        if (key == "tokenizer.ggml.pre" && !var.pre.empty()) continue;
        if (key == "tokenizer.ggml.add_space_prefix" && var.no_space_prefix) continue;
        if (key == "general.name" && !var.general_name.empty()) continue;
        if (key == "tokenizer.ggml.eot_token_id" && var.eot_id >= 0) continue;
        if (var.gemma4 && (key == "tokenizer.ggml.model" || key == "tokenizer.ggml.add_bos_token")) continue;
        const gguf::Value &v = kv.value;
        const bool per_token = v.type == gguf::ValueType::ARRAY && v.count == n;
        if (extra.empty() || !per_token) {
            copy_kv(w, key, v);
            continue;
        }
        // Arrays with one entry per token grow by the extra tokens.
        if (key == "tokenizer.ggml.tokens") {
            std::vector<std::string> t(v.strs.begin(), v.strs.end());
            for (const ExtraToken &e : extra) t.emplace_back(e.text);
            w.add_array_string(key, t);
        } else if (key == "tokenizer.ggml.scores") {
            std::vector<float> f(n);
            for (size_t i = 0; i < n; ++i) f[i] = float(v.array_float(i));
            f.resize(n + extra.size(), 0.0f);
            w.add_array_f32(key, f);
        } else if (key == "tokenizer.ggml.token_type") {
            std::vector<int32_t> t(n);
            for (size_t i = 0; i < n; ++i) t[i] = int32_t(v.array_int(i));
            for (const ExtraToken &e : extra) t.push_back(int32_t(e.type));
            w.add_array_i32(key, t);
        } else {
            fail(EMBER_ERR_UNSUPPORTED, "%s: a per-token array this test does not extend", key.c_str());
        }
    }
    if (!var.pre.empty()) w.add_string("tokenizer.ggml.pre", var.pre);
    if (var.no_space_prefix) w.add_bool("tokenizer.ggml.add_space_prefix", false);
    if (!var.general_name.empty()) w.add_string("general.name", var.general_name);
    if (var.eot_id >= 0) w.add_u32("tokenizer.ggml.eot_token_id", uint32_t(var.eot_id));
    if (var.gemma4) {
        w.add_string("tokenizer.ggml.model", "gemma4");
        w.add_bool("tokenizer.ggml.add_bos_token", false);
        w.add_array_string("tokenizer.ggml.merges", spm_merges(file));
    }
    return w.to_bytes();
}

std::unique_ptr<Tokenizer> load_variant(const Variant &var) {
    const std::vector<uint8_t> bytes = build_variant(var);
    const gguf::File file = gguf::File::parse(bytes.data(), bytes.size());
    return Tokenizer::from_gguf(file);
}

// ---- the stored texts and ids ----------------------------------------------------------------------------

std::string data_dir() {
    const char *src = std::getenv("EMBER_SOURCE_DIR");
    return std::string(src ? src : ".") + "/tests/data/tokenizer_pre/";
}

std::vector<std::string> read_stored_texts(const char *file = "texts.txt") { return read_texts(data_dir() + file); }

// llama.cpp's ids for one variant: a "# add_bos N" line, then one line of ids per text.
struct Expected {
    bool found = false;
    int add_bos = -1;
    std::vector<int32_t> eog;   // sorted
    std::vector<std::vector<int32_t>> ids;
};

Expected read_expected(const std::string &path) {
    Expected e;
    std::ifstream f(path);
    if (!f) return e;
    e.found = true;
    for (std::string line; std::getline(f, line);) {
        if (line.rfind("# add_bos ", 0) == 0) {
            e.add_bos = std::atoi(line.c_str() + 10);
            continue;
        }
        if (line.rfind("# eog", 0) == 0) {
            e.eog = parse_ids(line.substr(5));
            continue;
        }
        if (!line.empty() && line[0] == '#') continue;
        e.ids.push_back(parse_ids(line));
    }
    return e;
}

// Compares one tokenizer mode with a stored file; returns the number of mismatching texts.
size_t compare(const Tokenizer &tok, const std::string &variant, const char *mode, bool parse_special,
               const std::vector<std::string> &texts, const Expected &exp) {
    if (!exp.found) {
        std::printf("  MISSING %s%s.out: run bench/tokenizer_peer.mjs (the name table grew?)\n", variant.c_str(), mode);
        return 1;
    }
    if (exp.ids.size() != texts.size()) {
        std::printf("  %s%s.out has %zu lines for %zu texts: regenerate it\n", variant.c_str(), mode, exp.ids.size(),
                    texts.size());
        return 1;
    }
    size_t bad = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
        const std::vector<int32_t> got = tok.tokenize(texts[i], false, parse_special);
        if (got == exp.ids[i]) continue;
        if (++bad <= 3)
            std::printf("  MISMATCH %s%s text %zu \"%s\"\n    llama.cpp: %s\n    ember:     %s\n", variant.c_str(), mode, i,
                        escaped(texts[i]).c_str(), ids_str(exp.ids[i]).c_str(), ids_str(got).c_str());
    }
    std::vector<int32_t> eog;
    for (int32_t id = 0; id < tok.n_vocab(); ++id)
        if (tok.is_eog(id)) eog.push_back(id);
    if (eog != exp.eog) {
        std::printf("  %s: end-of-generation tokens: llama.cpp %s, ember %s\n", variant.c_str(), ids_str(exp.eog).c_str(),
                    ids_str(eog).c_str());
        ++bad;
    }
    if (exp.add_bos >= 0 && exp.add_bos != int(tok.add_bos())) {
        std::printf("  %s: llama.cpp %s BOS by default, ember %s\n", variant.c_str(), exp.add_bos ? "adds" : "adds no",
                    tok.add_bos() ? "does" : "does not");
        ++bad;
    }
    return bad;
}

// ---- with the shared vocabularies ---------------------------------------------------------------------

// Byte-level BPE spells any text, so each variant gives the text back; SentencePiece too (byte
// fallback), with the space it puts in front where it does. Returns the number of texts that fail.
size_t round_trip_failures(const Tokenizer &tok, const Variant &var, const std::vector<std::string> &texts) {
    // SentencePiece with its space prefix puts a space in front of the text and after every special
    // token (as llama.cpp does): checked on the variant without added tokens.
    const bool spm_prefix = tok.model_name() == "llama" && !var.no_space_prefix;
    if (spm_prefix && special_mode(var)) return 0;
    size_t bad = 0;
    for (const std::string &t : texts) {
        const std::vector<int32_t> ids = tok.tokenize(t, false, false);
        std::string back;
        for (int32_t id : ids) back += tok.token_to_piece(id, false);
        if (back != (spm_prefix && !t.empty() ? " " + t : t) && ++bad <= 3)
            std::printf("  ROUND TRIP %s: \"%s\" -> \"%s\"\n", var.name.c_str(), escaped(t).c_str(), escaped(back).c_str());
    }
    return bad;
}

// Each variant once (building 46 vocabularies is most of the time): llama.cpp's ids, then round trips.
void test_llama_cpp_ids(void **) {
    const std::vector<std::string> texts = read_stored_texts();
    const std::vector<std::string> random_texts = read_stored_texts("texts_random.txt");
    assert_true(texts.size() >= 60);
    assert_true(random_texts.size() >= 100);
    size_t total_bad = 0, n_variants = 0, n_random = 0;
    for (const Variant &var : variants()) {
        const auto tok = load_variant(var);
        size_t bad = compare(*tok, var.name, "", false, texts, read_expected(data_dir() + var.name + ".out"));
        if (special_mode(var))
            bad += compare(*tok, var.name, ".special", true, texts,
                           read_expected(data_dir() + var.name + ".special.out"));
        if (var.random_texts) {
            bad += compare(*tok, var.name, ".random", false, random_texts,
                           read_expected(data_dir() + var.name + ".random.out"));
            ++n_random;
        }
        bad += round_trip_failures(*tok, var, texts);
        if (bad) std::printf("  %-28s %zu mismatches\n", var.name.c_str(), bad);
        total_bad += bad;
        ++n_variants;
    }
    std::printf("  %zu vocabularies x %zu texts, and %zu x %zu random texts, compared with llama.cpp's ids\n", n_variants,
                texts.size(), n_random, random_texts.size());
    assert_int_equal(total_bad, 0);
}

// Gemma-style SentencePiece: no space in front, user-defined tokens cut out without parse_special,
// control tokens only with it.
void test_gemma_style(void **) {
    const Variant *gemma = nullptr;
    const std::vector<Variant> all = variants();
    for (const Variant &v : all)
        if (v.no_space_prefix) gemma = &v;
    assert_non_null(gemma);
    const auto tok = load_variant(*gemma);
    const int32_t n = tok->n_vocab();
    const int32_t h1 = n - 6, tabs = n - 3, start = n - 2;
    assert_string_equal(tok->text(h1).c_str(), "<h1>");
    const std::vector<int32_t> plain = tok->tokenize("<h1>Hi</h1>", false, false);
    assert_int_equal(plain.front(), h1);
    assert_int_equal(plain.back(), n - 5);
    const std::vector<int32_t> tabbed = tok->tokenize("a\t\tb", false, false);
    assert_true(std::find(tabbed.begin(), tabbed.end(), tabs) != tabbed.end());
    // Control tokens stay text unless parsed.
    const std::vector<int32_t> turn = tok->tokenize("<start_of_turn>user", false, false);
    assert_true(std::find(turn.begin(), turn.end(), start) == turn.end());
    assert_int_equal(tok->tokenize("<start_of_turn>user", false, true).front(), start);
    // No space prefix: "Hi" alone and after a special token is the same as in running text.
    const std::vector<int32_t> hi = tok->tokenize("Hi", false, false);
    const std::vector<int32_t> after = tok->tokenize("<start_of_turn>Hi", false, true);
    assert_true(std::vector<int32_t>(after.begin() + 1, after.end()) == hi);
    assert_string_equal(tok->detokenize(hi.data(), hi.size(), false, false).c_str(), "Hi");
}

// ---- no data needed -----------------------------------------------------------------------------------

std::vector<std::string> split(tok::PreTokenizer kind, const std::string &text) {
    std::vector<std::string_view> pieces;
    tok::pretokenize(kind, text, pieces);
    return {pieces.begin(), pieces.end()};
}

void expect_split(tok::PreTokenizer kind, const char *text, std::vector<std::string> want) {
    const std::vector<std::string> got = split(kind, text);
    if (got == want) return;
    std::string g, w;
    for (const auto &p : got) g += "[" + escaped(p) + "]";
    for (const auto &p : want) w += "[" + escaped(p) + "]";
    std::printf("  \"%s\" (kind %d)\n    want %s\n    got  %s\n", escaped(text).c_str(), int(kind), w.c_str(), g.c_str());
    assert_true(false);
}

// Each family's distinguishing rules, worked out by hand from its regexes (and checked against
// llama.cpp's ids through the stored files above).
void test_splits(void **) {
    using P = tok::PreTokenizer;
    expect_split(P::Gpt2, "I'm  fine 123", {"I", "'m", " ", " fine", " 123"});
    expect_split(P::Llama3, "I'M 12345 ok\n\n", {"I", "'M", " ", "123", "45", " ok", "\n\n"});
    expect_split(P::Qwen2, "a 123", {"a", " ", "1", "2", "3"});
    // Qwen3.5: combining marks belong to words (Qwen2 cuts a word at each mark, and puts a mark that
    // follows punctuation into the punctuation's piece); digits one by one as in Qwen2.
    const char *cafe = "cafe\xCC\x81 ok";                                      // "café" with U+0301
    const char *hindi = "\xE0\xA4\xB9\xE0\xA4\xBF\xE0\xA4\xA8\xE0\xA5\x8D\xE0\xA4\xA6\xE0\xA5\x80";  // हिन्दी
    expect_split(P::Qwen35, cafe, {"cafe\xCC\x81", " ok"});
    expect_split(P::Qwen2, cafe, {"cafe", "\xCC\x81", " ok"});
    expect_split(P::Qwen35, hindi, {hindi});
    expect_split(P::Qwen2, hindi, {"\xE0\xA4\xB9", "\xE0\xA4\xBF\xE0\xA4\xA8", "\xE0\xA5\x8D\xE0\xA4\xA6", "\xE0\xA5\x80"});
    expect_split(P::Qwen35, "!!\xCC\x81x 12", {"!!", "\xCC\x81x", " ", "1", "2"});
    expect_split(P::Qwen2, "!!\xCC\x81x 12", {"!!\xCC\x81", "x", " ", "1", "2"});
    // A mark after a space starts a word with it, as a letter would; contractions as in Qwen2.
    expect_split(P::Qwen35, "I'M \xCC\x81" "a\n\n", {"I", "'M", " \xCC\x81" "a", "\n\n"});
    // StarCoder: every digit alone, then GPT-2 on what is left (the space stays alone).
    expect_split(P::Starcoder, "x 123y", {"x", " ", "1", "2", "3", "y"});
    // Falcon: punctuation runs first (the apostrophe too, so no contractions), digits in threes.
    expect_split(P::Falcon, "don't 1234567 a+b", {"don", "'", "t", " ", "123", "456", "7", " a", "+", "b"});
    // llama.cpp's default: as Falcon without the backtick, and digit runs apart from their space.
    expect_split(P::Default, "x `y` 12345", {"x", " `", "y", "`", " ", "123", "45"});
    // o200k: words split before an upper-case letter that follows lower case; contractions stay on.
    expect_split(P::Gpt4o, "HELLOworld helloWorld they're 12345",
                 {"HELLOworld", " hello", "World", " they're", " ", "123", "45"});
    expect_split(P::Gpt4o, "a/b//\nc", {"a", "/b", "//\n", "c"});
    // Tekken: the same without contractions and with one digit per piece.
    expect_split(P::Tekken, "they're 12", {"they", "'re", " ", "1", "2"});
    // Non-ASCII letters count as both cases, so the run keeps going through them.
    expect_split(P::Tekken, "\xC3\x89" "A " "A\xC3\xA9" "B", {"\xC3\x89", "A", " A\xC3\xA9", "B"});
    // DeepSeek LLM: line breaks alone; ASCII letters and punctuation in one class, accented letters in
    // another, so "café" splits; trailing spaces apart.
    expect_split(P::DeepseekLlm, "caf\xC3\xA9 ok\n  ", {"caf", "\xC3\xA9", " ok", "\n", "  "});
    expect_split(P::DeepseekCoder, "ab, 12", {"ab", ",", " ", "1", "2"});
    // BLOOM: words run through symbols and digits, up to a space or sentence punctuation; those left over
    // (spaces, the punctuation) gather into pieces of their own.
    expect_split(P::Bloom, "a+b=2. (x)  y", {"a+b=2", ". (", "x", ") ", " y"});
    expect_split(P::Viking, "v1.2 ok", {"v", "1", ".", "2", " ok"});
    // Gemma 4: runs of line breaks apart from everything else (\r is not one).
    expect_split(P::Gemma4, "a b, 12\r\n\nc\n", {"a b, 12\r", "\n\n", "c", "\n"});
}

const tok::PreTokenizer kAllKinds[] = {
    tok::PreTokenizer::Gpt2,      tok::PreTokenizer::Llama3, tok::PreTokenizer::Qwen2,  tok::PreTokenizer::Starcoder,
    tok::PreTokenizer::Falcon,    tok::PreTokenizer::Default, tok::PreTokenizer::Gpt4o, tok::PreTokenizer::Tekken,
    tok::PreTokenizer::DeepseekLlm, tok::PreTokenizer::DeepseekCoder, tok::PreTokenizer::DeepseekV3, tok::PreTokenizer::Bloom,
    tok::PreTokenizer::Viking,    tok::PreTokenizer::Qwen35, tok::PreTokenizer::Gemma4,
};

// The pieces are non-empty and spell the text exactly, invalid UTF-8 included, in every family.
void test_pieces_cover_text(void **) {
    static const char *const kPieces[] = {" ", "  ", "\n", "\r\n", "\t", "a", "Z", "7", "'s", "'T", "!", "/", "$", "`",
                                          "\xC3\xA9", "\xC3\x89", "\xE4\xB8\xAD", "\xE3\x80\x80", "\xEF\xBC\x81",
                                          "\xF0\x9F\xA6\x99", "\xFF", "\xC3", "\x80", "\xED\xA0\x80", "\xCC\x81"};
    uint64_t state = 0x5eed;
    size_t bad = 0;
    for (int k = 0; k < 400; ++k) {
        std::string t;
        const int n = int(test_randf(&state, 1, 30));
        for (int i = 0; i < n; ++i) t += kPieces[size_t(test_randf(&state, 0, float(std::size(kPieces))))];
        for (tok::PreTokenizer kind : kAllKinds) {
            std::string joined;
            bool empty = false;
            for (const std::string &p : split(kind, t)) {
                empty = empty || p.empty();
                joined += p;
            }
            if (joined != t || empty) {
                if (++bad <= 3) std::printf("  kind %d: \"%s\" not covered\n", int(kind), escaped(t).c_str());
            }
        }
    }
    assert_int_equal(bad, 0);
}

// Texts that make a naive matcher rescan (long runs of spaces, letters of both cases, digits) take time
// linear in their length in every family: 1 MiB of each against 1 MiB of ordinary words, as a ratio
// (the machine is shared), and where that ratio is high, against a quarter of the same text (growth
// 4x, not 16x). A rescan made 1 MiB of digits take 126 s instead of 0.05.
void test_linear_time(void **) {
    auto seconds = [](tok::PreTokenizer kind, const std::string &t) {
        const auto t0 = std::chrono::steady_clock::now();
        std::vector<std::string_view> pieces;
        tok::pretokenize(kind, t, pieces);
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    std::string words;
    while (words.size() < (1u << 20)) words += "the dog ran, ";
    static const char *const kUnits[] = {" ", "a", "A", "\xC3\x89" "A", "7", "\n ", " \xE4\xB8\xAD", "'", "!"};
    for (tok::PreTokenizer kind : kAllKinds) {
        const double base = seconds(kind, words);
        for (const char *unit : kUnits) {
            std::string t;
            while (t.size() < words.size()) t += unit;
            t += "x\xE4\xB8\xAD";   // a different ending, so that no run reaches the end of the text
            const double s = seconds(kind, t);
            if (s < 20 * base + 0.2) continue;
            // Slow against the words (a loaded machine, a sanitizer build): judge by growth instead. A
            // quarter of the text takes a quarter of the time where the work is linear, a sixteenth where
            // it is quadratic (each the best of two runs).
            std::string q;
            while (q.size() < words.size() / 4) q += unit;
            q += "x\xE4\xB8\xAD";
            const double sq = std::min(seconds(kind, q), seconds(kind, q)), s2 = std::min(s, seconds(kind, t));
            std::printf("  kind %d on 1 MiB of \"%s\": %.2f s, of words %.2f s; a quarter of it %.3f s\n", int(kind),
                        escaped(unit).c_str(), s2, base, sq);
            assert_true(s2 < 8 * sq + 0.2);
        }
    }
}

// The 256 <0xAB> byte tokens of a SentencePiece-style vocabulary, appended.
void add_byte_tokens(std::vector<std::string> &tokens, std::vector<int32_t> &types) {
    for (int b = 0; b < 256; ++b) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "<0x%02X>", b);
        tokens.push_back(hex);
        types.push_back(int32_t(TokenType::BYTE));
    }
}

// Thousands of special tokens with a common prefix (as Gemma 3's "<unusedN>") cost each position of a
// text at most the longest token's length, in plain and special-parsing mode alike.
void test_many_special_tokens(void **) {
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    std::vector<int32_t> types = {int32_t(TokenType::UNKNOWN), int32_t(TokenType::CONTROL), int32_t(TokenType::CONTROL)};
    add_byte_tokens(tokens, types);
    for (int k = 0; k < 6000; ++k) {
        tokens.push_back("<unused" + std::to_string(k) + ">");
        types.push_back(int32_t(k % 2 ? TokenType::USER_DEFINED : TokenType::CONTROL));
    }
    gguf::Writer w;
    w.add_string("tokenizer.ggml.model", "llama");
    w.add_array_string("tokenizer.ggml.tokens", tokens);
    w.add_array_f32("tokenizer.ggml.scores", std::vector<float>(tokens.size(), 0.0f));
    w.add_array_i32("tokenizer.ggml.token_type", types);
    w.add_bool("tokenizer.ggml.add_space_prefix", false);
    const std::vector<uint8_t> bytes = w.to_bytes();
    const gguf::File file = gguf::File::parse(bytes.data(), bytes.size());
    const auto tok = Tokenizer::from_gguf(file);
    // User-defined ones always, control ones only when parsed; the longest text wins ("<unused12>" over
    // "<unused1>", which is not followed by '>').
    const int32_t u1 = 3 + 256 + 1, u12 = 3 + 256 + 12, u13 = 3 + 256 + 13;
    assert_true(tok->tokenize("<unused1><unused13>", false, false) == (std::vector<int32_t>{u1, u13}));
    assert_true(tok->tokenize("<unused12>", false, false) != std::vector<int32_t>{u12});
    assert_true(tok->tokenize("<unused12>", false, true) == std::vector<int32_t>{u12});
    // Timed against a text of the same length with no special-token candidates at all (the machine is
    // shared: a ratio, not a time): the per-first-byte lists this replaced took about 100 times as long.
    auto seconds = [&](const std::string &t, bool parse) {
        const auto t0 = std::chrono::steady_clock::now();
        const std::vector<int32_t> ids = tok->tokenize(t, false, parse);
        assert_true(!ids.empty());
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    const std::string plain(1u << 20, 'a');
    const double base = seconds(plain, true);
    for (const char *unit : {"<", "<unused", "<unused1"}) {
        std::string t;
        while (t.size() < plain.size()) t += unit;
        t.resize(plain.size());
        for (bool parse : {false, true}) {
            const double sec = seconds(t, parse);
            if (sec > 10 * base + 0.5)
                std::printf("  1 MiB of \"%s\" (parse_special %d): %.2f s; of 'a': %.2f s\n", unit, int(parse), sec, base);
            assert_true(sec < 10 * base + 0.5);
        }
    }
}

// Gemma 4's BPE on a vocabulary small enough to work out by hand: spaces written "▁" before merging,
// merges between characters (not GPT-2's byte alphabet), a run of line breaks taken whole when it is a
// token, a character without a token spelled with <0xAB> tokens, BOS added although the file says not,
// and the pieces back to the text.
void test_gemma4_by_hand(void **) {
    std::vector<std::string> tokens = {"<pad>", "<bos>", "<eos>"};
    std::vector<int32_t> types = {int32_t(TokenType::CONTROL), int32_t(TokenType::CONTROL), int32_t(TokenType::CONTROL)};
    add_byte_tokens(tokens, types);
    const int32_t first = int32_t(tokens.size());
    for (const char *t : {"\xE2\x96\x81", "a", "b", "\xE2\x96\x81" "a", "ab", "\xE2\x96\x81" "ab", "\n\n", "\n"}) {
        tokens.push_back(t);
        types.push_back(int32_t(TokenType::NORMAL));
    }
    const int32_t sp = first, a = first + 1, b = first + 2, sp_a = first + 3, ab = first + 4, sp_ab = first + 5,
                  nl2 = first + 6, nl = first + 7;
    gguf::Writer w;
    w.add_string("tokenizer.ggml.model", "gemma4");
    w.add_array_string("tokenizer.ggml.tokens", tokens);
    w.add_array_i32("tokenizer.ggml.token_type", types);
    // "a b" merges before "▁ a": "▁ab" comes from "▁" + "ab", never from "▁a" + "b" (no such merge).
    w.add_array_string("tokenizer.ggml.merges", {"a b", "\xE2\x96\x81 a", "\xE2\x96\x81 ab"});
    w.add_u32("tokenizer.ggml.bos_token_id", 1);
    w.add_u32("tokenizer.ggml.eos_token_id", 2);
    w.add_bool("tokenizer.ggml.add_bos_token", false);
    const std::vector<uint8_t> bytes = w.to_bytes();
    const gguf::File file = gguf::File::parse(bytes.data(), bytes.size());
    const auto tok = Tokenizer::from_gguf(file);
    assert_string_equal(tok->model_name().c_str(), "gemma4");
    assert_true(tok->add_bos());
    const std::string text = "ab a\n\nba \xC3\xA9\n";
    const std::vector<int32_t> ids = tok->tokenize(text, false, false);
    const std::vector<int32_t> want = {ab, sp_a, nl2, b, a, sp, 3 + 0xC3, 3 + 0xA9, nl};
    if (ids != want) std::printf("  got %s\n  want %s\n", ids_str(ids).c_str(), ids_str(want).c_str());
    assert_true(ids == want);
    assert_true(tok->tokenize(" ab", false, false) == std::vector<int32_t>{sp_ab});
    assert_int_equal(tok->tokenize("x", true, false).front(), 1);
    assert_string_equal(tok->detokenize(ids.data(), ids.size(), false, false).c_str(), text.c_str());
}

void test_name_table(void **) {
    const std::vector<std::string_view> names = Tokenizer::supported_pre_tokenizers();
    std::set<std::string_view> unique(names.begin(), names.end());
    assert_int_equal(unique.size(), names.size());
    // The names of the families Ember runs (docs/model-families.md), of this year's families and of llama.cpp's
    // vocabulary tests.
    for (const char *required : {"default", "gpt-2", "llama-bpe", "llama3", "qwen2", "smollm", "refact",
                                 "deepseek-r1-qwen", "deepseek-llm", "tekken", "gpt-4o", "dbrx", "olmo",
                                 "starcoder", "falcon", "phi-2", "qwen35", "lfm2", "llama4"}) {
        if (!unique.count(required)) std::printf("  missing pre-tokenizer '%s'\n", required);
        assert_true(unique.count(required) == 1);
    }
    for (std::string_view n : names) assert_non_null(tok::find_pre_tokenizer(n));
    assert_null(tok::find_pre_tokenizer("nonesuch"));
    // A BPE vocabulary without tokenizer.ggml.pre, or with an empty one, is llama.cpp's "default".
    for (const char *pre : {static_cast<const char *>(nullptr), ""}) {
        gguf::Writer w;
        w.add_string("tokenizer.ggml.model", "gpt2");
        if (pre) w.add_string("tokenizer.ggml.pre", pre);
        w.add_array_string("tokenizer.ggml.tokens", {"a", "b", "ab"});
        w.add_array_string("tokenizer.ggml.merges", {"a b"});
        const std::vector<uint8_t> bytes = w.to_bytes();
        const gguf::File file = gguf::File::parse(bytes.data(), bytes.size());
        const auto t = Tokenizer::from_gguf(file);
        assert_string_equal(t->pre_name().c_str(), "default");
        assert_true(t->tokenize("ab", false, false) == std::vector<int32_t>{2});
    }
    const std::vector<std::string_view> models = Tokenizer::supported_models();
    assert_true(models == (std::vector<std::string_view>{"llama", "gpt2", "gemma4", "bert"}));
}

// `test_tokenizer_pre --write DIR`: the variants as files, for bench/tokenizer_peer.mjs.
int write_variants(const char *dir) {
    for (const Variant &var : variants()) {
        const std::string path = std::string(dir) + "/" + var.name + ".gguf";
        const std::vector<uint8_t> bytes = build_variant(var);
        FILE *f = std::fopen(path.c_str(), "wb");
        if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) {
            std::fprintf(stderr, "cannot write %s\n", path.c_str());
            return 1;
        }
        std::fclose(f);
        std::printf("%s%s%s\n", path.c_str(), special_mode(var) ? " special" : "", var.random_texts ? " random" : "");
    }
    return 0;
}

// `test_tokenizer_pre --compare DIR TEXTS`: every variant with a DIR/<name>.random.out (bench/tokenizer_peer.mjs
// --random TEXTS --out DIR) against Ember on TEXTS, for checks on more texts than the stored ones.
// Prints the mismatching texts (three per variant) and a count per variant; fails if any.
int compare_variants(const char *dir, const char *texts_path) {
    const std::vector<std::string> texts = read_texts(texts_path);
    size_t total_bad = 0, n_variants = 0;
    for (const Variant &var : variants()) {
        const Expected exp = read_expected(std::string(dir) + "/" + var.name + ".random.out");
        if (!exp.found) continue;
        const auto tok = load_variant(var);
        const size_t bad = compare(*tok, var.name, ".random", false, texts, exp);
        std::printf("%-28s %zu texts, %zu mismatches\n", var.name.c_str(), texts.size(), bad);
        total_bad += bad;
        ++n_variants;
    }
    std::printf("%zu vocabularies x %zu texts: %zu mismatches\n", n_variants, texts.size(), total_bad);
    return n_variants && !total_bad ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
    if (argc == 3 && std::strcmp(argv[1], "--write") == 0) return write_variants(argv[2]);
    if (argc == 4 && std::strcmp(argv[1], "--compare") == 0) return compare_variants(argv[2], argv[3]);
    const struct CMUnitTest offline[] = {
        cmocka_unit_test(test_splits),
        cmocka_unit_test(test_pieces_cover_text),
        cmocka_unit_test(test_linear_time),
        cmocka_unit_test(test_many_special_tokens),
        cmocka_unit_test(test_gemma4_by_hand),
        cmocka_unit_test(test_name_table),
    };
    const int failed = cmocka_run_group_tests_name("pre-tokenizers (no data)", offline, nullptr, nullptr);
    for (const char *base : {"llama-bpe", "gpt-2", "qwen2", "llama-spm"}) {
        if (vocab_path(base).empty()) {
            if (failed) return failed;
            test_require(nullptr, (std::string("ggml-vocab/ggml-vocab-") + base + ".gguf").c_str());
        }
    }
    const struct CMUnitTest with_data[] = {
        cmocka_unit_test(test_llama_cpp_ids),
        cmocka_unit_test(test_gemma_style),
    };
    return failed + cmocka_run_group_tests_name("pre-tokenizers (vocabularies)", with_data, nullptr, nullptr);
}
