// gguf_reader.cpp — parsing and validation of GGUF files; see gguf.hpp for the layout.
//
// Every read goes through Parser, which checks the bytes left first, so no input can make us read past
// the end. Counts read from the file are checked against what the remaining bytes could possibly hold
// before anything is allocated for them, so a hostile count cannot make us allocate gigabytes.
#include "gguf/gguf.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cstring>
#include <limits>

namespace ember::gguf {

static_assert(std::endian::native == std::endian::little, "the reader views little-endian data in place");

const char *value_type_name(ValueType t) {
    switch (t) {
    case ValueType::U8: return "u8";
    case ValueType::I8: return "i8";
    case ValueType::U16: return "u16";
    case ValueType::I16: return "i16";
    case ValueType::U32: return "u32";
    case ValueType::I32: return "i32";
    case ValueType::F32: return "f32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::U64: return "u64";
    case ValueType::I64: return "i64";
    case ValueType::F64: return "f64";
    }
    return "unknown";
}

namespace {

constexpr uint32_t kMaxDims = 4;
constexpr uint64_t kMaxDim = uint64_t(1) << 62;
constexpr uint32_t kDefaultAlignment = 32;
// Smallest possible encodings, used to bound counts by the bytes left: a kv is a 1-byte key (8 + 1),
// a type (4) and a u8 value (1); a tensor info is a 1-byte name (8 + 1), n_dims (4), one dim (8), a
// type (4) and an offset (8); a string is at least its length field.
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;
constexpr uint64_t kMinStringBytes = 8;

bool is_known_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::F64); }

// Size of a fixed-size value type, 0 for STRING and ARRAY.
uint64_t fixed_size(ValueType t) {
    switch (t) {
    case ValueType::U8: case ValueType::I8: case ValueType::BOOL: return 1;
    case ValueType::U16: case ValueType::I16: return 2;
    case ValueType::U32: case ValueType::I32: case ValueType::F32: return 4;
    case ValueType::U64: case ValueType::I64: case ValueType::F64: return 8;
    case ValueType::STRING: case ValueType::ARRAY: return 0;
    }
    return 0;
}

bool is_integer_type(ValueType t) {
    switch (t) {
    case ValueType::U8: case ValueType::I8: case ValueType::U16: case ValueType::I16:
    case ValueType::U32: case ValueType::I32: case ValueType::U64: case ValueType::I64: return true;
    default: return false;
    }
}

bool is_float_type(ValueType t) { return t == ValueType::F32 || t == ValueType::F64; }

