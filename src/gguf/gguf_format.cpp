#include "gguf/gguf_format.hpp"

#include <cstdio>

namespace ember::gguf {

namespace {
std::string number(double f) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", f);
    return buf;
}
} // namespace

std::string value_to_string(const Value &v, size_t max_elems) {
    switch (v.type) {
    case ValueType::U8: case ValueType::U16: case ValueType::U32: case ValueType::U64:
        return std::to_string(v.u);
    case ValueType::I8: case ValueType::I16: case ValueType::I32: case ValueType::I64:
        return std::to_string(v.i);
    case ValueType::F32: case ValueType::F64:
        return number(v.f);
    case ValueType::BOOL:
        return v.u ? "true" : "false";
    case ValueType::STRING:
        return std::string(v.str);
    case ValueType::ARRAY: {
        std::string s = "[";
        const uint64_t shown = v.count < max_elems ? v.count : max_elems;
        for (uint64_t i = 0; i < shown; ++i) {
            if (i) s += ", ";
            if (v.elem_type == ValueType::STRING) {
                s += '"';
                s += std::string(v.strs[i]);
                s += '"';
            } else if (v.elem_type == ValueType::F32 || v.elem_type == ValueType::F64) {
                s += number(v.array_float(i));
            } else if (v.elem_type == ValueType::BOOL) {
                s += v.array_int(i) ? "true" : "false";
            } else {
                s += std::to_string(v.array_int(i));
            }
        }
        if (shown < v.count) s += ", ... (" + std::to_string(v.count) + " total)";
        return s + "]";
    }
    }
    return "?";
}

} // namespace ember::gguf
