// fuzz_gguf.cpp — libFuzzer target: arbitrary bytes as a GGUF file.
//
// 1. The reader (gguf::File::parse) on the bytes as they are, then every lookup an application or the
//    loader makes on what it accepted: each value rendered as text, typed reads, array elements.
// 2. The whole load path through the C ABI, from a memory file (memfd, opened by its /proc path, so the
//    real mmap code runs): ember_model_load with and without vocab_only, every query on the model, the
//    tokenizer it built, and for a model that loads with weights a session that evaluates two tokens
//    and saves its state (shapes the loader accepted must be safe for the forward pass).
// Anything else than a clean status (a crash, a sanitizer report, an exception across the ABI, a
// status outside the documented ones) is a finding.
#include "fuzz_util.hpp"

#include "core/error.hpp"
#include "gguf/gguf.hpp"
#include "gguf/gguf_format.hpp"

#include <ember/ember.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

using namespace ember;
using ember::fuzz::broken;

namespace {

void exercise_reader(const uint8_t *data, size_t size) {
    try {
        const gguf::File f = gguf::File::parse(data, size);
        for (const gguf::KV &kv : f.kvs()) {
            (void)gguf::value_to_string(kv.value);
            (void)f.find(kv.key);
            try {
                (void)f.get_int(kv.key);
            } catch (const Error &) {
            }
            try {
                (void)f.get_float(kv.key);
            } catch (const Error &) {
            }
            try {
                (void)f.get_string(kv.key);
            } catch (const Error &) {
            }
            if (kv.value.type == gguf::ValueType::ARRAY && kv.value.elem_type != gguf::ValueType::STRING &&
                kv.value.count > 0) {
                (void)kv.value.array_int(kv.value.count - 1);
                (void)kv.value.array_float(0);
            }
        }
        for (const gguf::TensorInfo &t : f.tensors()) {
            if (f.find_tensor(t.name) == nullptr) broken("a parsed tensor is not found by its name");
            if (t.n_bytes > 0 && (t.data < data || t.data + t.n_bytes > data + size))
                broken("a tensor's data lies outside the parsed bytes");
            // Touch the first and last byte: ASan catches a view past the buffer.
            if (t.n_bytes > 0) {
                volatile uint8_t first = t.data[0], last = t.data[t.n_bytes - 1];
                (void)first;
                (void)last;
            }
        }
    } catch (const Error &e) {
        if (e.status() != EMBER_ERR_INVALID_MODEL) broken("the reader threw another status than INVALID_MODEL", e.what());
    }
}

bool load_status_ok(ember_status st) {
    return st == EMBER_OK || st == EMBER_ERR_INVALID_MODEL || st == EMBER_ERR_UNSUPPORTED ||
           st == EMBER_ERR_OUT_OF_MEMORY;
}

void exercise_model(ember_model *m, bool vocab_only) {
    ember_model_info info;
    ember_model_info_init(&info);
    if (ember_model_get_info(m, &info) != EMBER_OK) broken("ember_model_get_info failed on a loaded model");
    size_t n = 0;
    ember_model_meta_count(m, &n);
    char buf[256];
    for (size_t i = 0; i < n; ++i) {
        const char *key = nullptr;
        if (ember_model_meta_key(m, i, &key) != EMBER_OK || !key) broken("a metadata key cannot be read");
        size_t len = 0;
        if (ember_model_meta_string(m, key, nullptr, 0, &len) != EMBER_OK) broken("a metadata value cannot be rendered");
        ember_model_meta_string(m, key, buf, sizeof buf, &len);
        int64_t i64;
        double f64;
        ember_model_meta_int(m, key, &i64);
        ember_model_meta_float(m, key, &f64);
    }
    ember_model_tensor_count(m, &n);
    for (size_t i = 0; i < n; ++i) {
        ember_tensor_info ti;
        ember_tensor_info_init(&ti);
        if (ember_model_tensor_info(m, i, &ti) != EMBER_OK || !ti.name || !ti.type) broken("a tensor cannot be described");
    }
    // The tokenizer the file describes, on text with special tokens and invalid UTF-8.
    static const char kText[] = "Hello <s> world</s> <|im_start|>\xc3\xa9\xff 12 don't";
    ember_token toks[128];
    size_t nt = 0;
    const ember_status st = ember_tokenize(m, kText, sizeof kText - 1,
                                           EMBER_TOKENIZE_ADD_SPECIAL | EMBER_TOKENIZE_PARSE_SPECIAL, toks, 128, &nt);
    if (st == EMBER_OK) {
        for (size_t i = 0; i < nt; ++i)
            if (toks[i] < 0 || static_cast<uint32_t>(toks[i]) >= info.n_vocab) broken("a token id outside the vocabulary");
        size_t len = 0;
        if (ember_detokenize(m, toks, nt, EMBER_DETOKENIZE_RENDER_SPECIAL, buf, sizeof buf, &len) == EMBER_ERR_INVALID_ARGUMENT)
            broken("ember_detokenize refused the tokenizer's own ids");
    } else if (st != EMBER_ERR_BUFFER_TOO_SMALL) {
        broken("ember_tokenize failed", ember_last_error());
    }
    for (ember_token t = 0; t < 64 && static_cast<uint32_t>(t) < info.n_vocab; ++t) {
        size_t len = 0;
        ember_token_to_piece(m, t, EMBER_DETOKENIZE_RENDER_SPECIAL, buf, sizeof buf, &len);
        (void)ember_token_is_eog(m, t);
    }
    if (vocab_only) return;

    ember_memory_estimate est;
    ember_memory_estimate_init(&est);
    ember_engine_params ep;
    ember_engine_params_init(&ep);
    ep.n_ctx = 16;
    ep.n_seq_max = 1;
    ember_estimate_memory(m, &ep, &est);
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.n_ctx = 8;
    sp.n_threads = 1;
    ember_session *s = nullptr;
    if (ember_session_create(m, &sp, &s) != EMBER_OK) return;
    const ember_token two[2] = {0, static_cast<ember_token>(info.n_vocab - 1)};
    if (ember_session_feed(s, two, 2) == EMBER_OK) {
        const float *logits = nullptr;
        size_t nv = 0;
        if (ember_session_logits(s, &logits, &nv) != EMBER_OK || nv != info.n_vocab) broken("no logits after a feed");
        size_t len = 0;
        ember_session_save(s, nullptr, 0, &len);
    }
    ember_session_free(s);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    exercise_reader(data, size);

    const int fd = memfd_create("fuzz.gguf", MFD_CLOEXEC);
    if (fd < 0) return 0;
    size_t off = 0;
    while (off < size) {
        const ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) break;
        off += static_cast<size_t>(w);
    }
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    for (int vocab_only = 1; vocab_only >= 0; --vocab_only) {
        ember_model_params mp;
        ember_model_params_init(&mp);
        mp.vocab_only = vocab_only;
        ember_model *m = nullptr;
        const ember_status st = ember_model_load(path.c_str(), &mp, &m);
        if (!load_status_ok(st)) broken("ember_model_load gave an undocumented status", ember_last_error());
        if ((st == EMBER_OK) != (m != nullptr)) broken("ember_model_load's *out does not match its status");
        if (st != EMBER_OK) {
            if (std::strlen(ember_last_error()) == 0) broken("a failed load without a message");
            if (vocab_only) break;  // a file that fails vocab-only fails with weights too
            continue;
        }
        exercise_model(m, vocab_only);
        ember_model_free(m);
    }
    close(fd);
    return 0;
}