// Rejects overlong encodings, surrogates and code points past U+10FFFF, as well as stray bytes.
bool valid_utf8(std::string_view s) {
    const auto *p = reinterpret_cast<const unsigned char *>(s.data());
    size_t n = s.size(), i = 0;
    while (i < n) {
        unsigned c = p[i];
        if (c < 0x80) { ++i; continue; }
        size_t len;
        uint32_t cp, min;
        if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; min = 0x80; }
        else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; min = 0x800; }
        else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; min = 0x10000; }
        else return false;
        if (n - i < len) return false;
        for (size_t k = 1; k < len; ++k) {
            if ((p[i + k] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (p[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}

// A name from the file made safe to print: bounded, with control and non-ASCII bytes escaped, so a
// hostile key cannot flood or garble an error message.
std::string printable(std::string_view s) {
    constexpr size_t kMax = 80;
    std::string out;
    for (size_t i = 0; i < s.size() && i < kMax; ++i) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        if (c >= 0x20 && c < 0x7F && c != '\'') out += static_cast<char>(c);
        else out += format("\\x%02x", c);
    }
    if (s.size() > kMax) out += "...";
    return out;
}

template <typename T> T load(const uint8_t *p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// Reads the file front to back, tracking which entry it is in so every error can say where.
class Parser {
public:
    Parser(const uint8_t *data, size_t size) : data_(data), size_(size) {}

    size_t pos() const { return pos_; }
    size_t size() const { return size_; }
    uint64_t left() const { return size_ - pos_; }

    void in_header() { section_ = Section::Header; name_ = {}; }
    void in_kv(uint64_t i) { section_ = Section::Kv; index_ = i; name_ = {}; }
    void in_tensor(uint64_t i) { section_ = Section::Tensor; index_ = i; name_ = {}; }
    void named(std::string_view n) { name_ = n; }

    // "kv #3 ('tokenizer.ggml.tokens')", "tensor info #0", "header".
    std::string where() const {
        std::string s;
        switch (section_) {
        case Section::Header: return "header";
        case Section::Kv: s = format("kv #%" PRIu64, index_); break;
        case Section::Tensor: s = format("tensor info #%" PRIu64, index_); break;
        }
        if (!name_.empty()) s += " ('" + printable(name_) + "')";
        return s;
    }

    [[noreturn]] void invalid(const std::string &what) const {
        fail(EMBER_ERR_INVALID_MODEL, "%s: %s", where().c_str(), what.c_str());
    }

    const uint8_t *take(uint64_t n, const char *field) {
        if (n > left()) {
            fail(EMBER_ERR_INVALID_MODEL, "truncated: %s needs %" PRIu64 " more bytes for %s at offset %zu (file is %zu bytes)",
                 where().c_str(), n, field, pos_, size_);
        }
        const uint8_t *p = data_ + pos_;
        pos_ += static_cast<size_t>(n);
        return p;
    }

    template <typename T> T read(const char *field) { return load<T>(take(sizeof(T), field)); }

    std::string_view read_string(const char *field) {
        uint64_t len = read<uint64_t>(field);
        if (len > left()) {
            invalid(format("%s length %" PRIu64 " at offset %zu exceeds the %" PRIu64 " bytes left in the file",
                           field, len, pos_ - 8, left()));
        }
        return {reinterpret_cast<const char *>(take(len, field)), static_cast<size_t>(len)};
    }

    // String values (scalars and array elements): UTF-8, as the format says. They reach applications
    // as text (the architecture and name in ember_model_info, metadata strings, token pieces that are
    // detokenized), so invalid bytes are refused here rather than handed out.
    std::string_view read_text(const char *field) {
        std::string_view s = read_string(field);
        if (!valid_utf8(s)) invalid(format("%s '%s' is not valid UTF-8", field, printable(s).c_str()));
        return s;
    }

    // Keys and tensor names: identifiers that messages and lookups rely on. The C ABI hands them out as
    // NUL-terminated strings and looks keys up by such strings, so a NUL inside one is refused too.
    std::string_view read_name(const char *field) {
        std::string_view s = read_string(field);
        if (s.empty()) invalid(format("%s is empty", field));
        if (!valid_utf8(s)) invalid(format("%s '%s' is not valid UTF-8", field, printable(s).c_str()));
        if (s.find('\0') != std::string_view::npos)
            invalid(format("%s '%s' contains a NUL byte", field, printable(s).c_str()));
        return s;
    }

private:
    enum class Section { Header, Kv, Tensor };
    const uint8_t *data_;
    size_t size_;
    size_t pos_ = 0;
    Section section_ = Section::Header;
    uint64_t index_ = 0;
    std::string_view name_;
};

ValueType read_value_type(Parser &p, const char *field) {
    uint32_t t = p.read<uint32_t>(field);
    if (!is_known_type(t)) p.invalid(format("unknown %s %u", field, t));
    return static_cast<ValueType>(t);
}

bool read_bool(Parser &p, const char *field) {
    uint8_t b = p.read<uint8_t>(field);
    if (b > 1) p.invalid(format("%s is %u, neither 0 nor 1", field, b));
    return b != 0;
}

void read_scalar(Parser &p, Value &v) {
    switch (v.type) {
    case ValueType::U8: v.u = p.read<uint8_t>("u8 value"); break;
    case ValueType::I8: v.i = p.read<int8_t>("i8 value"); break;
    case ValueType::U16: v.u = p.read<uint16_t>("u16 value"); break;
    case ValueType::I16: v.i = p.read<int16_t>("i16 value"); break;
    case ValueType::U32: v.u = p.read<uint32_t>("u32 value"); break;
    case ValueType::I32: v.i = p.read<int32_t>("i32 value"); break;
    case ValueType::U64: v.u = p.read<uint64_t>("u64 value"); break;
    case ValueType::I64: v.i = p.read<int64_t>("i64 value"); break;
    case ValueType::F32: v.f = p.read<float>("f32 value"); break;
    case ValueType::F64: v.f = p.read<double>("f64 value"); break;
    case ValueType::BOOL: v.u = read_bool(p, "bool value"); break;
    case ValueType::STRING: v.str = p.read_text("string value"); break;
    case ValueType::ARRAY: break;  // handled by read_array
    }
}

void read_array(Parser &p, Value &v) {
    v.elem_type = read_value_type(p, "array element type");
    if (v.elem_type == ValueType::ARRAY) p.invalid("nested arrays are not supported");
    v.count = p.read<uint64_t>("array count");

    if (v.elem_type == ValueType::STRING) {
        if (v.count > p.left() / kMinStringBytes) {
            p.invalid(format("array of %" PRIu64 " strings cannot fit in the %" PRIu64 " bytes left in the file",
                             v.count, p.left()));
        }
        v.strs.reserve(static_cast<size_t>(v.count));
        for (uint64_t k = 0; k < v.count; ++k) v.strs.push_back(p.read_text("array string"));
        return;
    }

    uint64_t esize = fixed_size(v.elem_type);
    if (v.count > p.left() / esize) {
        p.invalid(format("array of %" PRIu64 " %s elements (%" PRIu64 " bytes each) exceeds the %" PRIu64
                         " bytes left in the file", v.count, value_type_name(v.elem_type), esize, p.left()));
    }
    v.elems = p.take(v.count * esize, "array elements");
    if (v.elem_type == ValueType::BOOL) {
        for (uint64_t k = 0; k < v.count; ++k) {
            if (v.elems[k] > 1) p.invalid(format("bool array element %" PRIu64 " is %u, neither 0 nor 1", k, v.elems[k]));
        }
    }
}

size_t read_alignment(Parser &p, const Value &v) {
    if (v.type != ValueType::U32) {
        p.invalid(format("general.alignment must be a u32, not %s", value_type_name(v.type)));
    }
    if (v.u == 0 || !std::has_single_bit(v.u)) {
        p.invalid(format("general.alignment %" PRIu64 " is not a power of two", v.u));
    }
    return static_cast<size_t>(v.u);
}

void read_kvs(Parser &p, uint64_t count, std::vector<KV> &kvs,
              std::unordered_map<std::string_view, size_t> &index, size_t &alignment) {
    kvs.reserve(static_cast<size_t>(count));
    index.reserve(static_cast<size_t>(count));
    for (uint64_t n = 0; n < count; ++n) {
        p.in_kv(n);
        KV kv;
        kv.key = p.read_name("key");
        p.named(kv.key);
        kv.value.type = read_value_type(p, "value type");
        if (kv.value.type == ValueType::ARRAY) read_array(p, kv.value);
        else read_scalar(p, kv.value);

        auto [it, inserted] = index.emplace(kv.key, kvs.size());
        if (!inserted) p.invalid(format("duplicate key (first defined by kv #%zu)", it->second));
        if (kv.key == "general.alignment") alignment = read_alignment(p, kv.value);
        kvs.push_back(std::move(kv));
    }
}

// Reads one tensor info; its data location is checked later, once the data section's start is known.
TensorInfo read_tensor_info(Parser &p) {
    TensorInfo t;
    t.name = p.read_name("tensor name");
    p.named(t.name);

    t.n_dims = p.read<uint32_t>("n_dims");
    if (t.n_dims == 0 || t.n_dims > kMaxDims) {
        p.invalid(format("n_dims is %u, must be 1 to %u", t.n_dims, kMaxDims));
    }
    uint64_t n_elements = 1;
    for (uint32_t d = 0; d < t.n_dims; ++d) {
        uint64_t dim = p.read<uint64_t>("dimension");
        if (dim == 0 || dim > kMaxDim) {
            p.invalid(format("dimension %u is %" PRIu64 " (must be 1 to 2^62)", d, dim));
        }
        if (__builtin_mul_overflow(n_elements, dim, &n_elements)) {
            p.invalid("the product of the dimensions overflows 64 bits");
        }
        t.ne[d] = static_cast<int64_t>(dim);
    }
    t.n_elements = n_elements;

    uint32_t type_id = p.read<uint32_t>("tensor type");
    const DTypeInfo &info = dtype_info(type_id);
    if (!info.name) p.invalid(format("unknown type id %u", type_id));
    t.type = static_cast<DType>(type_id);
    if (static_cast<uint64_t>(t.ne[0]) % info.block_size != 0) {
        p.invalid(format("row length ne[0] = %" PRId64 " is not a multiple of the %s block size %u",
                         t.ne[0], info.name, info.block_size));
    }
    if (__builtin_mul_overflow(n_elements / info.block_size, uint64_t(info.block_bytes), &t.n_bytes)) {
        p.invalid("the byte size overflows 64 bits");
    }
    t.offset = p.read<uint64_t>("tensor data offset");
    return t;
}

void read_tensor_infos(Parser &p, uint64_t count, std::vector<TensorInfo> &tensors,
                       std::unordered_map<std::string_view, size_t> &index) {
    tensors.reserve(static_cast<size_t>(count));
    index.reserve(static_cast<size_t>(count));
    for (uint64_t n = 0; n < count; ++n) {
        p.in_tensor(n);
        TensorInfo t = read_tensor_info(p);
        auto [it, inserted] = index.emplace(t.name, tensors.size());
        if (!inserted) p.invalid(format("duplicate tensor name (first used by tensor info #%zu)", it->second));
        tensors.push_back(t);
    }
}

void place_tensor_data(TensorInfo &t, const uint8_t *data, size_t size, size_t data_offset, size_t alignment) {
    std::string name = printable(t.name);
    if (t.offset % alignment != 0) {
        fail(EMBER_ERR_INVALID_MODEL, "tensor '%s': data offset %" PRIu64 " is not a multiple of the alignment %zu",
             name.c_str(), t.offset, alignment);
    }
    uint64_t begin, end;
    if (__builtin_add_overflow(uint64_t(data_offset), t.offset, &begin) ||
        __builtin_add_overflow(begin, t.n_bytes, &end) || end > size) {
        fail(EMBER_ERR_INVALID_MODEL,
             "tensor '%s': data [%" PRIu64 ", +%" PRIu64 ") from the data section at %zu lies past the end of the file (%zu bytes)",
             name.c_str(), t.offset, t.n_bytes, data_offset, size);
    }
    t.data = data + begin;
}

// Two tensors sharing bytes are a malformed file (a writer lays each tensor out on its own), and one
// that would make a model run on weights that alias each other: refused, naming both.
void check_no_overlap(const std::vector<TensorInfo> &tensors) {
    std::vector<const TensorInfo *> order;
    order.reserve(tensors.size());
    for (const TensorInfo &t : tensors)
        if (t.n_bytes) order.push_back(&t);
    std::sort(order.begin(), order.end(), [](const TensorInfo *a, const TensorInfo *b) { return a->offset < b->offset; });
    for (size_t i = 1; i < order.size(); ++i) {
        const TensorInfo &a = *order[i - 1], &b = *order[i];
        if (b.offset < a.offset + a.n_bytes)   // no overflow: place_tensor_data bounded both by the file size
            fail(EMBER_ERR_INVALID_MODEL,
                 "tensors '%s' (data [%" PRIu64 ", +%" PRIu64 ")) and '%s' (data [%" PRIu64 ", +%" PRIu64 ")) overlap",
                 printable(a.name).c_str(), a.offset, a.n_bytes, printable(b.name).c_str(), b.offset, b.n_bytes);
    }
}

void check_counts(const Parser &p, uint64_t n_tensors, uint64_t n_kvs) {
    uint64_t left = p.left();
    if (n_tensors > left / kMinTensorInfoBytes) {
        fail(EMBER_ERR_INVALID_MODEL, "header: tensor count %" PRIu64 " is impossible for a file of %zu bytes",
             n_tensors, p.size());
    }
    if (n_kvs > left / kMinKvBytes) {
        fail(EMBER_ERR_INVALID_MODEL, "header: kv count %" PRIu64 " is impossible for a file of %zu bytes",
             n_kvs, p.size());
    }
    // Each count is now below 2^64 / 14, so this sum cannot overflow.
    if (n_tensors * kMinTensorInfoBytes + n_kvs * kMinKvBytes > left) {
        fail(EMBER_ERR_INVALID_MODEL, "header: %" PRIu64 " tensors and %" PRIu64 " kvs cannot fit in a file of %zu bytes",
             n_tensors, n_kvs, p.size());
    }
}

void read_header(Parser &p, uint32_t &version) {
    if (p.size() == 0) fail(EMBER_ERR_INVALID_MODEL, "empty file (0 bytes): not a GGUF file");
    const uint8_t *m = p.take(4, "magic");
    if (std::memcmp(m, "GGUF", 4) != 0) {
        fail(EMBER_ERR_INVALID_MODEL, "bad magic 0x%02x%02x%02x%02x (not a GGUF file)", m[0], m[1], m[2], m[3]);
    }
    version = p.read<uint32_t>("version");
    if (version == 1) {
        fail(EMBER_ERR_INVALID_MODEL,
             "GGUF version 1 is not supported (it used 32-bit counts); convert the file to version 3");
    }
    if (version != 2 && version != 3) fail(EMBER_ERR_INVALID_MODEL, "unsupported GGUF version %u", version);
}

[[noreturn]] void type_error(std::string_view key, ValueType have, const char *want) {
    fail(EMBER_ERR_INVALID_MODEL, "key '%s' has type %s, expected %s", printable(key).c_str(),
         value_type_name(have), want);
}

} // namespace

// ---- Value ------------------------------------------------------------------------------------------

bool Value::is_integer() const { return is_integer_type(type); }
bool Value::is_float() const { return is_float_type(type); }

int64_t Value::array_int(uint64_t k) const {
    if (type != ValueType::ARRAY || k >= count || !elems ||
        !(is_integer_type(elem_type) || elem_type == ValueType::BOOL)) {
        fail(EMBER_ERR_INVALID_MODEL, "array_int: element %" PRIu64 " of a %s array of %" PRIu64 " is not an integer",
             k, value_type_name(elem_type), count);
    }
    switch (elem_type) {
    case ValueType::U8: case ValueType::BOOL: return elems[k];
    case ValueType::I8: return load<int8_t>(elems + k);
    case ValueType::U16: return load<uint16_t>(elems + 2 * k);
    case ValueType::I16: return load<int16_t>(elems + 2 * k);
    case ValueType::U32: return load<uint32_t>(elems + 4 * k);
    case ValueType::I32: return load<int32_t>(elems + 4 * k);
    case ValueType::I64: return load<int64_t>(elems + 8 * k);
    case ValueType::U64: {
        uint64_t u = load<uint64_t>(elems + 8 * k);
        if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
            fail(EMBER_ERR_INVALID_MODEL, "array element %" PRIu64 " (u64 %" PRIu64 ") does not fit in int64", k, u);
        }
        return static_cast<int64_t>(u);
    }
    default: break;
    }
    return 0;  // unreachable: excluded above
}

double Value::array_float(uint64_t k) const {
    if (type != ValueType::ARRAY || k >= count || !elems) {
        fail(EMBER_ERR_INVALID_MODEL, "array_float: element %" PRIu64 " of a %s array of %" PRIu64 " is not a number",
             k, value_type_name(elem_type), count);
    }
    switch (elem_type) {
    case ValueType::F32: return load<float>(elems + 4 * k);
    case ValueType::F64: return load<double>(elems + 8 * k);
    case ValueType::U64: return static_cast<double>(load<uint64_t>(elems + 8 * k));
    default: return static_cast<double>(array_int(k));
    }
}

// ---- File -------------------------------------------------------------------------------------------

File File::parse(const uint8_t *data, size_t size) {
    File f;
    Parser p(data, size);
    read_header(p, f.version_);
    uint64_t n_tensors = p.read<uint64_t>("tensor count");
    uint64_t n_kvs = p.read<uint64_t>("kv count");
    check_counts(p, n_tensors, n_kvs);

    f.alignment_ = kDefaultAlignment;
    read_kvs(p, n_kvs, f.kvs_, f.kv_index_, f.alignment_);
    read_tensor_infos(p, n_tensors, f.tensors_, f.tensor_index_);

    // pos <= size and alignment <= 2^31, so this cannot overflow on a 64-bit size_t.
    f.data_offset_ = (p.pos() + f.alignment_ - 1) / f.alignment_ * f.alignment_;
    for (TensorInfo &t : f.tensors_) place_tensor_data(t, data, size, f.data_offset_, f.alignment_);
    check_no_overlap(f.tensors_);
    return f;
}

const KV *File::find(std::string_view key) const {
    auto it = kv_index_.find(key);
    return it == kv_index_.end() ? nullptr : &kvs_[it->second];
}

const TensorInfo *File::find_tensor(std::string_view name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::optional<int64_t> File::get_int(std::string_view key) const {
    const KV *kv = find(key);
    if (!kv) return std::nullopt;
    const Value &v = kv->value;
    switch (v.type) {
    case ValueType::I8: case ValueType::I16: case ValueType::I32: case ValueType::I64: return v.i;
    case ValueType::U8: case ValueType::U16: case ValueType::U32: return static_cast<int64_t>(v.u);
    case ValueType::U64:
        if (v.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
            fail(EMBER_ERR_INVALID_MODEL, "key '%s' has type u64 with value %" PRIu64 ", too large for int64",
                 printable(key).c_str(), v.u);
        }
        return static_cast<int64_t>(v.u);
    default: type_error(key, v.type, "an integer");
    }
}

std::optional<double> File::get_float(std::string_view key) const {
    const KV *kv = find(key);
    if (!kv) return std::nullopt;
    const Value &v = kv->value;
    if (is_float_type(v.type)) return v.f;
    if (!is_integer_type(v.type)) type_error(key, v.type, "a number (f32, f64 or an integer)");
    switch (v.type) {
    case ValueType::I8: case ValueType::I16: case ValueType::I32: case ValueType::I64:
        return static_cast<double>(v.i);
    default: return static_cast<double>(v.u);
    }
}

std::optional<bool> File::get_bool(std::string_view key) const {
    const KV *kv = find(key);
    if (!kv) return std::nullopt;
    if (kv->value.type != ValueType::BOOL) type_error(key, kv->value.type, "bool");
    return kv->value.u != 0;
}

std::optional<std::string_view> File::get_string(std::string_view key) const {
    const KV *kv = find(key);
    if (!kv) return std::nullopt;
    if (kv->value.type != ValueType::STRING) type_error(key, kv->value.type, "string");
    return kv->value.str;
}

const Value *File::get_array(std::string_view key) const {
    const KV *kv = find(key);
    if (!kv) return nullptr;
    if (kv->value.type != ValueType::ARRAY) type_error(key, kv->value.type, "array");
    return &kv->value;
}

} // namespace ember::gguf
