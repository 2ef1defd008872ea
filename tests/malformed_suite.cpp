// malformed_suite.cpp — the malformed-file suite (test_malformed_files; docs/reliability.md): model and
// saved-state files broken in one way each, every one refused through the public API with a specific
// status and message, never OK, never a crash, in bounded time and memory.
//
// The files are made here from a tiny valid llama model written with our GGUF writer (one layer,
// embedding 16, a 12-token SentencePiece vocabulary) and a state saved from a session on it: some are
// written with the writer (wrong key types, shapes that disagree with the architecture, ...), the rest
// are the valid bytes edited at the positions a walk of the file records (truncations at every field
// boundary, counts, lengths, dimensions, offsets, type ids, ...). The valid files must load first, so
// that each broken file fails for its own reason; the message fragment in the table says which.
//
// Each file goes through ember_model_load (full, and vocab-only where the reader itself must refuse
// it), or ember_session_restore_file on a session of the tiny model; and `ember info` (when EMBER_CLI
// is set) must exit non-zero with the same message, except where the architecture is only unsupported
// (info then shows the metadata). `test_malformed_files --write DIR` writes the files to DIR instead
// (to try them on other tools).
#include "core/dtype.hpp"
#include "gguf/gguf.hpp"
#include "session/state_checksum.hpp"

#include <ember/ember.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

using namespace ember;

namespace {

using Bytes = std::vector<uint8_t>;
using Clock = std::chrono::steady_clock;

int g_failures = 0;
#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            ++g_failures;                                                                  \
            std::fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);           \
            std::fprintf(stderr, __VA_ARGS__);                                             \
            std::fprintf(stderr, "\n");                                                    \
        }                                                                                  \
    } while (0)

// ---- the tiny model ---------------------------------------------------------------------------------

constexpr int64_t kEmbd = 16, kFf = 32, kHeads = 2;

// Changes to the valid model, made while writing it.
struct Tweaks {
    std::set<std::string> drop;                          // keys and tensors left out
    std::map<std::string, std::vector<int64_t>> dims;    // tensors written with these dimensions instead
    std::map<std::string, DType> types;                  // tensors written in this type instead (F16)
    std::function<void(gguf::Writer &)> more;            // keys or tensors written after the others
};

const std::vector<std::string> kTokens = {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "\xe2\x96\x81" "a", "b",
                                          "c", "d", "\xe2\x96\x81the", "on", "ce", "\xe2\x96\x81up"};

Bytes tiny_model(const Tweaks &t = {}) {
    gguf::Writer w;
    auto key = [&](const std::string &k) { return !t.drop.count(k); };
    if (key("general.architecture")) w.add_string("general.architecture", "llama");
    if (key("general.name")) w.add_string("general.name", "malformed-suite base");
    if (key("llama.context_length")) w.add_u32("llama.context_length", 64);
    if (key("llama.embedding_length")) w.add_u32("llama.embedding_length", kEmbd);
    if (key("llama.block_count")) w.add_u32("llama.block_count", 1);
    if (key("llama.feed_forward_length")) w.add_u32("llama.feed_forward_length", kFf);
    if (key("llama.attention.head_count")) w.add_u32("llama.attention.head_count", kHeads);
    if (key("llama.attention.head_count_kv")) w.add_u32("llama.attention.head_count_kv", kHeads);
    if (key("llama.attention.layer_norm_rms_epsilon")) w.add_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    if (key("llama.rope.freq_base")) w.add_f32("llama.rope.freq_base", 10000.0f);
    if (key("tokenizer.ggml.model")) w.add_string("tokenizer.ggml.model", "llama");
    if (key("tokenizer.ggml.tokens")) w.add_array_string("tokenizer.ggml.tokens", kTokens);
    std::vector<float> scores(kTokens.size());
    for (size_t i = 0; i < scores.size(); ++i) scores[i] = -static_cast<float>(i);
    if (key("tokenizer.ggml.scores")) w.add_array_f32("tokenizer.ggml.scores", scores);
    std::vector<int32_t> types(kTokens.size(), 1);
    types[0] = 2, types[1] = types[2] = 3;
    if (key("tokenizer.ggml.token_type")) w.add_array_i32("tokenizer.ggml.token_type", types);
    if (key("tokenizer.ggml.bos_token_id")) w.add_u32("tokenizer.ggml.bos_token_id", 1);
    if (key("tokenizer.ggml.eos_token_id")) w.add_u32("tokenizer.ggml.eos_token_id", 2);
    if (key("tokenizer.ggml.unknown_token_id")) w.add_u32("tokenizer.ggml.unknown_token_id", 0);

    uint64_t seed = 7;
    auto tensor = [&](const std::string &name, std::vector<int64_t> dims, bool norm) {
        if (t.drop.count(name)) return;
        if (auto it = t.dims.find(name); it != t.dims.end()) dims = it->second;
        int64_t n = 1;
        for (int64_t d : dims) n *= d;
        const auto ty = t.types.find(name);
        if (ty != t.types.end() && ty->second == DType::F16) {
            std::vector<uint16_t> h(static_cast<size_t>(n), 0x3c00);   // 1.0
            w.add_tensor(name, DType::F16, dims, h.data(), h.size() * 2);
            return;
        }
        std::vector<float> v(static_cast<size_t>(n));
        for (float &x : v) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            x = static_cast<float>((seed >> 40) & 0xFFFF) / 65536.0f - 0.5f + (norm ? 1.0f : 0.0f);
        }
        w.add_tensor(name, DType::F32, dims, v.data(), v.size() * sizeof(float));
    };
    const int64_t nv = static_cast<int64_t>(kTokens.size());
    tensor("token_embd.weight", {kEmbd, nv}, false);
    tensor("output_norm.weight", {kEmbd}, true);
    tensor("output.weight", {kEmbd, nv}, false);
    tensor("blk.0.attn_norm.weight", {kEmbd}, true);
    tensor("blk.0.attn_q.weight", {kEmbd, kEmbd}, false);
    tensor("blk.0.attn_k.weight", {kEmbd, kEmbd}, false);
    tensor("blk.0.attn_v.weight", {kEmbd, kEmbd}, false);
    tensor("blk.0.attn_output.weight", {kEmbd, kEmbd}, false);
    tensor("blk.0.ffn_norm.weight", {kEmbd}, true);
    tensor("blk.0.ffn_gate.weight", {kEmbd, kFf}, false);
    tensor("blk.0.ffn_up.weight", {kEmbd, kFf}, false);
    tensor("blk.0.ffn_down.weight", {kFf, kEmbd}, false);
    if (t.more) t.more(w);
    return w.to_bytes();
}

