// api_backend.cpp — backend devices through the C ABI: listing a module backend's devices and choosing the
// Vulkan device (an index or the application's own objects) or the CUDA device and stream (EMBER_1.2);
// every backend's devices as objects that session and engine params name (EMBER_1.4).
#include "abi/handles.hpp"
#include "backend/module_loader.hpp"

#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>

using namespace ember;
using ember::abi::guard;

namespace {

// A module's description of its device number `index`, as the ABI's struct.
ember_device_info device_info(uint32_t index, const ember_mod_device_info &m) {
    ember_device_info d;
    ember_device_info_init(&d);
    d.index = index;
    std::snprintf(d.name, sizeof d.name, "%s", m.name);
    d.type = m.type;
    d.score = m.score;
    return d;
}

// The devices of every backend that can run here, made at the first call (a deque: stable addresses).
const std::deque<ember_device> &all_devices() {
    static std::deque<ember_device> devices;
    static std::once_flag once;
    std::call_once(once, [] {
        auto add = [](ember_backend_kind kind, Backend &b) {
            const std::vector<ember_mod_device_info> devs = module_list_devices(b);
            for (size_t i = 0; i < devs.size(); ++i)
                devices.push_back(ember_device{kind, device_info(static_cast<uint32_t>(i), devs[i])});
        };
        add(EMBER_BACKEND_CPU, backend_require(EMBER_BACKEND_CPU));
        for (ember_backend_kind kind : {EMBER_BACKEND_CUDA, EMBER_BACKEND_VULKAN}) {
            try {
                Backend &b = backend_module(kind);
                if (b.score() > 0) add(kind, b);
            } catch (const Error &) {
                // module, loader or devices missing: the backend has no devices here
            }
        }
    });
    return devices;
}

} // namespace

namespace ember::abi {

ember_backend_kind device_backend(const ember_device *device) {
    for (const ember_device &d : all_devices())
        if (&d == device) return d.backend;
    fail(EMBER_ERR_INVALID_ARGUMENT, "device %p is not one of ember_devices()", static_cast<const void *>(device));
}

ember_backend_kind use_device(const ember_device *device) {
    const ember_backend_kind kind = device_backend(device);
    if (kind != EMBER_BACKEND_CPU) module_select_device(backend_module(kind), static_cast<int32_t>(device->info.index));
    return kind;
}

const ember_device *device_in_use(ember_backend_kind kind) {
    const int32_t index = kind == EMBER_BACKEND_CPU ? 0 : module_open_device(backend_module(kind));
    for (const ember_device &d : all_devices())
        if (d.backend == kind && static_cast<int32_t>(d.info.index) == index) return &d;
    return nullptr;
}

} // namespace ember::abi

extern "C" {

void ember_device_info_init(ember_device_info *info) {
    if (!info) return;
    std::memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
}

ember_status ember_backend_devices(ember_backend_kind backend, ember_device_info *out, size_t capacity,
                                   size_t *out_count) {
    return guard("ember_backend_devices", [&] {
        EMBER_REQUIRE_ARG(out_count);
        if (capacity && !out) fail(EMBER_ERR_INVALID_ARGUMENT, "out is NULL with capacity %zu", capacity);
        const int64_t kind = abi::enum_value(backend);
        if (kind != EMBER_BACKEND_VULKAN && kind != EMBER_BACKEND_CUDA)
            fail(EMBER_ERR_INVALID_ARGUMENT, "backend %lld has no device list (a GPU backend has)", (long long)kind);
        const std::vector<ember_mod_device_info> devs = module_list_devices(backend_module(backend));
        *out_count = devs.size();
        for (size_t i = 0; i < capacity && i < devs.size(); ++i)
            abi::write_out(&out[i], device_info(static_cast<uint32_t>(i), devs[i]), sizeof(ember_device_info),
                           "ember_device_info");
        return EMBER_OK;
    });
}

ember_status ember_devices(const ember_device **out, size_t capacity, size_t *out_count) {
    return guard("ember_devices", [&] {
        EMBER_REQUIRE_ARG(out_count);
        if (capacity && !out) fail(EMBER_ERR_INVALID_ARGUMENT, "out is NULL with capacity %zu", capacity);
        const std::deque<ember_device> &devs = all_devices();
        *out_count = devs.size();
        for (size_t i = 0; i < capacity && i < devs.size(); ++i) out[i] = &devs[i];
        return EMBER_OK;
    });
}

ember_status ember_device_get_info(const ember_device *device, ember_device_info *info, ember_backend_kind *out_backend) {
    return guard("ember_device_get_info", [&] {
        EMBER_REQUIRE_ARG(device);
        const ember_backend_kind kind = abi::device_backend(device);
        if (info) abi::write_out(info, device->info, sizeof(ember_device_info), "ember_device_info");
        if (out_backend) *out_backend = kind;
        return EMBER_OK;
    });
}

void ember_vulkan_device_params_init(ember_vulkan_device_params *params) {
    if (!params) return;
    std::memset(params, 0, sizeof *params);
    params->struct_size = sizeof *params;
    params->device_index = -1;
}

ember_status ember_vulkan_set_device(const ember_vulkan_device_params *params) {
    return guard("ember_vulkan_set_device", [&] {
        EMBER_REQUIRE_ARG(params);
        const ember_vulkan_device_params p = abi::read_params(params, sizeof(ember_vulkan_device_params),
                                                              ember_vulkan_device_params_init, "ember_vulkan_device_params");
        const int n_handles = !!p.instance + !!p.physical_device + !!p.device + !!p.queue;
        if (n_handles != 0 && n_handles != 4)
            fail(EMBER_ERR_INVALID_ARGUMENT, "set all of instance, physical_device, device and queue, or none");
        ember_mod_open_params op{};
        op.struct_size = sizeof op;
        op.device_index = p.device_index;
        op.vk_instance = p.instance, op.vk_physical_device = p.physical_device;
        op.vk_device = p.device, op.vk_queue = p.queue, op.vk_queue_family = p.queue_family;
        module_set_open_params(backend_module(EMBER_BACKEND_VULKAN), op);
        return EMBER_OK;
    });
}

void ember_cuda_device_params_init(ember_cuda_device_params *params) {
    if (!params) return;
    std::memset(params, 0, sizeof *params);
    params->struct_size = sizeof *params;
    params->device_index = -1;
}

ember_status ember_cuda_set_device(const ember_cuda_device_params *params) {
    return guard("ember_cuda_set_device", [&] {
        EMBER_REQUIRE_ARG(params);
        const ember_cuda_device_params p = abi::read_params(params, sizeof(ember_cuda_device_params),
                                                            ember_cuda_device_params_init, "ember_cuda_device_params");
        ember_mod_open_params op{};
        op.struct_size = sizeof op;
        op.device_index = p.device_index;
        op.cuda_stream = p.stream;
        Backend &cuda = backend_module(EMBER_BACKEND_CUDA);
        // The module loads without a driver; say so now rather than at the first model.
        if (cuda.score() <= 0) fail(EMBER_ERR_UNSUPPORTED, "cuda: %s", module_unavailable_reason(cuda).c_str());
        module_set_open_params(cuda, op);
        return EMBER_OK;
    });
}

} // extern "C"
