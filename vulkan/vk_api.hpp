// vk_api.hpp — the Vulkan entry points the module uses, loaded at run time from libvulkan.so.1 (no
// link-time dependency: libember and this module run where no loader is installed). Written against
// the 1.3.239 headers with VK_NO_PROTOTYPES; the lists below are the only Vulkan functions called.
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <string>

namespace ember::vk {

#define EMBER_VK_GLOBAL_FNS(X) \
    X(vkCreateInstance)        \
    X(vkEnumerateInstanceLayerProperties) \
    X(vkEnumerateInstanceExtensionProperties)

#define EMBER_VK_INSTANCE_FNS(X)                   \
    X(vkDestroyInstance)                           \
    X(vkEnumeratePhysicalDevices)                  \
    X(vkGetPhysicalDeviceProperties)               \
    X(vkGetPhysicalDeviceProperties2)              \
    X(vkGetPhysicalDeviceFeatures2)                \
    X(vkGetPhysicalDeviceQueueFamilyProperties)    \
    X(vkGetPhysicalDeviceMemoryProperties)         \
    X(vkGetPhysicalDeviceMemoryProperties2)        \
    X(vkEnumerateDeviceExtensionProperties)        \
    X(vkCreateDevice)                              \
    X(vkGetDeviceProcAddr)

#define EMBER_VK_DEVICE_FNS(X)      \
    X(vkDestroyDevice)              \
    X(vkGetDeviceQueue)             \
    X(vkCreateBuffer)               \
    X(vkDestroyBuffer)              \
    X(vkGetBufferMemoryRequirements)\
    X(vkAllocateMemory)             \
    X(vkFreeMemory)                 \
    X(vkBindBufferMemory)           \
    X(vkMapMemory)                  \
    X(vkUnmapMemory)                \
    X(vkCreateShaderModule)         \
    X(vkDestroyShaderModule)        \
    X(vkCreateDescriptorSetLayout)  \
    X(vkDestroyDescriptorSetLayout) \
    X(vkCreatePipelineLayout)       \
    X(vkDestroyPipelineLayout)      \
    X(vkCreateComputePipelines)     \
    X(vkDestroyPipeline)            \
    X(vkCreateDescriptorPool)       \
    X(vkDestroyDescriptorPool)      \
    X(vkAllocateDescriptorSets)     \
    X(vkUpdateDescriptorSets)       \
    X(vkCreateCommandPool)          \
    X(vkDestroyCommandPool)         \
    X(vkAllocateCommandBuffers)     \
    X(vkFreeCommandBuffers)         \
    X(vkBeginCommandBuffer)         \
    X(vkEndCommandBuffer)           \
    X(vkResetCommandBuffer)         \
    X(vkCmdBindPipeline)            \
    X(vkCmdBindDescriptorSets)      \
    X(vkCmdPushConstants)           \
    X(vkCmdDispatch)                \
    X(vkCmdPipelineBarrier)         \
    X(vkCmdCopyBuffer)              \
    X(vkCmdFillBuffer)              \
    X(vkQueueSubmit)                \
    X(vkCreateFence)                \
    X(vkDestroyFence)               \
    X(vkWaitForFences)              \
    X(vkResetFences)                \
    X(vkDeviceWaitIdle)

#define EMBER_VK_DECLARE(name) PFN_##name name = nullptr;

struct Api {
    PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
    EMBER_VK_GLOBAL_FNS(EMBER_VK_DECLARE)
    EMBER_VK_INSTANCE_FNS(EMBER_VK_DECLARE)
    // VK_EXT_debug_utils (validation runs only)
    PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT = nullptr;
    PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT = nullptr;
};

struct DeviceApi {
    EMBER_VK_DEVICE_FNS(EMBER_VK_DECLARE)
};

// The process's loader: libvulkan.so.1, or $EMBER_VULKAN_LOADER. Loaded once and never unloaded; the
// global functions are filled in. Returns nullptr and sets *why when the library or its entry is missing.
const Api *load_api(std::string *why);
// Fills the instance-level functions of api for `instance` (a copy per instance).
void load_instance_fns(Api &api, VkInstance instance);
void load_device_fns(const Api &api, VkDevice device, DeviceApi &out);

// Throws ember::Error for a failed VkResult: EMBER_ERR_OUT_OF_MEMORY for the out-of-memory results,
// EMBER_ERR_BACKEND (naming the result, e.g. VK_ERROR_DEVICE_LOST) for the others.
void check(VkResult r, const char *what);
const char *result_name(VkResult r);

} // namespace ember::vk
