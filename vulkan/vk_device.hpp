// vk_device.hpp — one Vulkan device as the module uses it: instance and device (own or the app's),
// detected features, memory, the shared pipelines (one per shader, made once per device) and the
// validation-message trap.
#pragma once

#include "vk_api.hpp"

#include <cstddef>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace ember::vk {

// Every pipeline, one per SPIR-V module (shaders/*.comp; the matmul once per weight layout, vk_weights.hpp).
enum Pipe : int {
    kQuantizeActs, kMatmulF32, kMatmulF16, kMatmulQ4_0, kMatmulQ8_0, kMatmulK, kRmsNorm, kRope, kSwiglu, kGetRows, kKvStore,
    kAttention, kAttentionMerge, kAdd, kGather, kMatmulBF16, kMatmulK2,
    // The model families' ops (windows, softcaps, YaRN, experts).
    kElementwise, kMoeCombine,
    // The hybrid families' ops (graph.h's COPY_COLS to GATED_DELTA; SIGMOID_MUL is an elementwise op).
    kCopyCols, kSsmConv, kGatedDelta,
    // Mamba-2's scan (graph.h's SSM_SCAN).
    kSsmScan, kPipeCount
};
constexpr uint32_t kPushBytes = 128;  // one push-constant range serves every shader
constexpr uint32_t kBindingCount = 6;  // the buffers of the one descriptor set (shaders/common.glsl)

struct DeviceInfo {
    VkPhysicalDevice pd = VK_NULL_HANDLE;
    std::string name;
    VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
    int score = 0;
};

// Devices by score: discrete > integrated > virtual > CPU. A CPU-type device (lavapipe) scores 1,
// the CPU backend's score, so AUTO keeps the native CPU backend (registry ties go to the CPU).
int device_score(VkPhysicalDeviceType type);

// Features that are optional in Vulkan, detected at open. The shaders only need Vulkan 1.1 storage
// buffers of 32-bit words (f16 and 8-bit values are unpacked from words), so nothing here is required;
// it is reported (device_name) and kept for kernels that will use it.
struct Features {
    bool float16 = false, int8 = false, storage16 = false, storage8 = false, int_dot = false;
    uint32_t subgroup_size = 0, min_subgroup = 0, max_subgroup = 0;
};

struct Buffer {
    VkBuffer buf = VK_NULL_HANDLE;
    VkDeviceMemory mem = VK_NULL_HANDLE;
    void *map = nullptr;  // host-visible buffers only
    size_t size = 0;
    VkDeviceSize device_bytes = 0;  // what the allocation took from a device-local heap (else 0)
};

struct OpenParams {
    int device_index = -1;
    VkInstance instance = VK_NULL_HANDLE;  // app-provided handles (all or none)
    VkPhysicalDevice pd = VK_NULL_HANDLE;
    VkDevice device = VK_NULL_HANDLE;
    VkQueue queue = VK_NULL_HANDLE;
    uint32_t queue_family = 0;
};

class Device {
public:
    // Lists the devices of a throwaway instance (throws EMBER_ERR_UNSUPPORTED without a loader).
    static std::vector<DeviceInfo> list();
    explicit Device(const OpenParams &p);
    ~Device();
    Device(const Device &) = delete;
    Device &operator=(const Device &) = delete;

    const DeviceApi &fn() const { return d_; }
    VkDevice device() const { return device_; }
    const std::string &description() const { return description_; }
    const Features &features() const { return features_; }

    Buffer create_buffer(size_t size, bool host_visible);
    void destroy(Buffer &b);
    // Bytes a new allocation may still take from the largest device-local heap: its budget less its
    // usage (VK_EXT_memory_budget, which counts other processes too), or without the extension the heap's
    // size less what this device holds (an upper bound: other processes are not seen). For the core's
    // check before a context's KV cache and activations are allocated.
    uint64_t memory_available() const;
    // Runs record(cb) in a one-off command buffer and waits (uploads, cache copies).
    void run_once(const std::function<void(VkCommandBuffer)> &record);
    // Submits cb and waits on fence (the device's queue is shared by every context: serialised).
    void submit_wait(VkCommandBuffer cb, VkFence fence);
    // host -> device-local buffer through a staging buffer.
    void upload(Buffer &dst, size_t dst_off, const void *src, size_t n);
    void download(const Buffer &src, size_t src_off, void *dst, size_t n);

    // The pipeline of a shader, made at its first use on this device (the driver compiles only the shaders
    // a process runs: on lavapipe each takes LLVM time at every start).
    VkPipeline pipeline(Pipe p);
    VkPipelineLayout layout() const { return layout_; }
    VkDescriptorSetLayout set_layout() const { return set_layout_; }

    // Validation: with EMBER_VULKAN_VALIDATION=1 the Khronos layer runs and every message it sends
    // (warning or error) is kept; throw_if_validation() then throws EMBER_ERR_BACKEND with them, so the
    // call that caused one fails. validation_on() says whether the layer is really active.
    bool validation_on() const { return messenger_ != VK_NULL_HANDLE; }
    void throw_if_validation();
    // Tests: makes an invalid call (a buffer with no usage) that the layer must report.
    void provoke_validation_error();

private:
    void release();
    void create_instance(bool validation);
    void pick_device(const OpenParams &p);
    void create_device();
    void create_layouts();
    uint32_t memory_type(uint32_t bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags fallback) const;
    static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                     VkDebugUtilsMessageTypeFlagsEXT types,
                                                     const VkDebugUtilsMessengerCallbackDataEXT *data, void *self);

    Api api_;
    DeviceApi d_;
    bool own_instance_ = true, own_device_ = true;
    VkInstance instance_ = VK_NULL_HANDLE;
    VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
    VkPhysicalDevice pd_ = VK_NULL_HANDLE;
    VkDevice device_ = VK_NULL_HANDLE;
    VkQueue queue_ = VK_NULL_HANDLE;
    uint32_t family_ = 0;
    VkPhysicalDeviceMemoryProperties mem_props_{};
    bool memory_budget_ = false;                 // VK_EXT_memory_budget: supported (and enabled on our own device)
    std::atomic<uint64_t> device_bytes_{0};      // device-local memory this device holds (create_buffer / destroy)
    uint32_t max_range_ = 0;
    Features features_;
    std::string description_;
    VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
    VkPipelineLayout layout_ = VK_NULL_HANDLE;
    std::mutex pipes_mutex_;
    VkPipeline pipes_[kPipeCount] = {};
    std::mutex queue_mutex_;
    VkCommandPool once_pool_ = VK_NULL_HANDLE;
    VkFence once_fence_ = VK_NULL_HANDLE;
    std::mutex messages_mutex_;
    std::string messages_;
};

} // namespace ember::vk
