// gguf_writer.cpp — builds GGUF files in memory (layout in gguf.hpp).
#include "gguf/gguf.hpp"

#include "core/error.hpp"

#include <bit>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace ember::gguf {

namespace {

template <typename T> void put(std::vector<uint8_t> &out, T v) {
    static_assert(std::endian::native == std::endian::little, "GGUF is little-endian");
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof v);
    out.insert(out.end(), b, b + sizeof b);
}

void put_string(std::vector<uint8_t> &out, const std::string &s) {
    put<uint64_t>(out, s.size());
    out.insert(out.end(), s.begin(), s.end());
}

template <typename T> std::vector<uint8_t> scalar(T v) {
    std::vector<uint8_t> out;
    put(out, v);
    return out;
}

template <typename T> std::vector<uint8_t> fixed_array(ValueType elem, const std::vector<T> &v) {
    std::vector<uint8_t> out;
    put(out, static_cast<uint32_t>(elem));
    put<uint64_t>(out, v.size());
    for (T x : v) put(out, x);
    return out;
}

void pad_to(std::vector<uint8_t> &out, size_t alignment) {
    out.resize((out.size() + alignment - 1) / alignment * alignment, 0);
}

uint64_t align_up(uint64_t n, uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

constexpr const char *kAlignmentKey = "general.alignment";

} // namespace

void Writer::set_alignment(uint32_t a) {
    if (a == 0 || !std::has_single_bit(a)) {
        fail(EMBER_ERR_INVALID_ARGUMENT, "GGUF alignment %u is not a power of two", a);
    }
    alignment_ = a;
    // Replace rather than append: a second general.alignment would make the file invalid.
    for (PendingKV &kv : kvs_) {
        if (kv.key == kAlignmentKey) {
            kv.type = static_cast<uint32_t>(ValueType::U32);
            kv.payload = scalar<uint32_t>(a);
            return;
        }
    }
    add_u32(kAlignmentKey, a);
}

void Writer::add_u8(const std::string &key, uint8_t v) { kvs_.push_back({key, uint32_t(ValueType::U8), scalar(v)}); }
void Writer::add_i8(const std::string &key, int8_t v) { kvs_.push_back({key, uint32_t(ValueType::I8), scalar(v)}); }
void Writer::add_u16(const std::string &key, uint16_t v) { kvs_.push_back({key, uint32_t(ValueType::U16), scalar(v)}); }
void Writer::add_i16(const std::string &key, int16_t v) { kvs_.push_back({key, uint32_t(ValueType::I16), scalar(v)}); }
void Writer::add_u32(const std::string &key, uint32_t v) { kvs_.push_back({key, uint32_t(ValueType::U32), scalar(v)}); }
void Writer::add_i32(const std::string &key, int32_t v) { kvs_.push_back({key, uint32_t(ValueType::I32), scalar(v)}); }
void Writer::add_u64(const std::string &key, uint64_t v) { kvs_.push_back({key, uint32_t(ValueType::U64), scalar(v)}); }
void Writer::add_i64(const std::string &key, int64_t v) { kvs_.push_back({key, uint32_t(ValueType::I64), scalar(v)}); }
void Writer::add_f32(const std::string &key, float v) { kvs_.push_back({key, uint32_t(ValueType::F32), scalar(v)}); }
void Writer::add_f64(const std::string &key, double v) { kvs_.push_back({key, uint32_t(ValueType::F64), scalar(v)}); }

void Writer::add_bool(const std::string &key, bool v) {
    kvs_.push_back({key, uint32_t(ValueType::BOOL), scalar<uint8_t>(v ? 1 : 0)});
}

void Writer::add_string(const std::string &key, const std::string &v) {
    std::vector<uint8_t> payload;
    put_string(payload, v);
    kvs_.push_back({key, uint32_t(ValueType::STRING), std::move(payload)});
}

void Writer::add_array_string(const std::string &key, const std::vector<std::string> &v) {
    std::vector<uint8_t> payload;
    put(payload, static_cast<uint32_t>(ValueType::STRING));
    put<uint64_t>(payload, v.size());
    for (const std::string &s : v) put_string(payload, s);
    kvs_.push_back({key, uint32_t(ValueType::ARRAY), std::move(payload)});
}

void Writer::add_array_f32(const std::string &key, const std::vector<float> &v) {
    kvs_.push_back({key, uint32_t(ValueType::ARRAY), fixed_array(ValueType::F32, v)});
}

