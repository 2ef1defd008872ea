// boundary.hpp — the one place where C++ meets the C ABI.
//
// Every exported function body runs inside ember::abi::guard(), which catches everything (ember::Error,
// std::bad_alloc, any other exception), stores the message in the calling thread's last-error slot and
// returns the matching ember_status. Nothing thrown inside ever reaches the host application.
#pragma once

#include "core/callback_scope.hpp"
#include "core/error.hpp"

#include <ember/ember.h>

#include <cstring>
#include <new>
#include <string>
#include <type_traits>

namespace ember::abi {

std::string &last_error();
// Stores "fn_name: prefix message" as the thread's last error and returns status. Never throws: out of
// memory for the message, it stores what fits without allocating (the handlers below run while memory
// may still be short, and an exception from them would terminate the host through guard's noexcept).
ember_status set_error(ember_status status, const char *fn_name, const char *prefix, const char *message) noexcept;

template <class F>
ember_status guard(const char *fn_name, F &&body) noexcept {
    try {
        return body();
    } catch (const Error &e) {
        return set_error(e.status(), fn_name, "", e.what());
    } catch (const std::bad_alloc &) {
        return set_error(EMBER_ERR_OUT_OF_MEMORY, fn_name, "", "out of memory");
    } catch (const std::exception &e) {
        return set_error(EMBER_ERR_INTERNAL, fn_name, "internal error: ", e.what());
    } catch (...) {
        return set_error(EMBER_ERR_INTERNAL, fn_name, "internal error: ", "unknown exception");
    }
}

// Throws EMBER_ERR_INVALID_ARGUMENT naming the parameter when p is NULL.
#define EMBER_REQUIRE_ARG(p) \
    do { if (!(p)) ::ember::fail(EMBER_ERR_INVALID_ARGUMENT, "'%s' must not be NULL", #p); } while (0)

// Fails with EMBER_ERR_INVALID_STATE when fn_name is called from a callback of a call that is still using
// `handle` (see core/callback_scope.hpp): the calls each callback may make are listed in ember.h; the
// others would change or free what that call is using.
inline void refuse_reentry(const void *handle, const char *fn_name) {
    if (const char *running = CallbackScope::running_on(handle))
        fail(EMBER_ERR_INVALID_STATE, "%s cannot be called from a callback of %s on the same handle, which is still "
             "using it (ember.h lists the calls a callback may make)", fn_name, running);
}

// Exports the C function `impl` as the public symbol `name` under version node `node` (cmake/ember.map;
// impl is named outside ember_*, so the map keeps it local). EMBER_SYMBOL_VERSION_DEFAULT marks the
// version new programs link to, EMBER_SYMBOL_VERSION an older one that programs linked before keep
// calling. Without symbol versions (non-ELF) there is only the current function.
#if defined(__ELF__)
#define EMBER_SYMBOL_VERSION(impl, name, node) __asm__(".symver " #impl "," #name "@" node)
#define EMBER_SYMBOL_VERSION_DEFAULT(impl, name, node) __asm__(".symver " #impl "," #name "@@" node)
// The init of a params struct T that grew in a later node (EMBER_1.1 here): name@@EMBER_1.1 writes the whole struct,
// name@EMBER_1 only the v1_size bytes a program built against EMBER_1 passes; both copy from
// defaults(), which returns the whole struct with its defaults. impl_<name>_1_1 is the current one.
#define EMBER_GROWN_PARAMS_INIT_AT(T, name, defaults, v1_size, tag, node)                                    \
    extern "C" EMBER_API void impl_##name##_##tag(T *p) { ::ember::abi::write_defaults(p, defaults(), sizeof(T)); } \
    extern "C" EMBER_API void impl_##name##_1(T *p) { ::ember::abi::write_defaults(p, defaults(), v1_size); }     \
    EMBER_SYMBOL_VERSION_DEFAULT(impl_##name##_##tag, name, node);                                           \
    EMBER_SYMBOL_VERSION(impl_##name##_1, name, "EMBER_1")
// A struct that grew twice: name@EMBER_1 writes v1_size bytes, name@<mid_node> mid_size, the default
// name@@<node> the whole struct.
#define EMBER_GROWN_TWICE_PARAMS_INIT_AT(T, name, defaults, v1_size, mid_size, mid_tag, mid_node, tag, node)      \
    extern "C" EMBER_API void impl_##name##_##tag(T *p) { ::ember::abi::write_defaults(p, defaults(), sizeof(T)); } \
    extern "C" EMBER_API void impl_##name##_##mid_tag(T *p) { ::ember::abi::write_defaults(p, defaults(), mid_size); } \
    extern "C" EMBER_API void impl_##name##_1(T *p) { ::ember::abi::write_defaults(p, defaults(), v1_size); }     \
    EMBER_SYMBOL_VERSION_DEFAULT(impl_##name##_##tag, name, node);                                           \
    EMBER_SYMBOL_VERSION(impl_##name##_##mid_tag, name, mid_node);                                           \
    EMBER_SYMBOL_VERSION(impl_##name##_1, name, "EMBER_1")
// A struct that grew three times: name@EMBER_1 writes v1_size bytes, name@<mid_node> mid_size,
// name@<mid2_node> mid2_size, the default name@@<node> the whole struct.
#define EMBER_GROWN_THRICE_PARAMS_INIT_AT(T, name, defaults, v1_size, mid_size, mid_tag, mid_node, mid2_size, mid2_tag,  \
                                          mid2_node, tag, node)                                                         \
    extern "C" EMBER_API void impl_##name##_##mid2_tag(T *p) { ::ember::abi::write_defaults(p, defaults(), mid2_size); } \
    EMBER_SYMBOL_VERSION(impl_##name##_##mid2_tag, name, mid2_node);                                                   \
    EMBER_GROWN_TWICE_PARAMS_INIT_AT(T, name, defaults, v1_size, mid_size, mid_tag, mid_node, tag, node)
// A struct that grew four times: name@<mid3_node> writes mid3_size bytes, the rest as three times.
#define EMBER_GROWN_FOUR_TIMES_PARAMS_INIT_AT(T, name, defaults, v1_size, mid_size, mid_tag, mid_node, mid2_size,     \
                                              mid2_tag, mid2_node, mid3_size, mid3_tag, mid3_node, tag, node)         \
    extern "C" EMBER_API void impl_##name##_##mid3_tag(T *p) { ::ember::abi::write_defaults(p, defaults(), mid3_size); } \
    EMBER_SYMBOL_VERSION(impl_##name##_##mid3_tag, name, mid3_node);                                                   \
    EMBER_GROWN_THRICE_PARAMS_INIT_AT(T, name, defaults, v1_size, mid_size, mid_tag, mid_node, mid2_size, mid2_tag,      \
                                      mid2_node, tag, node)
#else
#define EMBER_GROWN_PARAMS_INIT_AT(T, name, defaults, v1_size, tag, node)                                    \
    extern "C" void impl_##name##_##tag(T *p) { ::ember::abi::write_defaults(p, defaults(), sizeof(T)); }        \
    extern "C" EMBER_API void name(T *p) { impl_##name##_##tag(p); }
#define EMBER_GROWN_TWICE_PARAMS_INIT_AT(T, name, defaults, v1_size, mid_size, mid_tag, mid_node, tag, node)      \
    EMBER_GROWN_PARAMS_INIT_AT(T, name, defaults, v1_size, tag, node)
#define EMBER_GROWN_THRICE_PARAMS_INIT_AT(T, name, defaults, v1_size, mid_size, mid_tag, mid_node, mid2_size, mid2_tag,  \
                                          mid2_node, tag, node)                                                         \
    EMBER_GROWN_PARAMS_INIT_AT(T, name, defaults, v1_size, tag, node)
#define EMBER_GROWN_FOUR_TIMES_PARAMS_INIT_AT(T, name, defaults, v1_size, mid_size, mid_tag, mid_node, mid2_size,     \
                                              mid2_tag, mid2_node, mid3_size, mid3_tag, mid3_node, tag, node)         \
    EMBER_GROWN_PARAMS_INIT_AT(T, name, defaults, v1_size, tag, node)
#endif
// The structs that grew in EMBER_1.1 and EMBER_1.2 (one growth each so far).
#define EMBER_GROWN_PARAMS_INIT(T, name, defaults, v1_size) EMBER_GROWN_PARAMS_INIT_AT(T, name, defaults, v1_size, 1_1, "EMBER_1.1")
#define EMBER_GROWN_PARAMS_INIT_1_2(T, name, defaults, v1_size) EMBER_GROWN_PARAMS_INIT_AT(T, name, defaults, v1_size, 1_2, "EMBER_1.2")

// The integer in an enum field of a caller's struct. A C caller may store any int there, and loading a
// value outside the enumerators as the C++ enum type is undefined behaviour (UBSan flags it; a compiler
// may fold the range check away), so fields are validated as integers before they are used as enums.
template <class E>
int64_t enum_value(const E &field) {
    std::underlying_type_t<E> v;
    std::memcpy(&v, &field, sizeof v);
    return static_cast<int64_t>(v);
}

// An init function's work: the first `size` bytes of `defaults` into *user (NULL: nothing), with
// struct_size = size (see EMBER_GROWN_PARAMS_INIT).
template <class T>
void write_defaults(T *user, const T &defaults, uint32_t size) {
    if (!user) return;
    std::memcpy(static_cast<void *>(user), &defaults, size);
    user->struct_size = size;
}

// Reads a caller's params struct: copies min(struct_size, sizeof(T)) bytes over the defaults, so an
// older, smaller struct gets defaults for fields it does not have. A struct_size smaller than the
// first version of the struct (v1_size) is an error.
template <class T, class Init>
T read_params(const T *user, size_t v1_size, Init init, const char *what) {
    T p;
    init(&p);
    if (!user) return p;
    if (user->struct_size < v1_size)
        fail(EMBER_ERR_INVALID_ARGUMENT, "%s.struct_size is %u, smaller than any version of the struct (%zu); "
             "call %s_init() first", what, user->struct_size, v1_size, what);
    const size_t n = user->struct_size < sizeof(T) ? user->struct_size : sizeof(T);
    std::memcpy(static_cast<void *>(&p), user, n);
    p.struct_size = sizeof(T);
    return p;
}

} // namespace ember::abi
