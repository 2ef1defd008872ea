// module.cpp — libember-vulkan.so's one exported symbol: the module_api.h table. Every entry catches
// everything (no exception crosses the C boundary) and reports a status and a message; a validation
// message raised during a call fails that call (EMBER_VULKAN_VALIDATION=1).
#include "backend/module_api.h"
#include "backend/module_guard.hpp"
#include "core/error.hpp"
#include "vk_device.hpp"
#include "vk_model.hpp"
#include "vk_ops.hpp"

#include <cstdio>
#include <cstring>
#include <memory>
#include <new>

struct ember_mod_backend {
    std::unique_ptr<ember::vk::Device> dev;
};
struct ember_mod_model {
    std::unique_ptr<ember::vk::Model> m;
};
struct ember_mod_context {
    std::unique_ptr<ember::vk::Context> c;
};

namespace {

using namespace ember;

template <class F>
int guard(char *msg, size_t cap, F &&f) {
    return module_guard("vulkan", msg, cap, static_cast<F &&>(f));
}

int list_devices(ember_mod_device_info *out, uint32_t cap, uint32_t *n_out, char *msg, size_t msg_cap) {
    return guard(msg, msg_cap, [&] {
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

int open(const ember_mod_open_params *p, ember_mod_backend **out, char *msg, size_t msg_cap) {
    return guard(msg, msg_cap, [&] {
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

void close(ember_mod_backend *b) { delete b; }

const char *device_name(const ember_mod_backend *b) { return b ? b->dev->description().c_str() : ""; }

int model_load(ember_mod_backend *b, const ember_mod_model_desc *d, ember_mod_model **out, char *msg, size_t cap) {
    return guard(msg, cap, [&] {
        auto m = std::make_unique<ember_mod_model>();
        m->m = std::make_unique<vk::Model>(*b->dev, *d);
        b->dev->throw_if_validation();
        *out = m.release();
    });
}

void model_free(ember_mod_model *m) { delete m; }

int context_bytes(ember_mod_backend *, const ember_mod_model_desc *d, const ember_mod_context_params *p, uint64_t *out,
                  char *msg, size_t cap) {
    return guard(msg, cap, [&] { *out = vk::context_sizes(*d, *p).bytes(); });
}

int context_create(ember_mod_model *m, const ember_mod_context_params *p, ember_mod_context **out, char *msg, size_t cap) {
    return guard(msg, cap, [&] {
        auto c = std::make_unique<ember_mod_context>();
        c->c = std::make_unique<vk::Context>(*m->m, *p);
        m->m->dev.throw_if_validation();
        *out = c.release();
    });
}

void context_free(ember_mod_context *c) { delete c; }

int forward(ember_mod_context *c, const ember_mod_batch *b, char *msg, size_t cap) {
    return guard(msg, cap, [&] { c->c->forward(*b); });
}
int copy_block(ember_mod_context *c, int32_t src, int32_t dst, char *msg, size_t cap) {
    return guard(msg, cap, [&] { c->c->copy_block(src, dst); });
}
int read_kv(ember_mod_context *c, const int32_t *table, uint32_t n, uint8_t *dst, char *msg, size_t cap) {
    return guard(msg, cap, [&] { c->c->read_kv(table, n, dst); });
}
int write_kv(ember_mod_context *c, const int32_t *table, uint32_t n, const uint8_t *src, char *msg, size_t cap) {
    return guard(msg, cap, [&] { c->c->write_kv(table, n, src); });
}

int run_op(ember_mod_backend *b, const ember_mod_op *op, char *msg, size_t cap) {
    return guard(msg, cap, [&] {
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

const ember_backend_module kModule = {
    sizeof(ember_backend_module),
    EMBER_MODULE_API_VERSION,
    "vulkan",
    EMBER_BACKEND_VULKAN,
    list_devices,
    open,
    close,
    device_name,
    model_load,
    model_free,
    context_bytes,
    context_create,
    context_free,
    forward,
    copy_block,
    read_kv,
    write_kv,
    run_op,
};

} // namespace

extern "C" __attribute__((visibility("default"))) const ember_backend_module *ember_backend_module_v1(void) {
    return &kModule;
}
