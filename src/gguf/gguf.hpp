// gguf.hpp — a validating, zero-copy reader of GGUF files (versions 2 and 3), and a writer.
//
// The reader parses a byte range (normally a MappedFile) and checks everything before anything is
// used: magic, version, counts against the bytes left, string lengths, value and tensor type ids,
// dimensions, overflow in every size product, alignment, and that every tensor's data lies inside the
// range. Problems throw ember::Error(EMBER_ERR_INVALID_MODEL) with a message that names the field
// ("tensor 'blk.0.attn_q.weight': data [offset, end) lies past the end of the file (N bytes)").
// Strings and tensor data are views into the parsed bytes: they live as long as those bytes do.
//
// Layout facts (from the GGUF spec): little-endian; header = magic "GGUF", u32 version, u64 tensor
// count, u64 kv count (u32 counts in version 1, which we reject); strings = u64 length + bytes;
// tensor data begins at the next multiple of `general.alignment` (default 32) after the tensor infos,
// and each tensor's offset is relative to that start and a multiple of the alignment.
#pragma once

#include "core/dtype.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ember::gguf {

enum class ValueType : uint32_t {
    U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
    STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
const char *value_type_name(ValueType t);

// A parsed metadata value. Scalars are widened into one of the three numeric fields (by type: unsigned
// -> u, signed -> i, floats -> f, bool -> u = 0/1). Arrays keep their raw element bytes (fixed-size
// element types) or the list of string views (string arrays). Nested arrays are rejected as invalid.
struct Value {
    ValueType type = ValueType::U8;
    uint64_t u = 0;
    int64_t i = 0;
    double f = 0;
    std::string_view str;                 // STRING
    ValueType elem_type = ValueType::U8;  // ARRAY
    uint64_t count = 0;                   // ARRAY: number of elements
    const uint8_t *elems = nullptr;       // ARRAY of fixed-size elements: count * size, little-endian
    std::vector<std::string_view> strs;   // ARRAY of STRING

    bool is_integer() const;  // any integer scalar type (not bool)
    bool is_float() const;    // F32 or F64 scalar
    // Array element i converted (bounds and type checked by the caller: elem_type must be numeric).
    int64_t array_int(uint64_t i) const;
    double array_float(uint64_t i) const;
};

struct KV {
    std::string_view key;
    Value value;
};

struct TensorInfo {
    std::string_view name;
    uint32_t n_dims = 0;
    int64_t ne[4] = {1, 1, 1, 1};  // ne[0] is the innermost (row length), as in GGUF
    DType type = DType::F32;
    uint64_t offset = 0;           // relative to the start of the data section
    uint64_t n_elements = 0;
    uint64_t n_bytes = 0;
    const uint8_t *data = nullptr; // into the parsed bytes
};

class File {
public:
    // Parses and validates `size` bytes at `data` (which must outlive the File). Throws
    // Error(EMBER_ERR_INVALID_MODEL) for any malformation. Unknown tensor type ids are invalid; known
    // types the kernels do not support are accepted here (the model loader decides).
    static File parse(const uint8_t *data, size_t size);

    uint32_t version() const { return version_; }
    size_t alignment() const { return alignment_; }
    size_t data_offset() const { return data_offset_; }   // start of the tensor data section
    const std::vector<KV> &kvs() const { return kvs_; }
    const std::vector<TensorInfo> &tensors() const { return tensors_; }

    const KV *find(std::string_view key) const;             // nullptr if absent
    const TensorInfo *find_tensor(std::string_view name) const;

    // Typed lookups: std::nullopt if the key is absent; throw Error(EMBER_ERR_INVALID_MODEL) naming the
    // key and both types if it is present with an incompatible type (any integer type converts to
    // int64 if it fits; F32/F64 and integers convert to double).
    std::optional<int64_t> get_int(std::string_view key) const;
    std::optional<double> get_float(std::string_view key) const;
    std::optional<bool> get_bool(std::string_view key) const;
    std::optional<std::string_view> get_string(std::string_view key) const;
    // Array lookup: nullptr if absent; throws if present and not an array.
    const Value *get_array(std::string_view key) const;

private:
    uint32_t version_ = 0;
    size_t alignment_ = 32;
    size_t data_offset_ = 0;
    std::vector<KV> kvs_;
    std::vector<TensorInfo> tensors_;
    // Keys are views into the parsed bytes, values index kvs_/tensors_, so copies and moves stay valid.
    std::unordered_map<std::string_view, size_t> kv_index_;
    std::unordered_map<std::string_view, size_t> tensor_index_;
};

// Builds GGUF files in memory: used by tests (valid and deliberately broken files) and by the
// synthetic-model generator for benchmarks. Always writes version 3 unless set_version is called.
// Tensor shapes and data sizes are checked; duplicate keys or names are not (tests write broken files).
// Only set_alignment changes the layout: a general.alignment added with add_u32 is written as given.
class Writer {
public:
    void set_version(uint32_t v) { version_ = v; }
    void set_alignment(uint32_t a);  // also writes general.alignment

    void add_u8(const std::string &key, uint8_t v);
    void add_i8(const std::string &key, int8_t v);
    void add_u16(const std::string &key, uint16_t v);
    void add_i16(const std::string &key, int16_t v);
    void add_u32(const std::string &key, uint32_t v);
    void add_i32(const std::string &key, int32_t v);
    void add_u64(const std::string &key, uint64_t v);
    void add_i64(const std::string &key, int64_t v);
    void add_f32(const std::string &key, float v);
    void add_f64(const std::string &key, double v);
    void add_bool(const std::string &key, bool v);
    void add_string(const std::string &key, const std::string &v);
    void add_array_string(const std::string &key, const std::vector<std::string> &v);
    void add_array_f32(const std::string &key, const std::vector<float> &v);
    void add_array_i32(const std::string &key, const std::vector<int32_t> &v);
    void add_array_bool(const std::string &key, const std::vector<bool> &v);

    // `data` holds the tensor's bytes in the type's layout (size checked against the shape).
    // dims[0] is the innermost dimension (row length).
    void add_tensor(const std::string &name, DType type, const std::vector<int64_t> &dims,
                    const void *data, size_t n_bytes);

    std::vector<uint8_t> to_bytes() const;
    void write_file(const std::string &path) const;  // throws Error(EMBER_ERR_IO)

private:
    struct PendingKV { std::string key; uint32_t type; std::vector<uint8_t> payload; };
    struct PendingTensor { std::string name; DType type; std::vector<int64_t> dims; std::vector<uint8_t> data; };
    uint32_t version_ = 3;
    uint32_t alignment_ = 32;
    std::vector<PendingKV> kvs_;
    std::vector<PendingTensor> tensors_;
};

} // namespace ember::gguf
