// module.cpp — libember-cuda.so's one exported symbol: the module_api.h table. Every entry catches
// everything (no exception crosses the C boundary) and reports a status and a message.
#include "backend/module_api.h"
#include "backend/module_guard.hpp"
#include "core/error.hpp"
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

namespace {

using namespace ember;

template <class F>
int guard(char *msg, size_t cap, F &&f) {
    return module_guard("cuda", msg, cap, static_cast<F &&>(f));
}

// Fails with the reason when no device is usable, so that the registry can say why.
int list_devices(ember_mod_device_info *out, uint32_t cap, uint32_t *n_out, char *msg, size_t msg_cap) {
    return guard(msg, msg_cap, [&] {
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

int open(const ember_mod_open_params *p, ember_mod_backend **out, char *msg, size_t msg_cap) {
    return guard(msg, msg_cap, [&] {
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

void close(ember_mod_backend *b) { delete b; }

const char *device_name(const ember_mod_backend *b) { return b ? b->dev->description().c_str() : ""; }

int model_load(ember_mod_backend *b, const ember_mod_model_desc *d, ember_mod_model **out, char *msg, size_t cap) {
    return guard(msg, cap, [&] {
        auto m = std::make_unique<ember_mod_model>();
        m->m = std::make_unique<cu::Model>(*b->dev, *d);
        *out = m.release();
    });
}

void model_free(ember_mod_model *m) {
    if (m) m->m->dev.make_current();
    delete m;
}

int context_bytes(ember_mod_backend *, const ember_mod_model_desc *d, const ember_mod_context_params *p, uint64_t *out,
                  char *msg, size_t cap) {
    return guard(msg, cap, [&] {
        const cu::Hyper hp = cu::hyper_of(*d);
        *out = cu::context_sizes(hp, *p).bytes(hp);
    });
}

int context_create(ember_mod_model *m, const ember_mod_context_params *p, ember_mod_context **out, char *msg, size_t cap) {
    return guard(msg, cap, [&] {
        auto c = std::make_unique<ember_mod_context>();
        c->c = std::make_unique<cu::Context>(*m->m, *p);
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
    return guard(msg, cap, [&] { cu::run_op(*b->dev, *op); });
}

const ember_backend_module kModule = {
    sizeof(ember_backend_module),
    EMBER_MODULE_API_VERSION,
    "cuda",
    EMBER_BACKEND_CUDA,
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