// ---- where each field of a GGUF file lies (a walk of a valid file) ------------------------------------

struct KvAt {
    std::string key;
    size_t start, type_at, value_at, end;   // start: the key's length field
    uint32_t type;
};
struct TensorAt {
    std::string name;
    size_t start, n_dims_at, dims_at, type_at, offset_at, end;
    uint64_t offset, n_bytes;
};
struct Layout {
    std::vector<KvAt> kvs;
    std::vector<TensorAt> tensors;
    size_t infos_end = 0, data_at = 0;
    const KvAt &kv(const std::string &k) const {
        for (const KvAt &e : kvs)
            if (e.key == k) return e;
        std::fprintf(stderr, "malformed_suite: no key %s\n", k.c_str());
        std::abort();
    }
    const TensorAt &tensor(const std::string &n) const {
        for (const TensorAt &e : tensors)
            if (e.name == n) return e;
        std::fprintf(stderr, "malformed_suite: no tensor %s\n", n.c_str());
        std::abort();
    }
};

template <class T> T get(const Bytes &b, size_t at) {
    T v;
    std::memcpy(&v, b.data() + at, sizeof v);
    return v;
}
template <class T> Bytes put(Bytes b, size_t at, T v) {
    std::memcpy(b.data() + at, &v, sizeof v);
    return b;
}
Bytes cut(Bytes b, size_t n) {
    b.resize(n);
    return b;
}

Layout walk(const Bytes &b) {
    Layout l;
    size_t p = 24;
    auto str = [&]() {
        const uint64_t n = get<uint64_t>(b, p);
        std::string s(reinterpret_cast<const char *>(b.data() + p + 8), n);
        p += 8 + n;
        return s;
    };
    auto scalar_size = [](uint32_t t) -> size_t {
        switch (t) {
        case 0: case 1: case 7: return 1;
        case 2: case 3: return 2;
        case 4: case 5: case 6: return 4;
        case 10: case 11: case 12: return 8;
        default: return 0;
        }
    };
    for (uint64_t i = 0, n = get<uint64_t>(b, 16); i < n; ++i) {
        KvAt k;
        k.start = p;
        k.key = str();
        k.type_at = p;
        k.type = get<uint32_t>(b, p);
        p += 4;
        k.value_at = p;
        if (k.type == 8) {
            str();
        } else if (k.type == 9) {
            const uint32_t et = get<uint32_t>(b, p);
            const uint64_t count = get<uint64_t>(b, p + 4);
            p += 12;
            for (uint64_t e = 0; e < count; ++e) {
                if (et == 8) str();
                else p += scalar_size(et);
            }
        } else {
            p += scalar_size(k.type);
        }
        k.end = p;
        l.kvs.push_back(k);
    }
    const gguf::File f = gguf::File::parse(b.data(), b.size());
    for (uint64_t i = 0, n = get<uint64_t>(b, 8); i < n; ++i) {
        TensorAt t;
        t.start = p;
        t.name = str();
        t.n_dims_at = p;
        const uint32_t nd = get<uint32_t>(b, p);
        t.dims_at = p + 4;
        p += 4 + 8 * nd;
        t.type_at = p;
        t.offset_at = p + 4;
        t.offset = get<uint64_t>(b, p + 4);
        p += 12;
        t.end = p;
        t.n_bytes = f.find_tensor(t.name)->n_bytes;
        l.tensors.push_back(t);
    }
    l.infos_end = p;
    l.data_at = f.data_offset();
    return l;
}

// ---- the cases ----------------------------------------------------------------------------------------

