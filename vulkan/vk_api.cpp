// vk_api.cpp — loading libvulkan and its entry points at run time (see vk_api.hpp).
#include "vk_api.hpp"

#include "core/error.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace ember::vk {

const Api *load_api(std::string *why) {
    static Api api;
    static std::string error;
    static std::once_flag once;
    static bool ok = false;
    std::call_once(once, [] {
        const char *env = std::getenv("EMBER_VULKAN_LOADER");
        const char *path = env && env[0] ? env : "libvulkan.so.1";
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *e = dlerror();
            error = format("no Vulkan loader (%s: %s)", path, e ? e : "not found");
            return;
        }
        api.vkGetInstanceProcAddr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(h, "vkGetInstanceProcAddr"));
        if (!api.vkGetInstanceProcAddr) {
            error = format("%s has no vkGetInstanceProcAddr", path);
            return;
        }
#define EMBER_VK_LOAD_GLOBAL(name) \
    api.name = reinterpret_cast<PFN_##name>(api.vkGetInstanceProcAddr(VK_NULL_HANDLE, #name));
        EMBER_VK_GLOBAL_FNS(EMBER_VK_LOAD_GLOBAL)
        if (!api.vkCreateInstance || !api.vkEnumerateInstanceLayerProperties) {
            error = format("%s lacks the Vulkan global functions", path);
            return;
        }
        ok = true;
    });
    if (!ok) {
        *why = error;
        return nullptr;
    }
    return &api;
}

void load_instance_fns(Api &api, VkInstance instance) {
#define EMBER_VK_LOAD_INSTANCE(name)                                                         \
    api.name = reinterpret_cast<PFN_##name>(api.vkGetInstanceProcAddr(instance, #name));     \
    if (!api.name) fail(EMBER_ERR_UNSUPPORTED, "the Vulkan loader lacks %s (Vulkan 1.1 is needed)", #name);
    EMBER_VK_INSTANCE_FNS(EMBER_VK_LOAD_INSTANCE)
    api.vkCreateDebugUtilsMessengerEXT = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        api.vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT"));
    api.vkDestroyDebugUtilsMessengerEXT = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        api.vkGetInstanceProcAddr(instance, "vkDestroyDebugUtilsMessengerEXT"));
}

void load_device_fns(const Api &api, VkDevice device, DeviceApi &out) {
#define EMBER_VK_LOAD_DEVICE(name)                                                   \
    out.name = reinterpret_cast<PFN_##name>(api.vkGetDeviceProcAddr(device, #name)); \
    if (!out.name) fail(EMBER_ERR_UNSUPPORTED, "the Vulkan device lacks %s", #name);
    EMBER_VK_DEVICE_FNS(EMBER_VK_LOAD_DEVICE)
}

const char *result_name(VkResult r) {
    switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FRAGMENTED_POOL: return "VK_ERROR_FRAGMENTED_POOL";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    default: return "VkResult error";
    }
}

void check(VkResult r, const char *what) {
    if (r == VK_SUCCESS) return;
    if (r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_POOL_MEMORY)
        fail(EMBER_ERR_OUT_OF_MEMORY, "vulkan: %s failed: %s", what, result_name(r));
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER || r == VK_ERROR_LAYER_NOT_PRESENT || r == VK_ERROR_EXTENSION_NOT_PRESENT ||
        r == VK_ERROR_FEATURE_NOT_PRESENT)
        fail(EMBER_ERR_UNSUPPORTED, "vulkan: %s failed: %s", what, result_name(r));
    fail(EMBER_ERR_BACKEND, "vulkan: %s failed: %s (%d)", what, result_name(r), static_cast<int>(r));
}

} // namespace ember::vk