void Writer::add_array_i32(const std::string &key, const std::vector<int32_t> &v) {
    kvs_.push_back({key, uint32_t(ValueType::ARRAY), fixed_array(ValueType::I32, v)});
}

void Writer::add_array_bool(const std::string &key, const std::vector<bool> &v) {
    kvs_.push_back({key, uint32_t(ValueType::ARRAY), fixed_array(ValueType::BOOL, std::vector<uint8_t>(v.begin(), v.end()))});
}

void Writer::add_tensor(const std::string &name, DType type, const std::vector<int64_t> &dims,
                        const void *data, size_t n_bytes) {
    const DTypeInfo &info = dtype_info(type);
    if (!info.name) fail(EMBER_ERR_INVALID_ARGUMENT, "tensor '%s': undefined type id %u", name.c_str(), uint32_t(type));
    if (dims.empty() || dims.size() > 4) {
        fail(EMBER_ERR_INVALID_ARGUMENT, "tensor '%s': %zu dimensions (must be 1 to 4)", name.c_str(), dims.size());
    }
    uint64_t n_elements = 1;
    for (int64_t d : dims) {
        if (d <= 0 || __builtin_mul_overflow(n_elements, uint64_t(d), &n_elements)) {
            fail(EMBER_ERR_INVALID_ARGUMENT, "tensor '%s': bad dimension %" PRId64 " or element count overflow",
                 name.c_str(), d);
        }
    }
    if (uint64_t(dims[0]) % info.block_size != 0) {
        fail(EMBER_ERR_INVALID_ARGUMENT, "tensor '%s': row length %" PRId64 " is not a multiple of the %s block size %u",
             name.c_str(), dims[0], info.name, info.block_size);
    }
    uint64_t expected = n_elements / info.block_size * info.block_bytes;
    if (expected != n_bytes) {
        fail(EMBER_ERR_INVALID_ARGUMENT, "tensor '%s': %zu data bytes given, the %s shape needs %" PRIu64,
             name.c_str(), n_bytes, info.name, expected);
    }
    if (n_bytes && !data) fail(EMBER_ERR_INVALID_ARGUMENT, "tensor '%s': no data", name.c_str());
    const auto *p = static_cast<const uint8_t *>(data);
    tensors_.push_back({name, type, dims, std::vector<uint8_t>(p, p + n_bytes)});
}

std::vector<uint8_t> Writer::to_bytes() const {
    std::vector<uint8_t> out = {'G', 'G', 'U', 'F'};
    put(out, version_);
    put<uint64_t>(out, tensors_.size());
    put<uint64_t>(out, kvs_.size());

    for (const PendingKV &kv : kvs_) {
        put_string(out, kv.key);
        put(out, kv.type);
        out.insert(out.end(), kv.payload.begin(), kv.payload.end());
    }

    uint64_t offset = 0;
    for (const PendingTensor &t : tensors_) {
        put_string(out, t.name);
        put<uint32_t>(out, static_cast<uint32_t>(t.dims.size()));
        for (int64_t d : t.dims) put<uint64_t>(out, static_cast<uint64_t>(d));
        put(out, static_cast<uint32_t>(t.type));
        put<uint64_t>(out, offset);
        offset = align_up(offset + t.data.size(), alignment_);
    }

    // No padding after the last tensor: the file ends with its data, so any truncation is detectable.
    if (!tensors_.empty()) pad_to(out, alignment_);
    for (size_t k = 0; k < tensors_.size(); ++k) {
        if (k > 0) pad_to(out, alignment_);
        out.insert(out.end(), tensors_[k].data.begin(), tensors_[k].data.end());
    }
    return out;
}

void Writer::write_file(const std::string &path) const {
    std::vector<uint8_t> bytes = to_bytes();
    std::FILE *f = std::fopen(path.c_str(), "wb");
    if (!f) fail(EMBER_ERR_IO, "cannot create '%s': %s", path.c_str(), std::strerror(errno));
    size_t written = std::fwrite(bytes.data(), 1, bytes.size(), f);
    int write_errno = errno;
    bool closed = std::fclose(f) == 0;
    if (written != bytes.size()) {
        fail(EMBER_ERR_IO, "cannot write '%s': %s", path.c_str(), std::strerror(write_errno));
    }
    if (!closed) fail(EMBER_ERR_IO, "cannot write '%s': %s", path.c_str(), std::strerror(errno));
}

} // namespace ember::gguf