enum class Kind {
    gguf,          // ember_model_load (and vocab-only, and `ember info`): refused by the reader or the tokenizer
    gguf_weights,  // refused by the full load only: the vocabulary alone loads
    state,         // ember_session_restore_file on a session of the tiny model
};

struct Case {
    std::string name;
    Kind kind;
    ember_status expect;
    std::string message;   // a fragment ember_last_error() must contain
    Bytes bytes;
};

// A saved state of the tiny model with `fix` applied and the checksum made right again (so that the
// check behind it is reached), or left as it is.
Bytes restamp(Bytes s) {
    const uint64_t sum = state_checksum(s.data(), s.size() - 8);
    std::memcpy(s.data() + s.size() - 8, &sum, 8);
    return s;
}

std::vector<Case> make_cases(const Bytes &model, const Bytes &state) {
    const Layout L = walk(model);
    std::vector<Case> c;
    auto add = [&](std::string name, Kind k, ember_status st, std::string msg, Bytes b) {
        c.push_back(Case{std::move(name), k, st, std::move(msg), std::move(b)});
    };
    const Kind G = Kind::gguf, W = Kind::gguf_weights, S = Kind::state;
    const ember_status BAD = EMBER_ERR_INVALID_MODEL, UNSUP = EMBER_ERR_UNSUPPORTED, CORRUPT = EMBER_ERR_CORRUPT_DATA;
    const KvAt &arch = L.kv("general.architecture"), &tokens = L.kv("tokenizer.ggml.tokens");
    const KvAt &embd = L.kv("llama.embedding_length");
    const TensorAt &t0 = L.tensors[0], &t1 = L.tensors[1], &tq = L.tensor("blk.0.attn_q.weight");
    const TensorAt &last = L.tensors.back();

    // -- the header
    add("empty.gguf", G, BAD, "empty file", {});
    add("magic-only.gguf", G, BAD, "truncated", cut(model, 4));
    add("bad-magic.gguf", G, BAD, "bad magic", put<uint32_t>(model, 0, 0x58465547));   // "GGFX"
    add("ggml-magic.gguf", G, BAD, "bad magic", put<uint32_t>(model, 0, 0x67676a74));  // an old ggjt file
    add("version-1.gguf", G, BAD, "version 1", put<uint32_t>(model, 4, 1));
    add("version-4.gguf", G, BAD, "unsupported GGUF version 4", put<uint32_t>(model, 4, 4));
    add("version-max.gguf", G, BAD, "unsupported GGUF version", put<uint32_t>(model, 4, 0xFFFFFFFFu));
    add("header-cut-in-counts.gguf", G, BAD, "truncated", cut(model, 12));
    add("tensor-count-2e63.gguf", G, BAD, "tensor count", put<uint64_t>(model, 8, 1ull << 63));
    add("kv-count-2e63.gguf", G, BAD, "kv count", put<uint64_t>(model, 16, 1ull << 63));
    add("tensor-count-plus-1.gguf", G, BAD, "tensor", put<uint64_t>(model, 8, L.tensors.size() + 1));
    add("kv-count-plus-1.gguf", G, BAD, "", put<uint64_t>(model, 16, L.kvs.size() + 1));
    add("counts-swapped.gguf", G, BAD, "", put<uint64_t>(put<uint64_t>(model, 8, L.kvs.size()), 16, L.tensors.size()));

    // -- truncations at every structural boundary (and inside each kind of field)
    // (A file too short for the counts its header gives is refused before its entries are read.)
    add("cut-after-header.gguf", G, BAD, "is impossible for a file of 24 bytes", cut(model, 24));
    add("cut-in-key-length.gguf", G, BAD, "is impossible for a file", cut(model, arch.start + 4));
    add("cut-in-key.gguf", G, BAD, "is impossible for a file", cut(model, arch.start + 10));
    add("cut-before-value-type.gguf", G, BAD, "is impossible for a file", cut(model, arch.type_at));
    add("cut-before-value.gguf", G, BAD, "is impossible for a file", cut(model, arch.value_at));
    add("cut-in-string-value.gguf", G, BAD, "is impossible for a file", cut(model, arch.end - 2));
    add("cut-in-array-header.gguf", G, BAD, "cannot fit in a file", cut(model, tokens.value_at + 6));
    add("cut-in-string-array.gguf", G, BAD, "", cut(model, tokens.end - 3));
    add("cut-after-kvs.gguf", G, BAD, "truncated", cut(model, t0.start));
    add("cut-in-tensor-name.gguf", G, BAD, "tensor name length 17", cut(model, t0.start + 12));
    add("cut-before-n-dims.gguf", G, BAD, "truncated", cut(model, t0.n_dims_at));
    add("cut-in-dims.gguf", G, BAD, "truncated", cut(model, t0.dims_at + 12));
    add("cut-before-tensor-type.gguf", G, BAD, "truncated", cut(model, t0.type_at));
    add("cut-in-tensor-offset.gguf", G, BAD, "truncated", cut(model, t0.offset_at + 3));
    add("cut-after-tensor-infos.gguf", G, BAD, "", cut(model, L.infos_end));
    add("cut-in-padding.gguf", G, BAD, "", cut(model, L.data_at - 1));
    add("cut-at-data-start.gguf", G, BAD, "", cut(model, L.data_at));
    add("cut-in-first-tensor.gguf", G, BAD, "past the end", cut(model, L.data_at + t0.n_bytes / 2));
    add("cut-last-byte.gguf", G, BAD, "past the end", cut(model, model.size() - 1));

    // -- keys and values
    add("key-length-2e62.gguf", G, BAD, "exceeds", put<uint64_t>(model, arch.start, 1ull << 62));
    add("key-length-max.gguf", G, BAD, "exceeds", put<uint64_t>(model, arch.start, ~0ull));
    {
        Bytes b = put<uint64_t>(model, arch.start, 0);
        b.erase(b.begin() + static_cast<std::ptrdiff_t>(arch.start + 8), b.begin() + static_cast<std::ptrdiff_t>(arch.type_at));
        add("key-empty.gguf", G, BAD, "empty", b);
    }
    {
        Bytes b = model;
        b[arch.start + 8 + 3] = 0;   // "gen\0ral.architecture"
        add("key-with-nul.gguf", G, BAD, "NUL", b);
        b = model;
        b[arch.start + 8 + 3] = 0xC3;   // a lead byte followed by ASCII
        add("key-bad-utf8.gguf", G, BAD, "UTF-8", b);
    }
    add("value-type-13.gguf", G, BAD, "unknown", put<uint32_t>(model, arch.type_at, 13));
    add("value-type-max.gguf", G, BAD, "unknown", put<uint32_t>(model, arch.type_at, 0xFFFFFFFFu));
    add("string-length-2e62.gguf", G, BAD, "exceeds", put<uint64_t>(model, arch.value_at, 1ull << 62));
    add("array-count-2e62.gguf", G, BAD, "", put<uint64_t>(model, tokens.value_at + 4, 1ull << 62));
    add("array-of-arrays.gguf", G, BAD, "nested", put<uint32_t>(model, tokens.value_at, 9));
    add("array-elem-type-99.gguf", G, BAD, "unknown", put<uint32_t>(model, tokens.value_at, 99));
    add("token-length-2e62.gguf", G, BAD, "", put<uint64_t>(model, tokens.value_at + 12, 1ull << 62));
    {
        Tweaks t;
        t.more = [](gguf::Writer &w) { w.add_u32("llama.context_length", 64); };
        add("duplicate-key.gguf", G, BAD, "duplicate key", tiny_model(t));
    }
    {
        // A bool of value 2: the u8 key's type id changed to BOOL and its byte to 2.
        Tweaks t;
        t.more = [](gguf::Writer &w) { w.add_u8("general.some_flag", 2); };
        const Bytes b = tiny_model(t);
        const Layout lb = walk(b);
        const KvAt &k = lb.kv("general.some_flag");
        add("bool-of-2.gguf", G, BAD, "neither 0 nor 1", put<uint32_t>(b, k.type_at, 7));
    }
    auto with = [&](std::function<void(gguf::Writer &)> more, std::set<std::string> drop = {}) {
        Tweaks t;
        t.more = std::move(more);
        t.drop = std::move(drop);
        return tiny_model(t);
    };
    add("alignment-0.gguf", G, BAD, "alignment", with([](gguf::Writer &w) { w.add_u32("general.alignment", 0); }));
    add("alignment-3.gguf", G, BAD, "power of two", with([](gguf::Writer &w) { w.add_u32("general.alignment", 3); }));
    add("alignment-string.gguf", G, BAD, "alignment", with([](gguf::Writer &w) { w.add_string("general.alignment", "32"); }));
    add("alignment-2e31.gguf", G, BAD, "", with([](gguf::Writer &w) { w.add_u32("general.alignment", 1u << 31); }));

    // -- known keys of the wrong type or value
    add("architecture-u32.gguf", G, BAD, "general.architecture",
        with([](gguf::Writer &w) { w.add_u32("general.architecture", 1); }, {"general.architecture"}));
    add("architecture-missing.gguf", G, BAD, "general.architecture", with(nullptr, {"general.architecture"}));
    add("architecture-unknown.gguf", W, UNSUP, "not supported",
        with([](gguf::Writer &w) { w.add_string("general.architecture", "gpt-j"); }, {"general.architecture"}));
    add("architecture-bad-utf8.gguf", G, BAD, "string value 'll\\xffama' is not valid UTF-8",
        with([](gguf::Writer &w) { w.add_string("general.architecture", "ll\xff" "ama"); }, {"general.architecture"}));
    add("block-count-string.gguf", W, BAD, "llama.block_count",
        with([](gguf::Writer &w) { w.add_string("llama.block_count", "1"); }, {"llama.block_count"}));
    add("block-count-0.gguf", W, BAD, "layers 0",
        with([](gguf::Writer &w) { w.add_u32("llama.block_count", 0); }, {"llama.block_count"}));
    add("block-count-2e9.gguf", W, BAD, "layers 2000000000",
        with([](gguf::Writer &w) { w.add_u32("llama.block_count", 2000000000u); }, {"llama.block_count"}));
    add("block-count-2-tensors-1.gguf", W, BAD, "blk.1",
        with([](gguf::Writer &w) { w.add_u32("llama.block_count", 2); }, {"llama.block_count"}));
    add("embedding-length-f32.gguf", W, BAD, "llama.embedding_length",
        with([](gguf::Writer &w) { w.add_f32("llama.embedding_length", 16.0f); }, {"llama.embedding_length"}));
    add("embedding-length-negative.gguf", W, BAD, "embedding_length",
        with([](gguf::Writer &w) { w.add_i32("llama.embedding_length", -16); }, {"llama.embedding_length"}));
    add("embedding-length-u64-max.gguf", W, BAD, "embedding_length",
        with([](gguf::Writer &w) { w.add_u64("llama.embedding_length", ~0ull); }, {"llama.embedding_length"}));
    add("embedding-length-32.gguf", W, BAD, "", put<uint32_t>(model, embd.value_at, 32));
    add("head-count-0.gguf", W, BAD, "heads 0/2",
        with([](gguf::Writer &w) { w.add_u32("llama.attention.head_count", 0); }, {"llama.attention.head_count"}));
    add("head-count-3.gguf", W, BAD, "",
        with([](gguf::Writer &w) { w.add_u32("llama.attention.head_count", 3); }, {"llama.attention.head_count"}));
    add("head-count-kv-0.gguf", W, BAD, "heads 2/0",
        with([](gguf::Writer &w) { w.add_u32("llama.attention.head_count_kv", 0); }, {"llama.attention.head_count_kv"}));
    add("head-count-kv-not-dividing.gguf", W, BAD, "",
        with([](gguf::Writer &w) { w.add_u32("llama.attention.head_count_kv", 3); }, {"llama.attention.head_count_kv"}));
    add("context-length-string.gguf", W, BAD, "llama.context_length",
        with([](gguf::Writer &w) { w.add_string("llama.context_length", "64"); }, {"llama.context_length"}));
    add("rms-epsilon-nan.gguf", W, BAD, "epsilon",
        with([](gguf::Writer &w) { w.add_f32("llama.attention.layer_norm_rms_epsilon", std::nanf("")); },
             {"llama.attention.layer_norm_rms_epsilon"}));
    add("rms-epsilon-negative.gguf", W, BAD, "layer_norm_rms_epsilon' = -1",
        with([](gguf::Writer &w) { w.add_f32("llama.attention.layer_norm_rms_epsilon", -1.0f); },
             {"llama.attention.layer_norm_rms_epsilon"}));
    add("rope-base-negative.gguf", W, BAD, "rope.freq_base' = -1 must be positive",
        with([](gguf::Writer &w) { w.add_f32("llama.rope.freq_base", -1.0f); }, {"llama.rope.freq_base"}));
    add("rope-base-zero.gguf", W, BAD, "rope.freq_base' = 0 must be positive",
        with([](gguf::Writer &w) { w.add_f64("llama.rope.freq_base", 0.0); }, {"llama.rope.freq_base"}));
    add("tokens-missing.gguf", G, BAD, "tokenizer.ggml.tokens", with(nullptr, {"tokenizer.ggml.tokens"}));
    add("tokens-u32.gguf", G, BAD, "tokenizer.ggml.tokens",
        with([](gguf::Writer &w) { w.add_u32("tokenizer.ggml.tokens", 12); }, {"tokenizer.ggml.tokens"}));
    add("tokens-array-of-f32.gguf", G, BAD, "tokenizer.ggml.tokens",
        with([](gguf::Writer &w) { w.add_array_f32("tokenizer.ggml.tokens", std::vector<float>(12, 1.0f)); },
             {"tokenizer.ggml.tokens"}));
    add("tokens-bad-utf8.gguf", G, BAD, "UTF-8",
        with([](gguf::Writer &w) {
            std::vector<std::string> t = kTokens;
            t[5] = "\xc3(";
            w.add_array_string("tokenizer.ggml.tokens", t);
        }, {"tokenizer.ggml.tokens"}));
    add("scores-of-strings.gguf", G, BAD, "tokenizer.ggml.scores",
        with([](gguf::Writer &w) { w.add_array_string("tokenizer.ggml.scores", kTokens); }, {"tokenizer.ggml.scores"}));
    add("scores-too-few.gguf", G, BAD, "scores",
        with([](gguf::Writer &w) { w.add_array_f32("tokenizer.ggml.scores", {0.0f, -1.0f}); }, {"tokenizer.ggml.scores"}));
    add("token-type-99.gguf", G, BAD, "type",
        with([](gguf::Writer &w) { w.add_array_i32("tokenizer.ggml.token_type", std::vector<int32_t>(12, 99)); },
             {"tokenizer.ggml.token_type"}));
    add("token-type-too-few.gguf", G, BAD, "token_type",
        with([](gguf::Writer &w) { w.add_array_i32("tokenizer.ggml.token_type", {1, 1}); }, {"tokenizer.ggml.token_type"}));
    add("tokenizer-model-unknown.gguf", G, UNSUP, "tokenizer",
        with([](gguf::Writer &w) { w.add_string("tokenizer.ggml.model", "wordpiece-9"); }, {"tokenizer.ggml.model"}));

    // -- tensor infos
    add("n-dims-5.gguf", G, BAD, "n_dims is 5", put<uint32_t>(model, t0.n_dims_at, 5));
    add("n-dims-0.gguf", G, BAD, "n_dims is 0", put<uint32_t>(model, t0.n_dims_at, 0));
    add("n-dims-max.gguf", G, BAD, "n_dims", put<uint32_t>(model, t0.n_dims_at, 0xFFFFFFFFu));
    add("dim-0.gguf", G, BAD, "dimension 0 is 0", put<int64_t>(model, t0.dims_at, 0));
    add("dim-negative.gguf", G, BAD, "dimension", put<int64_t>(model, t0.dims_at, -16));
    add("dims-overflow.gguf", G, BAD, "overflow",
        put<int64_t>(put<int64_t>(model, t0.dims_at, int64_t{1} << 40), t0.dims_at + 8, int64_t{1} << 40));
    add("dims-bytes-overflow.gguf", G, BAD, "",
        put<int64_t>(put<int64_t>(model, t0.dims_at, int64_t{1} << 31), t0.dims_at + 8, int64_t{1} << 31));
    add("tensor-type-99.gguf", G, BAD, "unknown type id 99", put<uint32_t>(model, t0.type_at, 99));
    add("tensor-type-q8-misaligned-row.gguf", G, BAD, "block size", put<uint32_t>(model, t1.type_at, 8));   // Q8_0, ne[0] 16
    add("tensor-name-length-2e62.gguf", G, BAD, "exceeds", put<uint64_t>(model, t0.start, 1ull << 62));
    add("tensor-name-empty.gguf", G, BAD, "empty",
        [&] {
            Bytes b = put<uint64_t>(model, t0.start, 0);
            b.erase(b.begin() + static_cast<std::ptrdiff_t>(t0.start + 8), b.begin() + static_cast<std::ptrdiff_t>(t0.n_dims_at));
            return b;
        }());
    {
        Bytes b = model;
        b[t0.start + 8 + 2] = 0;
        add("tensor-name-with-nul.gguf", G, BAD, "NUL", b);
        b = model;
        b[t0.start + 8 + 2] = 0xFF;
        add("tensor-name-bad-utf8.gguf", G, BAD, "UTF-8", b);
    }
    {
        // Two tensors named alike: attn_k's name overwritten with attn_q's (of the same length).
        Bytes b = model;
        const TensorAt &a = L.tensor("blk.0.attn_q.weight"), &k = L.tensor("blk.0.attn_k.weight");
        std::memcpy(b.data() + k.start + 8, b.data() + a.start + 8, a.name.size());
        add("duplicate-tensor-name.gguf", G, BAD, "duplicate tensor name", b);
    }

    // -- tensor data
    add("offset-misaligned.gguf", G, BAD, "alignment", put<uint64_t>(model, t1.offset_at, t1.offset + 4));
    add("offset-past-end.gguf", G, BAD, "past the end", put<uint64_t>(model, t1.offset_at, model.size()));
    add("offset-max.gguf", G, BAD, "", put<uint64_t>(model, t1.offset_at, ~0ull & ~uint64_t{31}));
    add("overlap-same-offset.gguf", G, BAD, "", put<uint64_t>(model, tq.offset_at, L.tensor("blk.0.attn_k.weight").offset));
    add("overlap-partial.gguf", G, BAD, "", put<uint64_t>(model, last.offset_at, last.offset - 32));
    add("tensor-beyond-data.gguf", G, BAD, "past the end",
        put<uint64_t>(model, last.offset_at, last.offset + ((model.size() - L.data_at - last.offset) / 32 + 1) * 32));

    // -- the architecture against the tensors
    {
        Tweaks t;
        t.drop = {"blk.0.attn_q.weight"};
        add("tensor-missing.gguf", W, BAD, "blk.0.attn_q.weight", tiny_model(t));
        t = {};
        t.dims["blk.0.attn_k.weight"] = {kEmbd, 8};
        add("attn-k-shape.gguf", W, BAD, "blk.0.attn_k.weight", tiny_model(t));
        t = {};
        t.dims["token_embd.weight"] = {kEmbd + 16, static_cast<int64_t>(kTokens.size())};
        add("embd-width.gguf", W, BAD, "token_embd.weight", tiny_model(t));
        t = {};
        t.dims["token_embd.weight"] = {kEmbd, 20};
        t.dims["output.weight"] = {kEmbd, 20};
        add("embd-rows-vs-vocab.gguf", W, BAD, "tokens", tiny_model(t));
        t = {};
        t.dims["blk.0.ffn_down.weight"] = {kFf * 2, kEmbd};
        add("ffn-down-shape.gguf", W, BAD, "blk.0.ffn_down.weight", tiny_model(t));
        t = {};
        t.dims["output_norm.weight"] = {kEmbd, 2};
        add("norm-2d.gguf", W, BAD, "output_norm.weight", tiny_model(t));
        t = {};
        t.dims["blk.0.attn_norm.weight"] = {kEmbd, 1, 1, 1};
        add("norm-4d-ones.gguf", W, BAD, "blk.0.attn_norm.weight", tiny_model(t));
    }

    // -- saved states (of a session on the tiny model)
    add("state-empty.state", S, CORRUPT, "", {});
    add("state-short-header.state", S, CORRUPT, "", cut(state, 47));
    add("state-bad-magic.state", S, CORRUPT, "bad magic", put<uint8_t>(state, 0, 'X'));
    add("state-gguf-file.state", S, CORRUPT, "bad magic", model);
    add("state-version-2.state", S, CORRUPT, "version 2", restamp(put<uint32_t>(state, 8, 2)));
    add("state-version-99.state", S, CORRUPT, "version 99", restamp(put<uint32_t>(state, 8, 99)));
    add("state-header-size.state", S, CORRUPT, "header size", restamp(put<uint32_t>(state, 12, 64)));
    add("state-other-model.state", S, CORRUPT, "different model", restamp(put<uint64_t>(state, 16, get<uint64_t>(state, 16) ^ 1)));
    add("state-tokens-2e31.state", S, CORRUPT, "", restamp(put<uint32_t>(state, 24, 1u << 31)));
    add("state-tokens-plus-1.state", S, CORRUPT, "", restamp(put<uint32_t>(state, 24, get<uint32_t>(state, 24) + 1)));
    add("state-vocab-changed.state", S, CORRUPT, "", restamp(put<uint32_t>(state, 28, 1000)));
    add("state-kv-width.state", S, CORRUPT, "", restamp(put<uint32_t>(state, 32, get<uint32_t>(state, 32) * 2)));
    add("state-kv-type.state", S, CORRUPT, "KV cache", restamp(put<uint32_t>(state, 40, 8)));
    add("state-kv-type-99.state", S, CORRUPT, "KV cache", restamp(put<uint32_t>(state, 40, 99)));
    add("state-token-outside-vocab.state", S, CORRUPT, "outside the vocabulary", restamp(put<int32_t>(state, 48, 5000)));
    add("state-token-negative.state", S, CORRUPT, "outside the vocabulary", restamp(put<int32_t>(state, 48, -1)));
    add("state-checksum.state", S, CORRUPT, "checksum", put<uint8_t>(state, state.size() - 1, state.back() ^ 0x40));
    add("state-cut-1.state", S, CORRUPT, "", cut(state, state.size() - 1));
    add("state-trailing-byte.state", S, CORRUPT, "", [&] { Bytes b = state; b.push_back(0); return b; }());
    add("state-flipped-kv.state", S, CORRUPT, "checksum", put<uint8_t>(state, 60, state[60] ^ 1));
    return c;
}

