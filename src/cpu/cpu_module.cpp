// cpu_module.cpp — the CPU backend as a module_api.h table, like the GPU modules' but linked into
// libember (backend/registry.cpp registers it first). Its one device is this machine's CPU; weights are
// used in place from the file mapping (the description's tensors point into it).
#include "backend/module_api.h"
#include "backend/module_glue.hpp"
#include "cpu/cpu_context.hpp"
#include "cpu/cpu_ops.hpp"
#include "cpu/rows16.hpp"

#include <cstdio>
#include <memory>
#include <thread>

// The one CPU "device": static, so that opening it allocates nothing (the core keeps a device open for
// the process's life, and an allocation made inside a failing call would count as leaked).
struct ember_mod_backend {
    char name[64];
};
struct ember_mod_model {
    std::unique_ptr<ember::cpu::CpuModel> m;
};
struct ember_mod_context {
    std::unique_ptr<ember::cpu::CpuContext> c;
};

namespace {

using namespace ember;

struct Cpu {
    static constexpr const char *name = "cpu";
    static constexpr uint32_t kind = EMBER_BACKEND_CPU;
    static constexpr uint32_t caps =
        EMBER_MOD_CAP_WINDOW_BLOCKS | EMBER_MOD_CAP_PRECISION_HIGH | EMBER_MOD_CAP_RECURRENT_STATE | EMBER_MOD_CAP_KEEP_STATES |
        EMBER_MOD_CAP_INPUT_ROWS;

    static int list_devices(ember_mod_device_info *out, uint32_t cap, uint32_t *n_out, char *msg, size_t msg_cap) {
        return module_guard(name, msg, msg_cap, [&] {
            *n_out = 1;
            if (cap == 0) return;
            std::snprintf(out[0].name, sizeof out[0].name, "CPU (%u threads, %s kernels)",
                          std::thread::hardware_concurrency(), cpu::isa_name());
            out[0].type = 4;   // VkPhysicalDeviceType's CPU
            out[0].score = 1;  // always usable; any GPU backend outranks it
        });
    }

    static int open(const ember_mod_open_params *, ember_mod_backend **out, char *msg, size_t msg_cap) {
        return module_guard(name, msg, msg_cap, [&] {
            static ember_mod_backend the_cpu = [] {
                ember_mod_backend b{};
                std::snprintf(b.name, sizeof b.name, "cpu (%s kernels)", cpu::isa_name());
                return b;
            }();
            *out = &the_cpu;
        });
    }

    static void close(ember_mod_backend *) {}

    static const char *device_name(const ember_mod_backend *b) { return b ? b->name : ""; }

    static int model_load(ember_mod_backend *, const ember_mod_model_desc *d, ember_mod_model **out, char *msg, size_t cap) {
        return module_guard(name, msg, cap, [&] {
            auto m = std::make_unique<ember_mod_model>();
            m->m = std::make_unique<cpu::CpuModel>(*d);
            *out = m.release();
        });
    }

    static int context_bytes(ember_mod_backend *, const ember_mod_model_desc *d, const ember_mod_context_params *p, uint64_t *out,
                      char *msg, size_t cap) {
        return module_guard(name, msg, cap, [&] { *out = cpu::cpu_context_sizes(*d, *p).bytes(); });
    }

    static int context_create(ember_mod_model *m, const ember_mod_context_params *p, ember_mod_context **out, char *msg, size_t cap) {
        return module_guard(name, msg, cap, [&] {
            auto c = std::make_unique<ember_mod_context>();
            c->c = std::make_unique<cpu::CpuContext>(*m->m, *p, p->share_threads_with ? p->share_threads_with->c.get() : nullptr);
            *out = c.release();
        });
    }

    static int run_op(ember_mod_backend *, const ember_mod_op *op, char *msg, size_t cap) {
        return module_guard(name, msg, cap, [&] {
            if (op->kind == EMBER_MOD_OP_VALIDATION_PROBE) fail(EMBER_ERR_UNSUPPORTED, "cpu: no validation layer");
            cpu::run_op(*op);
        });
    }

    // Q4_K, Q6_K, Q4_0 and Q8_0 interleaved 16 rows at a time where the kernel level reads them so
    // (cpu/rows16.hpp).
    static int host_layout_wants(const ember_mod_tensor *t) {
        return t->type < EMBER_MOD_TYPE_HOST_LAYOUT && cpu::rows16_native(static_cast<DType>(t->type)) && t->n_dims == 2 &&
               t->ne[1] >= cpu::kRows16;
    }
    static void host_layout_rewrite(const ember_mod_tensor *t, void *data) {
        const auto type = static_cast<DType>(t->type);
        cpu::rows16_pack(type, static_cast<uint8_t *>(data), t->ne[1], dtype_row_bytes(type, static_cast<uint64_t>(t->ne[0])));
    }

};

const ember_backend_module kModule = module_table<Cpu>();

} // namespace

extern "C" const ember_backend_module *ember_cpu_backend_module(void) { return &kModule; }
