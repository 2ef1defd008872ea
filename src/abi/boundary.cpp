#include "abi/boundary.hpp"

namespace ember::abi {

std::string &last_error() {
    thread_local std::string msg;
    return msg;
}

ember_status set_error(ember_status status, const char *fn_name, const char *prefix, const char *message) noexcept {
    std::string &msg = last_error();
    try {
        msg.assign(fn_name).append(": ").append(prefix).append(message);
    } catch (...) {
        // Out of memory for the message: keep what fits in the string's storage (at least the 15 bytes
        // every std::string holds in place), so the message still says something true.
        msg.clear();
        const char *fallback = status == EMBER_ERR_OUT_OF_MEMORY ? "out of memory" : "error";
        if (std::strlen(fallback) <= msg.capacity()) msg.append(fallback);
    }
    return status;
}

} // namespace ember::abi

#include "abi/handles.hpp"

namespace ember::abi {

ember_status copy_out(std::string_view s, void *buf, size_t capacity, size_t *out_len, bool with_nul) {
    if (out_len) *out_len = s.size();
    if (!buf && capacity == 0) return EMBER_OK;
    if (!buf) fail(EMBER_ERR_INVALID_ARGUMENT, "buf is NULL but capacity is %zu", capacity);
    const size_t need = s.size() + (with_nul ? 1 : 0);
    if (capacity < need)
        fail(EMBER_ERR_BUFFER_TOO_SMALL, "buffer of %zu bytes is too small: %zu needed", capacity, need);
    std::memcpy(buf, s.data(), s.size());
    if (with_nul) static_cast<char *>(buf)[s.size()] = '\0';
    return EMBER_OK;
}

} // namespace ember::abi
