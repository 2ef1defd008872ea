// module.cpp — libember-cuda.so's one exported symbol: the module_api.h table, built by
// module_glue.hpp's module_table() from the CUDA entries below. Every entry catches everything (no
// exception crosses the C boundary) and reports a status and a message.
#include "backend/module_api.h"
#include "backend/module_guard.hpp"
#include "core/error.hpp"
#include "cu_check.hpp"
#include "device.hpp"
#include "model.hpp"
#include "ops.hpp"

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>

struct ember_mod_backend {
    std::unique_ptr<ember::cu::Device> dev;
};
struct ember_mod_model {
    std::unique_ptr<ember::cu::Model> m;
};
struct ember_mod_context {
    std::unique_ptr<ember::cu::Context> c;
};

// After the structs: the glue's non-template-dependent uses of them (c->c->forward) need them complete.
#include "backend/module_glue.hpp"

namespace {

using namespace ember;

// The entries that differ between backends; module_glue.hpp writes the rest (freeing, forwarding a
// context's calls), each behind module_guard.
struct Cuda {
    static constexpr const char *name = "cuda";
    static constexpr uint32_t kind = EMBER_BACKEND_CUDA;
    // program.hpp's ContextSizes: the window pool, the recurrent state slots (recurrent.hpp).
    static constexpr uint32_t caps = EMBER_MOD_CAP_WINDOW_BLOCKS | EMBER_MOD_CAP_RECURRENT_STATE | EMBER_MOD_CAP_KEEP_STATES |
                                     EMBER_MOD_CAP_INPUT_ROWS;   // model.hpp's input_buf

    // Fails with the reason when no device is usable, so that the registry can say why.
    static int list_devices(ember_mod_device_info *out, uint32_t cap, uint32_t *n_out, char *msg, size_t msg_cap) {
        return module_guard(name, msg, msg_cap, [&] {
            const auto devs = cu::device_list();
            const cu::DeviceInfo *usable = nullptr;
            for (const auto &d : devs)
                if (d.score > 0) usable = &d;
            if (!usable) fail(EMBER_ERR_UNSUPPORTED, "cuda: no usable device: %s", devs[0].why.c_str());
            *n_out = static_cast<uint32_t>(devs.size());
            for (uint32_t i = 0; i < cap && i < devs.size(); ++i) {
                std::snprintf(out[i].name, sizeof out[i].name, "%s", devs[i].name.c_str());
                out[i].type = devs[i].integrated ? 1 : 2;  // VkPhysicalDeviceType's numbers: 1 integrated, 2 discrete
                out[i].score = devs[i].score;
            }
        });
    }

    static int open(const ember_mod_open_params *p, ember_mod_backend **out, char *msg, size_t msg_cap) {
        return module_guard(name, msg, msg_cap, [&] {
            cu::OpenParams op;
            if (p) {
                op.ordinal = p->device_index;
                if (p->struct_size >= offsetof(ember_mod_open_params, cuda_stream) + sizeof p->cuda_stream)
                    op.stream = static_cast<cudaStream_t>(p->cuda_stream);
            }
            auto b = std::make_unique<ember_mod_backend>();
            b->dev = std::make_unique<cu::Device>(op);
            *out = b.release();
        });
    }

    static const char *device_name(const ember_mod_backend *b) { return b ? b->dev->description().c_str() : ""; }

    static int model_load(ember_mod_backend *b, const ember_mod_model_desc *d, ember_mod_model **out, char *msg, size_t cap) {
        return module_guard(name, msg, cap, [&] {
            auto m = std::make_unique<ember_mod_model>();
            m->m = std::make_unique<cu::Model>(*b->dev, *d);
            *out = m.release();
        });
    }

    // The weights are freed on their device.
    static void before_model_free(ember_mod_model *m) { m->m->dev.make_current(); }

    static int context_bytes(ember_mod_backend *, const ember_mod_model_desc *d, const ember_mod_context_params *p,
                             uint64_t *out, char *msg, size_t cap) {
        return module_guard(name, msg, cap, [&] { *out = cu::context_sizes(cu::program_of(*d), *p).bytes(); });
    }

    static int context_create(ember_mod_model *m, const ember_mod_context_params *p, ember_mod_context **out, char *msg,
                              size_t cap) {
        return module_guard(name, msg, cap, [&] {
            auto c = std::make_unique<ember_mod_context>();
            c->c = std::make_unique<cu::Context>(*m->m, *p);
            *out = c.release();
        });
    }

    // What the driver says is free on the device (what other processes and this one's models hold is
    // taken already), for the core's check before a context's KV cache and activations are allocated.
    static int memory_available(ember_mod_backend *b, uint64_t *out, char *msg, size_t cap) {
        return module_guard(name, msg, cap, [&] {
            b->dev->make_current();
            size_t free = 0, total = 0;
            EMBER_CU(cudaMemGetInfo(&free, &total));
            *out = free;
        });
    }

    static int run_op(ember_mod_backend *b, const ember_mod_op *op, char *msg, size_t cap) {
        return module_guard(name, msg, cap, [&] { cu::run_op(*b->dev, *op); });
    }
};

const ember_backend_module kModule = module_table<Cuda>();

} // namespace

extern "C" __attribute__((visibility("default"))) const ember_backend_module *ember_backend_module_v1(void) {
    return &kModule;
}
