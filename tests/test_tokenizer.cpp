// test_tokenizer.cpp — the SPM and BPE tokenizers against llama.cpp's test vectors, round trips, special
// tokens, streaming UTF-8 and metadata errors.
// Every other header comes before cmocka's, whose fail() macro clashes with ember::fail.
#include "core/error.hpp"
#include "core/mapped_file.hpp"
#include "gguf/gguf.hpp"
#include "tokenizer/tokenizer.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

// cmocka 1.1's header declares its functions without extern "C".
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
extern "C" {
#include <cmocka.h>
}
#include "test_util.h"
#include "tokenizer_test_data.hpp"

using namespace ember;
using namespace tokenizer_test;

namespace {

const char *const kVocabs[] = {"llama-spm", "phi-3", "llama-bpe", "qwen2", "gpt-2"};

std::string vocab_path(const char *name) {
    const std::string rel = std::string("ggml-vocab/ggml-vocab-") + name + ".gguf";
    const char *p = test_shared_model(rel.c_str());
    return p ? p : "";
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::unique_ptr<Tokenizer> load(const char *name, double *build_seconds = nullptr) {
    const std::string path = vocab_path(name);
    assert_false(path.empty());
    MappedFile mf(path);
    const gguf::File file = gguf::File::parse(mf.data(), mf.size());
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_ptr<Tokenizer> tok = Tokenizer::from_gguf(file);
    if (build_seconds) *build_seconds = seconds_since(t0);
    return tok;
}

std::vector<std::string> read_inputs(const std::string &gguf_path) { return read_texts(gguf_path + ".inp"); }

std::vector<std::vector<int32_t>> read_expected(const std::string &gguf_path) {
    std::istringstream in(read_file(gguf_path + ".out"));
    std::vector<std::vector<int32_t>> out;
    for (std::string line; std::getline(in, line);) out.push_back(parse_ids(line));
    return out;
}

int32_t id_of(const Tokenizer &tok, const std::string &text) {
    for (int32_t i = 0; i < tok.n_vocab(); ++i)
        if (tok.text(i) == text) return i;
    return -1;
}

bool contains(const std::vector<int32_t> &v, int32_t id) { return std::find(v.begin(), v.end(), id) != v.end(); }

// ---- 1. llama.cpp's vectors --------------------------------------------------------------------------

void test_vectors(void **) {
    size_t total_bad = 0;
    for (const char *name : kVocabs) {
        const std::string path = vocab_path(name);
        double build_s = 0;
        const auto tok = load(name, &build_s);
        const auto inputs = read_inputs(path);
        const auto expected = read_expected(path);
        assert_int_equal(inputs.size(), expected.size());
        assert_true(inputs.size() > 40);
        size_t bad = 0;
        for (size_t i = 0; i < inputs.size(); ++i) {
            const std::vector<int32_t> got = tok->tokenize(inputs[i], false, false);
            if (got == expected[i]) continue;
            ++bad;
            std::printf("  MISMATCH %s case %zu: input \"%s\"\n    expected: %s\n    got:      %s\n", name, i,
                        escaped(inputs[i]).c_str(), ids_str(expected[i]).c_str(), ids_str(got).c_str());
        }
        std::printf("  %-10s %zu/%zu cases match (tokenizer built in %.1f ms)\n", name, inputs.size() - bad,
                    inputs.size(), build_s * 1e3);
        total_bad += bad;
    }
    assert_int_equal(total_bad, 0);
}

// ---- 2. round trips ----------------------------------------------------------------------------------

// Every vector input round-trips for all five vocabularies: the SPM ones fall back to byte tokens rather
// than <unk> for characters they lack, and byte-level BPE can spell any byte.
void test_round_trip(void **) {
    size_t bad = 0;
    for (const char *name : kVocabs) {
        const auto tok = load(name);
        const bool spm = tok->model_name() == "llama";
        for (const std::string &s : read_inputs(vocab_path(name))) {
            const std::vector<int32_t> ids = tok->tokenize(s, false, false);
            const std::string back = tok->detokenize(ids.data(), ids.size(), false, false);
            if (back != s) {
                ++bad;
                std::printf("  ROUND TRIP %s: \"%s\" -> \"%s\"\n", name, escaped(s).c_str(), escaped(back).c_str());
            }
            // The space SentencePiece puts in front is there when asked for.
            if (spm && !s.empty()) {
                const std::string kept = tok->detokenize(ids.data(), ids.size(), false, true);
                if (kept != " " + s) {
                    ++bad;
                    std::printf("  KEEP SPACE %s: \"%s\" -> \"%s\"\n", name, escaped(s).c_str(), escaped(kept).c_str());
                }
            }
            // Pieces concatenated are the text too (before the leading-space rule).
            std::string pieces;
            for (int32_t id : ids) pieces += tok->token_to_piece(id, false);
            if (pieces != (spm && !s.empty() ? " " + s : s)) {
                ++bad;
                std::printf("  PIECES %s: \"%s\" -> \"%s\"\n", name, escaped(s).c_str(), escaped(pieces).c_str());
            }
        }
    }
    assert_int_equal(bad, 0);
}

// Arbitrary bytes, invalid UTF-8 included, come back exactly: SPM spells what it cannot merge with byte
// tokens, and byte-level BPE keeps raw bytes through its pre-tokenizer. (A literal U+2581 would come
// back as a space from SPM, by design; the generator never forms one.)
void test_round_trip_bytes(void **) {
    static const char *const kPieces[] = {" ", "  ", "\n", "\t", "a", "Z", "7", "'s", "!", "\xC3\xA9", "\xE4\xB8\xAD",
                                          "\xF0\x9F\xA6\x99", "\xFF", "\xC3", "\x80", "\xED\xA0\x80", "\xF0\x9F"};
    uint64_t state = 0x1234567;
    std::vector<std::string> texts;
    for (int k = 0; k < 300; ++k) {
        std::string t;
        const int n = int(test_randf(&state, 1, 24));
        for (int i = 0; i < n; ++i) t += kPieces[size_t(test_randf(&state, 0, 17))];
        texts.push_back(t);
    }
    size_t bad = 0;
    for (const char *name : kVocabs) {
        const auto tok = load(name);
        for (const std::string &t : texts) {
            const std::vector<int32_t> ids = tok->tokenize(t, false, false);
            for (int32_t id : ids) assert_true(id >= 0 && id < tok->n_vocab());
            const std::string back = tok->detokenize(ids.data(), ids.size(), false, false);
            if (back != t) {
                ++bad;
                std::printf("  BYTES %s: \"%s\" -> \"%s\"\n", name, escaped(t).c_str(), escaped(back).c_str());
            }
        }
    }
    assert_int_equal(bad, 0);
}

// ---- 3. add_special / parse_special / end of generation ----------------------------------------------

void test_special_spm(void **) {
    const auto tok = load("llama-spm");
    assert_int_equal(tok->bos(), 1);
    assert_int_equal(tok->eos(), 2);
    assert_true(tok->add_bos());
    assert_false(tok->add_eos());

    const std::vector<int32_t> hello = tok->tokenize("Hello", false, false);
    const std::vector<int32_t> parsed = tok->tokenize("<s>Hello", false, true);
    assert_true(parsed.size() >= 2);
    assert_int_equal(parsed[0], 1);
    // After a special token the text gets its space prefix again, as at the start.
    assert_true(std::vector<int32_t>(parsed.begin() + 1, parsed.end()) == hello);
    const std::vector<int32_t> plain = tok->tokenize("<s>Hello", false, false);
    assert_false(contains(plain, 1));
    assert_true(plain.size() > hello.size());

    const std::vector<int32_t> with_bos = tok->tokenize("Hello", true, false);
    assert_int_equal(with_bos.size(), hello.size() + 1);
    assert_int_equal(with_bos[0], 1);
    assert_true(std::vector<int32_t>(with_bos.begin() + 1, with_bos.end()) == hello);
    // Empty text: nothing, or only BOS.
    assert_true(tok->tokenize("", false, false).empty());
    assert_true(tok->tokenize("", true, false) == std::vector<int32_t>{1});

    // Detokenizing: BOS is silent unless rendered, and the space prefix goes either way.
    assert_string_equal(tok->detokenize(with_bos.data(), with_bos.size(), false, false).c_str(), "Hello");
    assert_string_equal(tok->detokenize(with_bos.data(), with_bos.size(), true, false).c_str(), "<s>Hello");
    assert_string_equal(tok->detokenize(with_bos.data(), with_bos.size(), false, true).c_str(), " Hello");
    assert_string_equal(tok->token_to_piece(1, false).c_str(), "");
    assert_string_equal(tok->token_to_piece(1, true).c_str(), "<s>");
    const int32_t nl = id_of(*tok, "<0x0A>");
    assert_true(nl >= 0);
    assert_string_equal(tok->token_to_piece(nl, false).c_str(), "\n");

    assert_true(tok->is_eog(2));
    assert_false(tok->is_eog(1));
    assert_false(tok->is_eog(hello[0]));
}

void test_special_bpe(void **) {
    const auto qwen = load("qwen2");
    const int32_t im_start = id_of(*qwen, "<|im_start|>"), im_end = id_of(*qwen, "<|im_end|>");
    assert_true(im_start >= 0 && im_end >= 0);
    const std::vector<int32_t> parsed = qwen->tokenize("<|im_start|>user", false, true);
    assert_true(contains(parsed, im_start));
    assert_int_equal(parsed[0], im_start);
    assert_false(contains(qwen->tokenize("<|im_start|>user", false, false), im_start));
    // BPE adds no BOS unless the metadata asks (Qwen2's does not).
    assert_false(qwen->add_bos());
    assert_true(qwen->tokenize("user", true, false) == qwen->tokenize("user", false, false));
    // Control tokens render only on request; the text around them round-trips.
    const std::vector<int32_t> chat = qwen->tokenize("<|im_start|>user\nHi<|im_end|>", false, true);
    assert_string_equal(qwen->detokenize(chat.data(), chat.size(), false, false).c_str(), "user\nHi");
    assert_string_equal(qwen->detokenize(chat.data(), chat.size(), true, false).c_str(),
                        "<|im_start|>user\nHi<|im_end|>");
    assert_true(qwen->is_eog(im_end));
    assert_true(qwen->is_eog(id_of(*qwen, "<|endoftext|>")));
    assert_false(qwen->is_eog(im_start));

    const auto llama3 = load("llama-bpe");
    const int32_t eot = id_of(*llama3, "<|eot_id|>");
    assert_true(eot >= 0);
    assert_true(llama3->is_eog(eot));
    assert_true(llama3->is_eog(llama3->eos()));
    assert_false(llama3->is_eog(llama3->bos()));
    const std::vector<int32_t> hdr = llama3->tokenize("<|start_header_id|>user<|end_header_id|>", false, true);
    assert_int_equal(hdr.size(), 3);
    assert_int_equal(hdr[0], id_of(*llama3, "<|start_header_id|>"));
    // Llama-3 vocabularies start with BOS when the metadata does not say otherwise (this file has no
    // tokenizer.ggml.add_bos_token), as llama.cpp does.
    assert_true(llama3->add_bos());
    const std::vector<int32_t> with_bos = llama3->tokenize("Hello", true, false);
    assert_int_equal(with_bos[0], llama3->bos());
    assert_int_equal(with_bos.size(), llama3->tokenize("Hello", false, false).size() + 1);
}

// ---- 4. Utf8Stream and utf8_sanitize -------------------------------------------------------------------

void test_utf8_stream(void **) {
    const std::string llama = "\xF0\x9F\xA6\x99";   // U+1F999
    const std::string fffd = "\xEF\xBF\xBD";
    Utf8Stream st;
    std::string out;
    int non_empty = 0;
    for (char c : llama) {
        const std::string part = st.push(std::string_view(&c, 1));
        non_empty += !part.empty();
        out += part;
    }
    assert_int_equal(non_empty, 1);
    assert_true(out == llama);
    assert_true(st.flush().empty());

    assert_true(st.push("a\xFF" "b") == "a" + fffd + "b");
    assert_true(st.push("\xC3(") == fffd + "(");
    assert_true(st.push("\xE2\x82").empty());   // held back: could still become a character
    assert_true(st.flush() == fffd);
    assert_true(st.flush().empty());
    // A truncated sequence followed by a new character is replaced as soon as it is known to be broken.
    assert_true(st.push("\xE2\x82" "x") == fffd + "x");

    assert_true(utf8_sanitize("plain \xC3\xA9t\xC3\xA9") == "plain \xC3\xA9t\xC3\xA9");
    // Surrogates and overlongs: one U+FFFD per maximal ill-formed subpart.
    assert_true(utf8_sanitize("\xED\xA0\x80") == fffd + fffd + fffd);
    assert_true(utf8_sanitize("\xC0\xAF") == fffd + fffd);
    assert_true(utf8_sanitize("x\xF0\x9F\xA6") == "x" + fffd);
}

// ---- 5. metadata errors -----------------------------------------------------------------------------

struct TinyVocab {
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "a", "b", "\xE2\x96\x81" "a"};
    std::vector<float> scores = {0, 0, 0, -1, -2, -3};
    std::vector<int32_t> types = {2, 3, 3, 1, 1, 1};
};

gguf::Writer spm_writer(const TinyVocab &v) {
    gguf::Writer w;
    w.add_string("tokenizer.ggml.model", "llama");
    w.add_array_string("tokenizer.ggml.tokens", v.tokens);
    w.add_array_f32("tokenizer.ggml.scores", v.scores);
    w.add_array_i32("tokenizer.ggml.token_type", v.types);
    w.add_u32("tokenizer.ggml.bos_token_id", 1);
    w.add_u32("tokenizer.ggml.eos_token_id", 2);
    return w;
}

// Builds a tokenizer from w and expects `status` with `word` in the message.
void expect_error(const gguf::Writer &w, ember_status status, const char *word) {
    const std::vector<uint8_t> bytes = w.to_bytes();
    const gguf::File file = gguf::File::parse(bytes.data(), bytes.size());
    try {
        Tokenizer::from_gguf(file);
    } catch (const Error &e) {
        std::printf("  expected error: %s\n", e.what());
        assert_int_equal(e.status(), status);
        assert_non_null(std::strstr(e.what(), word));
        return;
    }
    std::printf("  no error; expected one mentioning '%s'\n", word);
    assert_true(false);
}

void test_errors(void **) {
    TinyVocab v;
    {   // the valid base really is valid, so the failures below come from what each one changes
        const std::vector<uint8_t> bytes = spm_writer(v).to_bytes();
        const gguf::File file = gguf::File::parse(bytes.data(), bytes.size());
        const auto tok = Tokenizer::from_gguf(file);
        assert_int_equal(tok->n_vocab(), 6);
        assert_true(tok->tokenize("a", false, false) == std::vector<int32_t>{5});
        assert_true(tok->tokenize("ab", true, false) == (std::vector<int32_t>{1, 5, 4}));
    }
    {
        gguf::Writer w;
        w.add_string("tokenizer.ggml.model", "nonesuch");
        w.add_array_string("tokenizer.ggml.tokens", v.tokens);
        expect_error(w, EMBER_ERR_UNSUPPORTED, "nonesuch");
    }
    {
        gguf::Writer w;
        w.add_string("tokenizer.ggml.model", "gpt2");
        w.add_string("tokenizer.ggml.pre", "nonesuch-pre");
        w.add_array_string("tokenizer.ggml.tokens", v.tokens);
        w.add_array_string("tokenizer.ggml.merges", {"a b"});
        expect_error(w, EMBER_ERR_UNSUPPORTED, "nonesuch-pre");
    }
    {
        TinyVocab bad = v;
        bad.scores.pop_back();
        expect_error(spm_writer(bad), EMBER_ERR_INVALID_MODEL, "tokenizer.ggml.scores");
    }
    {
        TinyVocab bad = v;
        bad.types.push_back(1);
        expect_error(spm_writer(bad), EMBER_ERR_INVALID_MODEL, "tokenizer.ggml.token_type");
    }
    {
        TinyVocab bad = v;
        bad.types[3] = 42;
        expect_error(spm_writer(bad), EMBER_ERR_INVALID_MODEL, "tokenizer.ggml.token_type");
    }
    {
        gguf::Writer w;
        w.add_string("tokenizer.ggml.model", "llama");
        expect_error(w, EMBER_ERR_INVALID_MODEL, "tokenizer.ggml.tokens");
    }
    {
        gguf::Writer w;
        w.add_string("tokenizer.ggml.model", "gpt2");
        w.add_array_string("tokenizer.ggml.tokens", v.tokens);
        expect_error(w, EMBER_ERR_INVALID_MODEL, "tokenizer.ggml.merges");
    }
    {
        gguf::Writer w;
        w.add_string("tokenizer.ggml.model", "gpt2");
        w.add_array_string("tokenizer.ggml.tokens", v.tokens);
        w.add_array_string("tokenizer.ggml.merges", {"ab"});
        expect_error(w, EMBER_ERR_INVALID_MODEL, "tokenizer.ggml.merges");
    }
    {
        gguf::Writer w;
        w.add_u32("tokenizer.ggml.model", 1);
        w.add_array_string("tokenizer.ggml.tokens", v.tokens);
        expect_error(w, EMBER_ERR_INVALID_MODEL, "tokenizer.ggml.model");
    }
    {   // an id outside the vocabulary means "none", not an error
        gguf::Writer w = spm_writer(v);
        w.add_u32("tokenizer.ggml.eot_token_id", 1000);
        w.add_u32("tokenizer.ggml.unknown_token_id", 0xFFFFFFFFu);
        const std::vector<uint8_t> bytes = w.to_bytes();
        const gguf::File file = gguf::File::parse(bytes.data(), bytes.size());
        const auto tok = Tokenizer::from_gguf(file);
        assert_false(tok->is_eog(1000 % tok->n_vocab()));
        assert_true(tok->is_eog(2));
    }
}

// ---- speed ---------------------------------------------------------------------------------------------

void test_speed(void **) {
    double build_s = 0;
    const auto tok = load("qwen2", &build_s);
    std::string text;
    for (const std::string &s : read_inputs(vocab_path("qwen2"))) text += s + "\n";
    while (text.size() < 4096) text += text;
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<int32_t> ids = tok->tokenize(text, false, false);
    const double tok_s = seconds_since(t0);
    std::printf("  qwen2: build %.1f ms; %zu bytes -> %zu tokens in %.2f ms\n", build_s * 1e3, text.size(), ids.size(),
                tok_s * 1e3);
    assert_true(tok->detokenize(ids.data(), ids.size(), false, false) == text);
    // Loose bounds, so that only a gross regression (not a slow or instrumented build) trips them.
    assert_true(build_s < 5.0);
    assert_true(tok_s < 0.5);
}

} // namespace

int main(void) {
    const struct CMUnitTest offline[] = {
        cmocka_unit_test(test_utf8_stream),
        cmocka_unit_test(test_errors),
    };
    const int failed = cmocka_run_group_tests_name("tokenizer (no data)", offline, nullptr, nullptr);
    for (const char *name : kVocabs) {
        const std::string what = std::string("ggml-vocab/ggml-vocab-") + name + ".gguf";
        if (vocab_path(name).empty()) {
            if (failed) return failed;
            test_require(nullptr, what.c_str());
        }
    }
    const struct CMUnitTest with_data[] = {
        cmocka_unit_test(test_vectors),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_round_trip_bytes),
        cmocka_unit_test(test_special_spm),
        cmocka_unit_test(test_special_bpe),
        cmocka_unit_test(test_speed),
    };
    return failed + cmocka_run_group_tests_name("tokenizer (vocabularies)", with_data, nullptr, nullptr);
}
