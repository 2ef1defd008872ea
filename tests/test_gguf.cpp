// test_gguf.cpp — the GGUF reader and writer: round trips, real files, malformed files, mutations.
#include "core/error.hpp"
#include "core/mapped_file.hpp"
#include "gguf/gguf.hpp"

#include <chrono>
#include <cinttypes>
#include <functional>
#include <unistd.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "test_util.h"

using namespace ember;
using namespace ember::gguf;

namespace {

using Bytes = std::vector<uint8_t>;

// ---- helpers ----------------------------------------------------------------------------------------

Bytes pattern_bytes(size_t n, uint8_t seed) {
    Bytes b(n);
    for (size_t k = 0; k < n; ++k) b[k] = static_cast<uint8_t>(seed + k * 7);
    return b;
}

// Parses a copy in an allocation of exactly n bytes, so ASan sees any read past the end.
template <typename Fn> void with_exact_copy(const Bytes &bytes, size_t n, Fn &&fn) {
    std::unique_ptr<uint8_t[]> buf(new uint8_t[n]);
    if (n) std::memcpy(buf.get(), bytes.data(), n);
    File f = File::parse(buf.get(), n);
    fn(f);
}

// Parses and expects INVALID_MODEL with a message containing `word`.
void expect_invalid(const Bytes &bytes, const char *word, const char *what) {
    try {
        with_exact_copy(bytes, bytes.size(), [](const File &) {});
    } catch (const Error &e) {
        printf("  %-28s -> %s\n", what, e.what());
        assert_int_equal(e.status(), EMBER_ERR_INVALID_MODEL);
        assert_true(std::strlen(e.what()) > 0);
        if (!std::strstr(e.what(), word)) {
            printf("  expected the message to contain '%s'\n", word);
            fail_msg("see above");
        }
        return;
    }
    printf("  %s: parsed without error\n", what);
    fail_msg("see above");
}

size_t find_bytes(const Bytes &b, const std::string &needle) {
    for (size_t k = 0; k + needle.size() <= b.size(); ++k) {
        if (std::memcmp(b.data() + k, needle.data(), needle.size()) == 0) return k;
    }
    printf("  '%s' not found in the file\n", needle.c_str());
    fail_msg("see above");
    return 0;
}

// Offset of the first byte after a key or tensor name (its value type, or its n_dims). The 8-byte
// length prefix is included in the search so that a name is not matched inside a longer one.
size_t after_name(const Bytes &b, const std::string &name) {
    std::string prefixed(8, '\0');
    uint64_t len = name.size();
    std::memcpy(prefixed.data(), &len, 8);
    return find_bytes(b, prefixed + name) + 8 + name.size();
}

template <typename T> void patch(Bytes &b, size_t pos, T v) {
    assert_true(pos + sizeof v <= b.size());
    std::memcpy(b.data() + pos, &v, sizeof v);
}

template <typename T> T peek(const Bytes &b, size_t pos) {
    T v;
    std::memcpy(&v, b.data() + pos, sizeof v);
    return v;
}

// Tensor info fields: n_dims at after_name; dims follow; then type and offset.
size_t tensor_dim_pos(const Bytes &b, const std::string &name, uint32_t d) { return after_name(b, name) + 4 + 8 * d; }
size_t tensor_type_pos(const Bytes &b, const std::string &name) {
    size_t p = after_name(b, name);
    return p + 4 + 8 * peek<uint32_t>(b, p);
}
size_t tensor_offset_pos(const Bytes &b, const std::string &name) { return tensor_type_pos(b, name) + 4; }

void expect_error_status(ember_status status, const std::function<void()> &fn) {
    try {
        fn();
    } catch (const Error &e) {
        assert_int_equal(e.status(), status);
        return;
    }
    fail_msg("see above");
}

// A small valid file: a few kvs and two tensors (F32 8x2, Q8_0 32x2); the last byte is tensor data.
Bytes small_file() {
    Writer w;
    w.add_string("general.architecture", "llama");
    w.add_u32("llama.context_length", 128);
    w.add_array_f32("scores", {0.5f, -1.0f, 2.0f});
    w.add_array_string("tokens", {"a", "bc", ""});
    Bytes a = pattern_bytes(8 * 2 * 4, 1), q = pattern_bytes(2 * 34, 2);
    w.add_tensor("w.f32", DType::F32, {8, 2}, a.data(), a.size());
    w.add_tensor("w.q8", DType::Q8_0, {32, 2}, q.data(), q.size());
    return w.to_bytes();
}

// ---- 1. round trip ----------------------------------------------------------------------------------

struct WrittenTensor {
    std::string name;
    DType type;
    std::vector<int64_t> dims;
    Bytes data;
};

size_t tensor_bytes(DType t, const std::vector<int64_t> &dims) {
    uint64_t n = 1;
    for (int64_t d : dims) n *= static_cast<uint64_t>(d);
    return n / dtype_info(t).block_size * dtype_info(t).block_bytes;
}

void round_trip(uint32_t version, uint32_t alignment) {
    Writer w;
    if (version != 3) w.set_version(version);
    if (alignment != 32) w.set_alignment(alignment);
    w.add_u8("t.u8", 200);
    w.add_i8("t.i8", -100);
    w.add_u16("t.u16", 60000);
    w.add_i16("t.i16", -30000);
    w.add_u32("t.u32", 4000000000u);
    w.add_i32("t.i32", -2000000000);
    w.add_u64("t.u64", 1ull << 40);
    w.add_u64("t.u64_big", std::numeric_limits<uint64_t>::max());
    w.add_i64("t.i64", -(1ll << 50));
    w.add_f32("t.f32", 1.5f);
    w.add_f64("t.f64", -2.25e100);
    w.add_bool("t.true", true);
    w.add_bool("t.false", false);
    w.add_string("t.str", "h\xc3\xa9llo");
    w.add_string("t.empty", "");
    std::vector<std::string> strs = {"<s>", "", "\xe2\x96\x81the", std::string(300, 'x')};
    w.add_array_string("t.strs", strs);
    std::vector<float> fl = {0.0f, -1.25f, 3e30f};
    w.add_array_f32("t.f32s", fl);
    std::vector<int32_t> in = {-1, 0, 2147483647};
    w.add_array_i32("t.i32s", in);
    w.add_array_i32("t.empty_arr", {});

    std::vector<WrittenTensor> written = {
        {"f32.1d", DType::F32, {7}, {}},
        {"f16.2d", DType::F16, {3, 5}, {}},
        {"q8.3d", DType::Q8_0, {64, 2, 3}, {}},
        {"q4.4d", DType::Q4_0, {32, 2, 1, 3}, {}},
        {"bf16.2d", DType::BF16, {9, 1}, {}},
    };
    uint8_t seed = 10;
    for (WrittenTensor &t : written) {
        t.data = pattern_bytes(tensor_bytes(t.type, t.dims), seed++);
        w.add_tensor(t.name, t.type, t.dims, t.data.data(), t.data.size());
    }

    Bytes bytes = w.to_bytes();
    with_exact_copy(bytes, bytes.size(), [&](const File &f) {
        assert_int_equal(f.version(), version);
        assert_int_equal(f.alignment(), alignment);
        assert_int_equal(f.data_offset() % alignment, 0);
        assert_int_equal(f.kvs().size(), 19 + (alignment != 32 ? 1 : 0));

        assert_int_equal(*f.get_int("t.u8"), 200);
        assert_int_equal(*f.get_int("t.i8"), -100);
        assert_int_equal(*f.get_int("t.u16"), 60000);
        assert_int_equal(*f.get_int("t.i16"), -30000);
        assert_int_equal(*f.get_int("t.u32"), 4000000000ll);
        assert_int_equal(*f.get_int("t.i32"), -2000000000ll);
        assert_int_equal(*f.get_int("t.u64"), 1ll << 40);
        assert_true(*f.get_int("t.i64") == -(1ll << 50));
        assert_int_equal(f.find("t.u64_big")->value.u, std::numeric_limits<uint64_t>::max());
        assert_true(*f.get_float("t.f32") == 1.5);
        assert_true(*f.get_float("t.f64") == -2.25e100);
        assert_true(*f.get_float("t.i8") == -100.0);  // integers convert to double
        assert_true(*f.get_float("t.u32") == 4e9);
        assert_true(*f.get_bool("t.true"));
        assert_false(*f.get_bool("t.false"));
        assert_true(*f.get_string("t.str") == "h\xc3\xa9llo");
        assert_true(f.get_string("t.empty")->empty());
        assert_true(f.find("t.u8")->value.is_integer());
        assert_true(f.find("t.f64")->value.is_float());
        assert_false(f.find("t.true")->value.is_integer());

        // Absent keys give nothing; wrong types throw naming the key and both types.
        assert_false(f.get_int("nope").has_value());
        assert_null(f.get_array("nope"));
        assert_null(f.find_tensor("nope"));
        expect_error_status(EMBER_ERR_INVALID_MODEL, [&] { (void)f.get_int("t.u64_big"); });
        try {
            (void)f.get_string("t.u32");
            fail_msg("see above");
        } catch (const Error &e) {
            assert_non_null(std::strstr(e.what(), "t.u32"));
            assert_non_null(std::strstr(e.what(), "u32"));
            assert_non_null(std::strstr(e.what(), "string"));
        }
        expect_error_status(EMBER_ERR_INVALID_MODEL, [&] { (void)f.get_bool("t.u8"); });
        expect_error_status(EMBER_ERR_INVALID_MODEL, [&] { (void)f.get_int("t.f32"); });
        expect_error_status(EMBER_ERR_INVALID_MODEL, [&] { (void)f.get_float("t.str"); });
        expect_error_status(EMBER_ERR_INVALID_MODEL, [&] { (void)f.get_array("t.str"); });

        const Value *a = f.get_array("t.strs");
        assert_non_null(a);
        assert_int_equal(a->elem_type, ValueType::STRING);
        assert_int_equal(a->count, strs.size());
        assert_int_equal(a->strs.size(), strs.size());
        for (size_t k = 0; k < strs.size(); ++k) assert_true(a->strs[k] == strs[k]);
        a = f.get_array("t.f32s");
        assert_int_equal(a->elem_type, ValueType::F32);
        assert_int_equal(a->count, fl.size());
        for (size_t k = 0; k < fl.size(); ++k) assert_true(a->array_float(k) == fl[k]);
        a = f.get_array("t.i32s");
        assert_int_equal(a->elem_type, ValueType::I32);
        for (size_t k = 0; k < in.size(); ++k) assert_true(a->array_int(k) == in[k]);
        assert_true(a->array_float(0) == -1.0);
        expect_error_status(EMBER_ERR_INVALID_MODEL, [&] { (void)a->array_int(in.size()); });
        assert_int_equal(f.get_array("t.empty_arr")->count, 0);

        assert_int_equal(f.tensors().size(), written.size());
        for (size_t k = 0; k < written.size(); ++k) {
            const WrittenTensor &wt = written[k];
            const TensorInfo *t = f.find_tensor(wt.name);
            assert_non_null(t);
            assert_ptr_equal(t, &f.tensors()[k]);  // file order is kept
            assert_int_equal(t->type, wt.type);
            assert_int_equal(t->n_dims, wt.dims.size());
            uint64_t n = 1;
            for (size_t d = 0; d < 4; ++d) {
                int64_t expect = d < wt.dims.size() ? wt.dims[d] : 1;
                assert_int_equal(t->ne[d], expect);
                n *= static_cast<uint64_t>(expect);
            }
            assert_int_equal(t->n_elements, n);
            assert_int_equal(t->offset % alignment, 0);
            assert_int_equal(t->n_bytes, wt.data.size());
            assert_memory_equal(t->data, wt.data.data(), wt.data.size());
        }
    });
}

void test_round_trip_v3(void **) { round_trip(3, 32); }
void test_round_trip_v2_align64(void **) { round_trip(2, 64); }

void test_writer_checks(void **) {
    Writer w;
    float x[4] = {};
    expect_error_status(EMBER_ERR_INVALID_ARGUMENT, [&] { w.add_tensor("t", DType::F32, {5}, x, sizeof x); });
    expect_error_status(EMBER_ERR_INVALID_ARGUMENT, [&] { w.add_tensor("t", DType::Q8_0, {16}, x, sizeof x); });
    expect_error_status(EMBER_ERR_INVALID_ARGUMENT, [&] { w.add_tensor("t", DType::F32, {}, x, 0); });
    expect_error_status(EMBER_ERR_INVALID_ARGUMENT, [&] { w.add_tensor("t", DType::F32, {2, 0}, x, 0); });
    expect_error_status(EMBER_ERR_INVALID_ARGUMENT, [&] { w.set_alignment(48); });
    w.add_tensor("t", DType::F32, {4}, x, sizeof x);
    expect_error_status(EMBER_ERR_IO, [&] { w.write_file("/nonexistent-dir/x.gguf"); });

    // write_file writes exactly what to_bytes returns.
    char path[] = "/tmp/test_gguf_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    w.write_file(path);
    {
        MappedFile m(path);
        Bytes expect = w.to_bytes();
        assert_int_equal(m.size(), expect.size());
        assert_memory_equal(m.data(), expect.data(), expect.size());
        File f = File::parse(m.data(), m.size());
        assert_int_equal(f.tensors().size(), 1);
    }
    unlink(path);
}

// ---- 2. real files ----------------------------------------------------------------------------------

void check_model(const char *relative, size_t n_tensors, int64_t n_embd, int64_t n_vocab, void **state) {
    const char *path = test_shared_model(relative);
    if (!path) {
        printf("SKIP: %s not found under $EMBER_SHARED_MODELS\n", relative);
        skip();
    }
    MappedFile m(path);
    File f = File::parse(m.data(), m.size());
    assert_int_equal(f.version(), 3);
    assert_int_equal(f.tensors().size(), n_tensors);
    assert_true(*f.get_string("general.architecture") == "llama");
    assert_int_equal(*f.get_int("llama.embedding_length"), n_embd);
    const TensorInfo *emb = f.find_tensor("token_embd.weight");
    assert_non_null(emb);
    assert_int_equal(emb->n_dims, 2);
    assert_int_equal(emb->ne[0], n_embd);
    assert_int_equal(emb->ne[1], n_vocab);
    const Value *tokens = f.get_array("tokenizer.ggml.tokens");
    assert_non_null(tokens);
    assert_int_equal(tokens->elem_type, ValueType::STRING);
    assert_int_equal(tokens->count, n_vocab);
    for (const TensorInfo &t : f.tensors()) {
        assert_true(t.data >= m.data() + f.data_offset());
        assert_true(t.data + t.n_bytes <= m.data() + m.size());
    }
}

void test_stories260K(void **state) { check_model("stories260K/stories260K.gguf", 48, 64, 512, state); }
void test_stories15M_q8_0(void **state) { check_model("stories15M/stories15M-q8_0.gguf", 57, 288, 32000, state); }

void test_vocab_files(void **) {
    const char *names[] = {"gpt-2", "llama-bpe", "llama-spm", "phi-3", "qwen2"};
    int found = 0;
    for (const char *name : names) {
        std::string rel = std::string("ggml-vocab/ggml-vocab-") + name + ".gguf";
        const char *path = test_shared_model(rel.c_str());
        if (!path) {
            printf("  %s not found\n", rel.c_str());
            continue;
        }
        ++found;
        MappedFile m(path);
        File f = File::parse(m.data(), m.size());
        assert_int_equal(f.tensors().size(), 0);
        assert_true(f.get_string("tokenizer.ggml.model").has_value());
        const Value *tokens = f.get_array("tokenizer.ggml.tokens");
        assert_non_null(tokens);
        assert_true(tokens->count > 0);
        printf("  %s: %zu kvs, %" PRIu64 " tokens\n", name, f.kvs().size(), tokens->count);
    }
    if (!found) {
        printf("SKIP: no ggml-vocab/*.gguf under $EMBER_SHARED_MODELS\n");
        skip();
    }
}

// The largest vocabulary (151k strings, 6 MB) must parse quickly: best of 3 against a generous bound.
void test_parse_speed(void **) {
    const char *path = test_shared_model("ggml-vocab/ggml-vocab-qwen2.gguf");
    if (!path) {
        printf("SKIP: ggml-vocab/ggml-vocab-qwen2.gguf not found\n");
        skip();
    }
    MappedFile m(path);
    double best_ms = 1e9;
    for (int rep = 0; rep < 3; ++rep) {
        auto t0 = std::chrono::steady_clock::now();
        File f = File::parse(m.data(), m.size());
        auto t1 = std::chrono::steady_clock::now();
        assert_true(f.get_array("tokenizer.ggml.tokens")->count > 150000);
        best_ms = std::min(best_ms, std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    printf("  qwen2 vocab parsed in %.2f ms\n", best_ms);
#if defined(__SANITIZE_ADDRESS__)
    assert_true(best_ms < 1000.0);
#else
    assert_true(best_ms < 100.0);
#endif
}

// ---- 3. malformed files -----------------------------------------------------------------------------

void test_bad_header(void **) {
    expect_invalid({}, "empty", "empty file");
    Bytes good = small_file();

    Bytes b = good;
    b[0] = 'X';
    expect_invalid(b, "magic", "bad magic");
    b = good;
    patch<uint32_t>(b, 4, 1);
    expect_invalid(b, "version 1", "version 1");
    patch<uint32_t>(b, 4, 4);
    expect_invalid(b, "version 4", "version 4");
    b = good;
    patch<uint64_t>(b, 8, 1ull << 62);
    expect_invalid(b, "impossible", "tensor count 2^62");
    b = good;
    patch<uint64_t>(b, 16, 1ull << 62);
    expect_invalid(b, "impossible", "kv count 2^62");
    b = good;
    patch<uint64_t>(b, 16, ~0ull);
    expect_invalid(b, "impossible", "kv count 2^64-1");
    // Counts that are each possible alone but not together.
    b = good;
    patch<uint64_t>(b, 8, (b.size() - 24) / 33);
    patch<uint64_t>(b, 16, (b.size() - 24) / 14);
    expect_invalid(b, "cannot fit", "both counts large");
}

void test_truncation_everywhere(void **) {
    Bytes good = small_file();
    with_exact_copy(good, good.size(), [](const File &f) { assert_int_equal(f.tensors().size(), 2); });
    int n_truncated = 0;
    for (size_t n = 0; n < good.size(); ++n) {
        try {
            with_exact_copy(good, n, [](const File &) {});
            printf("  prefix of %zu bytes parsed\n", n);
            fail_msg("see above");
        } catch (const Error &e) {
            assert_int_equal(e.status(), EMBER_ERR_INVALID_MODEL);
            assert_true(std::strlen(e.what()) > 0);
            if (std::strstr(e.what(), "truncated")) ++n_truncated;
        }
    }
    // Most prefixes end inside a field; the rest inside the data, or where a length exceeds what is left.
    assert_true(n_truncated > 0);
    printf("  %zu prefixes rejected (%d as truncated)\n", good.size(), n_truncated);
}

void test_bad_kvs(void **) {
    Bytes good = small_file();
    size_t arch = after_name(good, "general.architecture");  // u32 type, then u64 length + "llama"

    Bytes b = good;
    patch<uint64_t>(b, arch + 4, 1ull << 60);
    expect_invalid(b, "length", "huge string length");
    b = good;
    patch<uint64_t>(b, arch + 4, ~0ull);
    expect_invalid(b, "length", "string length 2^64-1");
    b = good;
    patch<uint64_t>(b, 24, 1ull << 40);  // first key's own length
    expect_invalid(b, "length", "huge key length");
    b = good;
    patch<uint32_t>(b, arch, 13);
    expect_invalid(b, "unknown value type 13", "unknown value type");

    size_t scores = after_name(good, "scores");  // u32 ARRAY, u32 elem type, u64 count
    b = good;
    patch<uint32_t>(b, scores + 4, 9);
    expect_invalid(b, "nested", "nested array");
    b = good;
    patch<uint32_t>(b, scores + 4, 77);
    expect_invalid(b, "unknown array element type", "unknown array element type");
    b = good;
    patch<uint64_t>(b, scores + 8, 1ull << 62);  // * 4 bytes overflows 64 bits
    expect_invalid(b, "exceeds", "array byte size overflow");
    b = good;
    patch<uint64_t>(b, scores + 8, 1000);
    expect_invalid(b, "exceeds", "array past the end");
    size_t tokens = after_name(good, "tokens");
    b = good;
    patch<uint64_t>(b, tokens + 8, 1ull << 61);
    expect_invalid(b, "cannot fit", "string array count");

    Writer w;
    w.add_u32("k", 1);
    w.add_u32("k", 2);
    expect_invalid(w.to_bytes(), "duplicate", "duplicate key");
    Writer e;
    e.add_u32("", 1);
    expect_invalid(e.to_bytes(), "empty", "empty key");
    Writer u;
    u.add_u32("bad\xff", 1);
    expect_invalid(u.to_bytes(), "UTF-8", "key not UTF-8");
    Writer bb;
    bb.add_bool("flag", true);
    b = bb.to_bytes();
    b.back() = 2;
    expect_invalid(b, "neither 0 nor 1", "bool value 2");
}

void test_bad_alignment(void **) {
    for (uint32_t a : {3u, 0u, 48u}) {
        Writer w;
        w.add_u32("general.alignment", a);
        expect_invalid(w.to_bytes(), "power of two", "alignment not a power of two");
    }
    Writer w;
    w.add_u64("general.alignment", 32);
    expect_invalid(w.to_bytes(), "u32", "alignment of type u64");
    Writer s;
    s.add_string("general.alignment", "32");
    expect_invalid(s.to_bytes(), "u32", "alignment of type string");
}

void test_bad_tensors(void **) {
    Bytes good = small_file();

    Bytes b = good;
    patch<uint32_t>(b, after_name(b, "w.f32"), 0);
    expect_invalid(b, "n_dims", "n_dims 0");
    b = good;
    patch<uint32_t>(b, after_name(b, "w.f32"), 5);
    expect_invalid(b, "n_dims", "n_dims 5");
    b = good;
    patch<uint64_t>(b, tensor_dim_pos(b, "w.f32", 1), 0);
    expect_invalid(b, "dimension 1 is 0", "zero dim");
    b = good;
    patch<uint64_t>(b, tensor_dim_pos(b, "w.f32", 0), ~0ull);  // -1 as int64
    expect_invalid(b, "dimension 0", "negative dim");
    b = good;
    patch<uint64_t>(b, tensor_dim_pos(b, "w.f32", 0), (1ull << 62) + 1);
    expect_invalid(b, "2^62", "dim > 2^62");
    b = good;
    patch<uint64_t>(b, tensor_dim_pos(b, "w.f32", 0), 1ull << 40);
    patch<uint64_t>(b, tensor_dim_pos(b, "w.f32", 1), 1ull << 40);
    expect_invalid(b, "overflow", "dim product overflow");
    b = good;
    patch<uint64_t>(b, tensor_dim_pos(b, "w.f32", 0), 1ull << 30);
    patch<uint64_t>(b, tensor_dim_pos(b, "w.f32", 1), 1ull << 30);
    expect_invalid(b, "past the end", "huge tensor");
    b = good;
    patch<uint64_t>(b, tensor_dim_pos(b, "w.q8", 0), 33);
    expect_invalid(b, "multiple of the Q8_0 block size", "Q8_0 ne[0] = 33");
    b = good;
    patch<uint32_t>(b, tensor_type_pos(b, "w.q8"), 99);
    expect_invalid(b, "tensor info #1 ('w.q8'): unknown type id 99", "type 99");
    b = good;
    patch<uint32_t>(b, tensor_type_pos(b, "w.q8"), 4);  // removed from GGUF
    expect_invalid(b, "unknown type id 4", "type 4");
    b = good;
    size_t off = tensor_offset_pos(b, "w.q8");
    patch<uint64_t>(b, off, peek<uint64_t>(b, off) + 1);
    expect_invalid(b, "alignment", "misaligned offset");
    b = good;
    patch<uint64_t>(b, off, peek<uint64_t>(b, off) + 32);
    expect_invalid(b, "past the end", "tensor past end");
    b = good;
    patch<uint64_t>(b, off, ~0ull << 5);  // aligned, and offset + size overflows
    expect_invalid(b, "past the end", "offset overflow");
    // Tensors sharing bytes (a file ember info / ember run used to take and run): the same range, and a
    // range starting inside another.
    b = good;
    patch<uint64_t>(b, off, peek<uint64_t>(b, tensor_offset_pos(b, "w.f32")));
    expect_invalid(b, "overlap", "tensors sharing one range");
    b = good;
    patch<uint64_t>(b, off, peek<uint64_t>(b, tensor_offset_pos(b, "w.f32")) + 32);
    expect_invalid(b, "overlap", "a tensor starting inside another");

    Writer w;
    float x[2] = {1, 2};
    w.add_tensor("t", DType::F32, {2}, x, sizeof x);
    w.add_tensor("t", DType::F32, {2}, x, sizeof x);
    expect_invalid(w.to_bytes(), "duplicate", "duplicate tensor name");
    Writer e;
    e.add_tensor("", DType::F32, {2}, x, sizeof x);
    expect_invalid(e.to_bytes(), "empty", "empty tensor name");
}

// ---- 4. mutations -----------------------------------------------------------------------------------

uint64_t next(uint64_t &s) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
}

// Reads everything a successful parse exposes, so ASan checks every view.
uint64_t touch(const File &f) {
    uint64_t sum = 0;
    for (const KV &kv : f.kvs()) {
        for (char c : kv.key) sum += static_cast<uint8_t>(c);
        for (char c : kv.value.str) sum += static_cast<uint8_t>(c);
        for (std::string_view s : kv.value.strs) sum += s.size() ? static_cast<uint8_t>(s.back()) : 0;
        if (kv.value.type == ValueType::ARRAY && kv.value.elem_type != ValueType::STRING) {
            for (uint64_t k = 0; k < kv.value.count; ++k) sum += std::isfinite(kv.value.array_float(k));
        }
    }
    for (const TensorInfo &t : f.tensors()) {
        for (uint64_t k = 0; k < t.n_bytes; ++k) sum += t.data[k];
    }
    return sum;
}

void test_mutations(void **) {
    Bytes good = small_file();
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    const uint64_t huge[] = {~0ull, 1ull << 63, 1ull << 62, (1ull << 62) + 1, 1ull << 32, 0x7FFFFFFFFFFFFFFFull};
    int ok = 0, rejected = 0;
    uint64_t sink = 0;
    for (int iter = 0; iter < 3000; ++iter) {
        Bytes b = good;
        size_t n = b.size();
        switch (next(rng) % 3) {
        case 0: {
            int flips = 1 + static_cast<int>(next(rng) % 4);
            for (int k = 0; k < flips; ++k) b[next(rng) % n] ^= static_cast<uint8_t>(1 + next(rng) % 255);
            break;
        }
        case 1: n = next(rng) % b.size(); break;
        case 2: patch<uint64_t>(b, next(rng) % (b.size() - 7), huge[next(rng) % 6]); break;
        }
        try {
            with_exact_copy(b, n, [&](const File &f) { sink += touch(f); });
            ++ok;
        } catch (const Error &e) {
            assert_int_equal(e.status(), EMBER_ERR_INVALID_MODEL);
            ++rejected;
        } catch (...) {
            printf("  mutation %d threw something other than ember::Error\n", iter);
            fail_msg("see above");
        }
    }
    printf("  %d mutations parsed, %d rejected (checksum %llu)\n", ok, rejected, (unsigned long long)sink);
    assert_int_equal(ok + rejected, 3000);
    assert_true(rejected > 1000);  // most of the file is structure, so most mutations must be caught
}

} // namespace

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_v3),
        cmocka_unit_test(test_round_trip_v2_align64),
        cmocka_unit_test(test_writer_checks),
        cmocka_unit_test(test_stories260K),
        cmocka_unit_test(test_stories15M_q8_0),
        cmocka_unit_test(test_vocab_files),
        cmocka_unit_test(test_parse_speed),
        cmocka_unit_test(test_bad_header),
        cmocka_unit_test(test_truncation_everywhere),
        cmocka_unit_test(test_bad_kvs),
        cmocka_unit_test(test_bad_alignment),
        cmocka_unit_test(test_bad_tensors),
        cmocka_unit_test(test_mutations),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