// ---- running them ------------------------------------------------------------------------------------

bool write_file(const std::string &path, const Bytes &b) {
    FILE *f = std::fopen(path.c_str(), "wb");
    if (!f) return false;
    const bool ok = b.empty() || std::fwrite(b.data(), 1, b.size(), f) == b.size();
    return std::fclose(f) == 0 && ok;
}

// Peak resident memory of this process (VmHWM), in KiB.
long peak_rss_kib() {
    FILE *f = std::fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kib = -1;
    while (std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
    std::fclose(f);
    return kib;
}

// `ember info -m PATH`: its exit status and stderr.
int run_info(const std::string &cli, const std::string &path, std::string *err) {
    const std::string cmd = "'" + cli + "' info -m '" + path + "' 2>&1 >/dev/null";
    FILE *p = popen(cmd.c_str(), "r");
    if (!p) return -1;
    char buf[4096];
    size_t k;
    while ((k = std::fread(buf, 1, sizeof buf, p)) > 0) err->append(buf, k);
    const int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

ember_status load(const std::string &path, bool vocab_only) {
    ember_model_params mp;
    ember_model_params_init(&mp);
    mp.vocab_only = vocab_only;
    ember_model *m = reinterpret_cast<ember_model *>(1);
    const ember_status st = ember_model_load(path.c_str(), &mp, &m);
    if (st == EMBER_OK) ember_model_free(m);
    else CHECK(m == nullptr, "%s: *out not NULL after a failed load", path.c_str());
    return st;
}

// Checks one refusal: the status, a message with the fragment, and the time it took.
void check_refusal(const Case &k, const char *how, ember_status st, double seconds) {
    const char *msg = ember_last_error();
    CHECK(st == k.expect, "%s (%s): status %s, expected %s: %s", k.name.c_str(), how, ember_status_string(st),
          ember_status_string(k.expect), st == EMBER_OK ? "(accepted)" : msg);
    if (st == EMBER_OK) return;
    CHECK(msg && *msg && std::strstr(msg, k.message.c_str()), "%s (%s): message '%s' lacks '%s'", k.name.c_str(), how,
          msg ? msg : "(null)", k.message.c_str());
    CHECK(seconds < 2.0, "%s (%s): %.2f s", k.name.c_str(), how, seconds);
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

} // namespace

int main(int argc, char **argv) {
    const std::string write_dir = argc == 3 && !std::strcmp(argv[1], "--write") ? argv[2] : "";
    const char *tmp = std::getenv("TMPDIR");
    const std::string dir = !write_dir.empty() ? write_dir
                                              : std::string(tmp && *tmp ? tmp : "/tmp") + "/ember-malformed-" +
                                                    std::to_string(getpid());
    mkdir(dir.c_str(), 0700);

    // The valid files first: the model loads and runs, and a state saved from it restores.
    const Bytes model = tiny_model();
    const std::string model_path = dir + "/valid.gguf", state_path = dir + "/valid.state";
    if (!write_file(model_path, model)) return std::fprintf(stderr, "FAIL: cannot write %s\n", model_path.c_str()), 1;
    ember_model *m = nullptr;
    if (ember_model_load(model_path.c_str(), nullptr, &m) != EMBER_OK)
        return std::fprintf(stderr, "FAIL: the valid tiny model does not load: %s\n", ember_last_error()), 1;
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.n_ctx = 32;
    sp.n_threads = 1;
    ember_session *s = nullptr;
    const ember_token prompt[] = {1, 4, 5, 6, 9};
    if (ember_session_create(m, &sp, &s) != EMBER_OK || ember_session_feed(s, prompt, 5) != EMBER_OK ||
        ember_session_save_file(s, state_path.c_str()) != EMBER_OK || ember_session_restore_file(s, state_path.c_str()) != EMBER_OK)
        return std::fprintf(stderr, "FAIL: a session on the valid tiny model: %s\n", ember_last_error()), 1;
    Bytes state;
    {
        FILE *f = std::fopen(state_path.c_str(), "rb");
        char buf[4096];
        size_t k;
        while (f && (k = std::fread(buf, 1, sizeof buf, f)) > 0) state.insert(state.end(), buf, buf + k);
        if (f) std::fclose(f);
    }

    const std::vector<Case> cases = make_cases(model, state);
    std::set<std::string> names;
    for (const Case &k : cases) {
        CHECK(names.insert(k.name).second, "two cases named %s", k.name.c_str());
        for (const Case &o : cases)
            CHECK(&o == &k || o.bytes != k.bytes || o.kind != k.kind, "%s and %s are the same file", k.name.c_str(), o.name.c_str());
    }
    if (!write_dir.empty()) {
        for (const Case &k : cases) CHECK(write_file(dir + "/" + k.name, k.bytes), "cannot write %s", k.name.c_str());
        std::printf("%zu files written to %s (with valid.gguf and valid.state)\n", cases.size(), dir.c_str());
        return g_failures ? 1 : 0;
    }

    const char *cli = std::getenv("EMBER_CLI");
    if (!cli || access(cli, X_OK) != 0) {
        std::printf("note: EMBER_CLI not set: `ember info` is not tried\n");
        cli = nullptr;
    }
    const long rss0 = peak_rss_kib();
    const auto t_all = Clock::now();
    size_t n_gguf = 0, n_state = 0;
    for (const Case &k : cases) {
        const std::string path = dir + "/" + k.name;
        if (!write_file(path, k.bytes)) {
            CHECK(false, "cannot write %s", path.c_str());
            continue;
        }
        auto t0 = Clock::now();
        if (k.kind == Kind::state) {
            ++n_state;
            const ember_status st = ember_session_restore_file(s, path.c_str());
            check_refusal(k, "restore_file", st, seconds_since(t0));
        } else {
            ++n_gguf;
            ember_status st = load(path, false);
            check_refusal(k, "load", st, seconds_since(t0));
            if (k.kind == Kind::gguf) {
                t0 = Clock::now();
                st = load(path, true);
                check_refusal(k, "vocab-only load", st, seconds_since(t0));
            }
            if (cli && k.expect != EMBER_ERR_UNSUPPORTED) {
                std::string err;
                const int rc = run_info(cli, path, &err);
                CHECK(rc == 1 && err.find(k.message) != std::string::npos && err.find("ember:") != std::string::npos,
                      "%s: `ember info` exited %d: %s", k.name.c_str(), rc, err.c_str());
            }
        }
        std::printf("  %-36s %-26s %s\n", k.name.c_str(), ember_status_string(k.expect), ember_last_error());
        unlink(path.c_str());
    }
    // The session is as it was: the last good restore is still there, and it goes on.
    const ember_token next = 7;
    CHECK(ember_session_restore_file(s, state_path.c_str()) == EMBER_OK && ember_session_feed(s, &next, 1) == EMBER_OK,
          "the valid state after the suite: %s", ember_last_error());
    const long grown = peak_rss_kib() - rss0;
    std::printf("%zu model files and %zu state files refused in %.2f s; peak RSS grew %ld KiB\n", n_gguf, n_state,
                seconds_since(t_all), grown);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    CHECK(grown < 64 * 1024, "peak RSS grew %ld KiB while refusing the files", grown);
#endif
    CHECK(cases.size() >= 60, "only %zu files", cases.size());
    ember_session_free(s);
    ember_model_free(m);
    unlink(model_path.c_str());
    unlink(state_path.c_str());
    rmdir(dir.c_str());
    std::printf("%s: %d failure(s)\n", g_failures ? "FAILED" : "passed", g_failures);
    return g_failures ? 1 : 0;
}
