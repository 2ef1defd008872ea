// module.cpp — libember-vulkan.so's one exported symbol: the module_api.h table, built by
// backend/module_glue.hpp from the entries that are this backend's own. Every entry catches everything
// (no exception crosses the C boundary) and reports a status and a message; a validation message raised
// during a call fails that call (EMBER_VULKAN_VALIDATION=1).
#include "backend/module_api.h"
#include "core/error.hpp"
#include "vk_device.hpp"
#include "vk_model.hpp"
#include "vk_ops.hpp"

#include <cstdio>
#include <memory>

struct ember_mod_backend {
    std::unique_ptr<ember::vk::Device> dev;
};
struct ember_mod_model {
    std::unique_ptr<ember::vk::Model> m;
};
struct ember_mod_context {
    std::unique_ptr<ember::vk::Context> c;
};

// The glue builds the table from the structs above.
#include "backend/module_glue.hpp"

namespace {

using namespace ember;

struct Vulkan {
    static constexpr const char *name = "vulkan";
    static constexpr uint32_t kind = EMBER_BACKEND_VULKAN;
    static constexpr uint32_t caps = EMBER_MOD_CAP_WINDOW_BLOCKS | EMBER_MOD_CAP_RECURRENT_STATE | EMBER_MOD_CAP_KEEP_STATES |   // vk_model.hpp's ContextSizes, state slots
                                     EMBER_MOD_CAP_INPUT_ROWS;   // Model::input_buf

    static int list_devices(ember_mod_device_info *out, uint32_t cap, uint32_t *n_out, char *msg, size_t msg_cap) {
        return module_guard(name, msg, msg_cap, [&] {
            const auto devs = vk::Device::list();
            if (devs.empty()) fail(EMBER_ERR_UNSUPPORTED, "vulkan: the loader found no device");
            *n_out = static_cast<uint32_t>(devs.size());
            for (uint32_t i = 0; i < cap && i < devs.size(); ++i) {
                std::snprintf(out[i].name, sizeof out[i].name, "%s", devs[i].name.c_str());
                out[i].type = static_cast<uint32_t>(devs[i].type);
                out[i].score = devs[i].score;
            }
        });
    }

    static int open(const ember_mod_open_params *p, ember_mod_backend **out, char *msg, size_t msg_cap) {
        return module_guard(name, msg, msg_cap, [&] {
            vk::OpenParams op;
            if (p) {
                op.device_index = p->device_index;
                op.instance = static_cast<VkInstance>(p->vk_instance);
                op.pd = static_cast<VkPhysicalDevice>(p->vk_physical_device);
                op.device = static_cast<VkDevice>(p->vk_device);
                op.queue = static_cast<VkQueue>(p->vk_queue);
                op.queue_family = p->vk_queue_family;
            }
            auto b = std::make_unique<ember_mod_backend>();
            b->dev = std::make_unique<vk::Device>(op);
            *out = b.release();
        });
    }

    static const char *device_name(const ember_mod_backend *b) { return b ? b->dev->description().c_str() : ""; }

    static int model_load(ember_mod_backend *b, const ember_mod_model_desc *d, ember_mod_model **out, char *msg, size_t cap) {
        return module_guard(name, msg, cap, [&] {
            auto m = std::make_unique<ember_mod_model>();
            m->m = std::make_unique<vk::Model>(*b->dev, *d);
            b->dev->throw_if_validation();
            *out = m.release();
        });
    }

    static int context_bytes(ember_mod_backend *, const ember_mod_model_desc *d, const ember_mod_context_params *p,
                             uint64_t *out, char *msg, size_t cap) {
        return module_guard(name, msg, cap, [&] { *out = vk::context_sizes(vk::plan_program(*d), *p).bytes(); });
    }

    static int context_create(ember_mod_model *m, const ember_mod_context_params *p, ember_mod_context **out, char *msg,
                              size_t cap) {
        return module_guard(name, msg, cap, [&] {
            auto c = std::make_unique<ember_mod_context>();
            c->c = std::make_unique<vk::Context>(*m->m, *p);
            m->m->dev.throw_if_validation();
            *out = c.release();
        });
    }

    // The device-local heap's free bytes (vk_device.hpp), for the core's check before a context's KV
    // cache and activations are allocated.
    static int memory_available(ember_mod_backend *b, uint64_t *out, char *msg, size_t cap) {
        return module_guard(name, msg, cap, [&] { *out = b->dev->memory_available(); });
    }

    static int run_op(ember_mod_backend *b, const ember_mod_op *op, char *msg, size_t cap) {
        return module_guard(name, msg, cap, [&] {
            if (op->kind == EMBER_MOD_OP_VALIDATION_PROBE) {
                if (!b->dev->validation_on()) fail(EMBER_ERR_UNSUPPORTED, "vulkan: the validation layer is not active");
                b->dev->provoke_validation_error();
                b->dev->throw_if_validation();
                fail(EMBER_ERR_INTERNAL, "vulkan: the validation layer did not report the invalid call");
            }
            vk::run_op(*b->dev, *op);
            b->dev->throw_if_validation();
        });
    }

    // A validation message raised during a context's call (forward, KV copies) fails that call.
    static void after_call(ember_mod_context *c) { c->c->device().throw_if_validation(); }
};

const ember_backend_module kModule = module_table<Vulkan>();

} // namespace

extern "C" __attribute__((visibility("default"))) const ember_backend_module *ember_backend_module_v1(void) {
    return &kModule;
}
