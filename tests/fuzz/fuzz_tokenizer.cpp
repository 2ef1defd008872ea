// fuzz_tokenizer.cpp — libFuzzer target: arbitrary text through the tokenizers, text → ids → text.
//
// Vocabularies: SentencePiece (models/stories15M-q8_0.gguf, loaded vocab-only) and, when
// ../shared/models is there, the byte-level BPE ones of GPT-2, Llama 3 and Qwen2 (each with its own
// pre-tokenizer). The input's first byte picks the vocabulary and the flags; the rest is the text.
// Promises checked: ids inside the vocabulary; ember_detokenize accepts them and returns valid UTF-8 of
// the length it reports; the two-call idiom agrees with itself; and without special-token parsing, text
// that is valid UTF-8 comes back as it went in, for the BPE vocabularies (byte-level: lossless).
#include "fuzz_util.hpp"

#include <ember/ember.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace ember;

namespace {

struct Vocab {
    ember_model *model;
    bool byte_level;   // BPE: detokenize(tokenize(text)) == text for any valid UTF-8
    uint32_t n_vocab;
};
std::vector<Vocab> g_vocabs;

void add_vocab(const std::string &path, bool byte_level) {
    if (path.empty()) return;
    ember_model_params mp;
    ember_model_params_init(&mp);
    mp.vocab_only = true;
    ember_model *m = nullptr;
    if (ember_model_load(path.c_str(), &mp, &m) != EMBER_OK) fuzz::broken("cannot load", path.c_str());
    ember_model_info info;
    ember_model_info_init(&info);
    ember_model_get_info(m, &info);
    g_vocabs.push_back({m, byte_level, info.n_vocab});
}

bool valid_utf8(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        size_t len;
        uint32_t cp, min;
        if (c < 0x80) { ++i; continue; }
        if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; min = 0x80; }
        else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; min = 0x800; }
        else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; min = 0x10000; }
        else return false;
        if (n - i < len) return false;
        for (size_t k = 1; k < len; ++k) {
            const unsigned char cc = static_cast<unsigned char>(s[i + k]);
            if ((cc & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (cc & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}

} // namespace

static void free_vocabs() {
    for (const Vocab &v : g_vocabs) ember_model_free(v.model);
    g_vocabs.clear();
}

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    std::atexit(free_vocabs);  // before g_vocabs is destroyed: the leak checker runs at exit
    const std::string spm = fuzz::repo_model("stories15M-q8_0.gguf");
    if (spm.empty()) fuzz::broken("models/stories15M-q8_0.gguf not found (set EMBER_REPO_MODELS)");
    add_vocab(spm, false);
    add_vocab(fuzz::shared_model("ggml-vocab/ggml-vocab-gpt-2.gguf"), true);
    add_vocab(fuzz::shared_model("ggml-vocab/ggml-vocab-llama-bpe.gguf"), true);
    add_vocab(fuzz::shared_model("ggml-vocab/ggml-vocab-qwen2.gguf"), true);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const Vocab &v = g_vocabs[data[0] % g_vocabs.size()];
    const uint32_t flags = (data[0] >> 4) & (EMBER_TOKENIZE_ADD_SPECIAL | EMBER_TOKENIZE_PARSE_SPECIAL);
    const uint32_t detok_flags = (data[0] >> 6) & (EMBER_DETOKENIZE_RENDER_SPECIAL | EMBER_DETOKENIZE_KEEP_LEADING_SPACE);
    const char *text = reinterpret_cast<const char *>(data + 1);
    const size_t len = size - 1;

    size_t n = 0;
    if (ember_tokenize(v.model, text, len, flags, nullptr, 0, &n) != EMBER_OK) fuzz::broken("ember_tokenize failed", ember_last_error());
    std::vector<ember_token> ids(n + 1);
    size_t n2 = 0;
    if (ember_tokenize(v.model, text, len, flags, ids.data(), ids.size(), &n2) != EMBER_OK || n2 != n)
        fuzz::broken("the two calls of ember_tokenize disagree");
    for (size_t i = 0; i < n; ++i)
        if (ids[i] < 0 || static_cast<uint32_t>(ids[i]) >= v.n_vocab) fuzz::broken("a token id outside the vocabulary");

    size_t out_len = 0;
    if (ember_detokenize(v.model, ids.data(), n, detok_flags, nullptr, 0, &out_len) != EMBER_OK)
        fuzz::broken("ember_detokenize refused the tokenizer's own ids", ember_last_error());
    std::string out(out_len + 1, '\0');
    size_t out_len2 = 0;
    if (ember_detokenize(v.model, ids.data(), n, detok_flags, out.data(), out.size(), &out_len2) != EMBER_OK ||
        out_len2 != out_len)
        fuzz::broken("the two calls of ember_detokenize disagree");
    if (out[out_len] != '\0' || std::strlen(out.c_str()) > out_len) fuzz::broken("ember_detokenize's NUL is misplaced");
    if (!valid_utf8(out.data(), out_len)) fuzz::broken("ember_detokenize returned invalid UTF-8");
    if (v.byte_level && !(flags & EMBER_TOKENIZE_PARSE_SPECIAL) && valid_utf8(text, len) &&
        std::memchr(text, '\0', len) == nullptr) {
        // ADD_SPECIAL may add BOS/EOS, which render as nothing without RENDER_SPECIAL.
        if (!(detok_flags & EMBER_DETOKENIZE_RENDER_SPECIAL) && std::string(out.data(), out_len) != std::string(text, len))
            fuzz::broken("byte-level BPE did not give the text back");
    }
    for (size_t i = 0; i < n && i < 64; ++i) {
        char piece[256];
        size_t piece_len = 0;
        const ember_status st = ember_token_to_piece(v.model, ids[i], detok_flags, piece, sizeof piece, &piece_len);
        if (st != EMBER_OK && st != EMBER_ERR_BUFFER_TOO_SMALL) fuzz::broken("ember_token_to_piece failed");
    }
    return 0;
}
