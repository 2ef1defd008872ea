// module_glue.hpp — the part of a backend's module_api.h table that is the same for every backend,
// written once: the entries that free objects and the ones that forward a context's calls to its C++
// object, each behind module_guard (no exception crosses the C boundary).
//
// A backend defines the three opaque structs of module_api.h (ember_mod_backend, ember_mod_model and
// ember_mod_context, the last holding its context object as `c`, with forward/copy_block/read_kv/
// write_kv) and a Traits struct with its name, kind and the entries that differ (listing and opening
// devices, loading a model, sizing and creating contexts, running one op); optional hooks:
//   static void before_model_free(ember_mod_model *m)   e.g. make the model's device current
//   static void after_call(ember_mod_context *c)       e.g. turn a validation message into a failure
//   static void close(ember_mod_backend *b)             instead of deleting it (a static device)
//   static constexpr uint32_t caps                     module_api.h's EMBER_MOD_CAP_* bits (else 0); with
//                                                      EMBER_MOD_CAP_RECURRENT_STATE the context object also
//                                                      has copy_state / read_state / write_state
//   static int memory_available(ember_mod_backend *, uint64_t *, char *, size_t)   the device's free bytes (else NULL)
// then builds its table with module_table<Traits>().
#pragma once

#include "backend/module_api.h"
#include "backend/module_guard.hpp"

namespace ember {

template <class Traits>
struct ModuleGlue {
    static void after(ember_mod_context *c) {
        if constexpr (requires { Traits::after_call(c); }) Traits::after_call(c);
    }
    static void close(ember_mod_backend *b) {
        if constexpr (requires { Traits::close(b); }) Traits::close(b);
        else delete b;
    }
    static void model_free(ember_mod_model *m) {
        if constexpr (requires { Traits::before_model_free(m); })
            if (m) Traits::before_model_free(m);
        delete m;
    }
    static void context_free(ember_mod_context *c) { delete c; }
    static constexpr uint32_t caps() {
        if constexpr (requires { Traits::caps; }) return Traits::caps;
        else return 0;
    }
    static constexpr auto memory_available() {
        using Fn = int (*)(ember_mod_backend *, uint64_t *, char *, size_t);
        if constexpr (requires { Traits::memory_available; }) return static_cast<Fn>(Traits::memory_available);
        else return static_cast<Fn>(nullptr);
    }
    static constexpr auto host_layout_wants() {
        using Fn = int (*)(const ember_mod_tensor *);
        if constexpr (requires { Traits::host_layout_wants; }) return static_cast<Fn>(Traits::host_layout_wants);
        else return static_cast<Fn>(nullptr);
    }
    static constexpr auto host_layout_rewrite() {
        using Fn = void (*)(const ember_mod_tensor *, void *);
        if constexpr (requires { Traits::host_layout_rewrite; }) return static_cast<Fn>(Traits::host_layout_rewrite);
        else return static_cast<Fn>(nullptr);
    }
    template <class C = ember_mod_context>  // checked where used, once the module has defined C
    static int forward(C *c, const ember_mod_batch *b, char *msg, size_t cap) {
        return module_guard(Traits::name, msg, cap, [&] {
            c->c->forward(*b);
            after(c);
        });
    }
    template <class C = ember_mod_context>  // checked where used, once the module has defined C
    static int copy_block(C *c, int32_t src, int32_t dst, char *msg, size_t cap) {
        return module_guard(Traits::name, msg, cap, [&] {
            c->c->copy_block(src, dst);
            after(c);
        });
    }
    template <class C = ember_mod_context>  // checked where used, once the module has defined C
    static int read_kv(C *c, const int32_t *table, uint32_t n, uint8_t *dst, char *msg, size_t cap) {
        return module_guard(Traits::name, msg, cap, [&] {
            c->c->read_kv(table, n, dst);
            after(c);
        });
    }
    template <class C = ember_mod_context>  // checked where used, once the module has defined C
    static int write_kv(C *c, const int32_t *table, uint32_t n, const uint8_t *src, char *msg, size_t cap) {
        return module_guard(Traits::name, msg, cap, [&] {
            c->c->write_kv(table, n, src);
            after(c);
        });
    }
    template <class C = ember_mod_context>  // checked where used, once the module has defined C
    static int copy_state(C *c, int32_t src, int32_t dst, char *msg, size_t cap) {
        return module_guard(Traits::name, msg, cap, [&] {
            c->c->copy_state(src, dst);
            after(c);
        });
    }
    template <class C = ember_mod_context>
    static int read_state(C *c, int32_t slot, float *dst, char *msg, size_t cap) {
        return module_guard(Traits::name, msg, cap, [&] {
            c->c->read_state(slot, dst);
            after(c);
        });
    }
    template <class C = ember_mod_context>
    static int write_state(C *c, int32_t slot, const float *src, char *msg, size_t cap) {
        return module_guard(Traits::name, msg, cap, [&] {
            c->c->write_state(slot, src);
            after(c);
        });
    }
    static constexpr bool has_state() { return (caps() & EMBER_MOD_CAP_RECURRENT_STATE) != 0; }
    static constexpr auto copy_state_fn() {
        using Fn = int (*)(ember_mod_context *, int32_t, int32_t, char *, size_t);
        if constexpr (has_state()) return static_cast<Fn>(copy_state<>);
        else return static_cast<Fn>(nullptr);
    }
    static constexpr auto read_state_fn() {
        using Fn = int (*)(ember_mod_context *, int32_t, float *, char *, size_t);
        if constexpr (has_state()) return static_cast<Fn>(read_state<>);
        else return static_cast<Fn>(nullptr);
    }
    static constexpr auto write_state_fn() {
        using Fn = int (*)(ember_mod_context *, int32_t, const float *, char *, size_t);
        if constexpr (has_state()) return static_cast<Fn>(write_state<>);
        else return static_cast<Fn>(nullptr);
    }
};

template <class Traits>
constexpr ember_backend_module module_table() {
    using G = ModuleGlue<Traits>;
    return ember_backend_module{
        sizeof(ember_backend_module),
        EMBER_MODULE_API_VERSION,
        Traits::name,
        Traits::kind,
        Traits::list_devices,
        Traits::open,
        G::close,
        Traits::device_name,
        Traits::model_load,
        G::model_free,
        Traits::context_bytes,
        Traits::context_create,
        G::context_free,
        G::template forward<>,
        G::template copy_block<>,
        G::template read_kv<>,
        G::template write_kv<>,
        Traits::run_op,
        G::caps(),
        G::memory_available(),
        G::host_layout_wants(),
        G::host_layout_rewrite(),
        G::copy_state_fn(),
        G::read_state_fn(),
        G::write_state_fn(),
    };
}

} // namespace ember
