// vk_device.cpp — instance, device, memory, pipelines and validation (see vk_device.hpp).
#include "vk_device.hpp"

#include "core/error.hpp"
#include "shaders.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace ember::vk {

namespace {

bool has_device_extension(const Api &api, VkPhysicalDevice pd, const char *name) {
    uint32_t n = 0;
    if (api.vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr) != VK_SUCCESS) return false;
    std::vector<VkExtensionProperties> ext(n);
    if (api.vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, ext.data()) != VK_SUCCESS) return false;
    return std::any_of(ext.begin(), ext.begin() + n, [&](const VkExtensionProperties &e) { return std::strcmp(e.extensionName, name) == 0; });
}

constexpr const char *kValidationLayer = "VK_LAYER_KHRONOS_validation";
constexpr uint32_t kBindings = kBindingCount;  // weights, activations, K cache, V cache, io, states (shaders/common.glsl)

bool env_on(const char *name) {
    const char *v = std::getenv(name);
    return v && v[0] && std::strcmp(v, "0") != 0;
}

const Api &api_or_fail() {
    std::string why;
    const Api *api = load_api(&why);
    if (!api) fail(EMBER_ERR_UNSUPPORTED, "%s", why.c_str());
    return *api;
}

const char *type_name(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
    }
}

// The instance version asked for: the loader's, at most 1.3 (what the headers describe). Features of a
// later core version are only queried when both the instance and the device have it.
uint32_t instance_version(const Api &api) {
    auto enumerate = reinterpret_cast<PFN_vkEnumerateInstanceVersion>(
        api.vkGetInstanceProcAddr(VK_NULL_HANDLE, "vkEnumerateInstanceVersion"));
    uint32_t v = VK_API_VERSION_1_0;
    if (enumerate && enumerate(&v) != VK_SUCCESS) v = VK_API_VERSION_1_0;
    return std::min<uint32_t>(v, VK_API_VERSION_1_3);
}

VkInstance make_instance(const Api &api, bool validation) {
    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "ember";
    app.pEngineName = "ember";
    app.apiVersion = instance_version(api);
    VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ci.pApplicationInfo = &app;
    const char *layers[] = {kValidationLayer};
    const char *exts[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
    if (validation) {
        uint32_t n = 0;
        api.vkEnumerateInstanceLayerProperties(&n, nullptr);
        std::vector<VkLayerProperties> props(n);
        api.vkEnumerateInstanceLayerProperties(&n, props.data());
        const bool have = std::any_of(props.begin(), props.end(),
                                      [](const VkLayerProperties &p) { return std::strcmp(p.layerName, kValidationLayer) == 0; });
        // Asked for and absent is an error, not a silent pass: a test that wants validation must get it.
        if (!have)
            fail(EMBER_ERR_UNSUPPORTED, "EMBER_VULKAN_VALIDATION is set but %s is not installed", kValidationLayer);
        ci.enabledLayerCount = 1;
        ci.ppEnabledLayerNames = layers;
        ci.enabledExtensionCount = 1;
        ci.ppEnabledExtensionNames = exts;
    }
    VkInstance inst = VK_NULL_HANDLE;
    const VkResult r = api.vkCreateInstance(&ci, nullptr, &inst);
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER) fail(EMBER_ERR_UNSUPPORTED, "no Vulkan driver (VK_ERROR_INCOMPATIBLE_DRIVER)");
    check(r, "vkCreateInstance");
    return inst;
}

std::vector<VkPhysicalDevice> physical_devices(const Api &api, VkInstance inst) {
    uint32_t n = 0;
    check(api.vkEnumeratePhysicalDevices(inst, &n, nullptr), "vkEnumeratePhysicalDevices");
    std::vector<VkPhysicalDevice> pds(n);
    if (n) check(api.vkEnumeratePhysicalDevices(inst, &n, pds.data()), "vkEnumeratePhysicalDevices");
    pds.resize(n);
    return pds;
}

DeviceInfo describe(const Api &api, VkPhysicalDevice pd) {
    VkPhysicalDeviceProperties p{};
    api.vkGetPhysicalDeviceProperties(pd, &p);
    DeviceInfo d;
    d.pd = pd;
    d.name = p.deviceName;
    d.type = p.deviceType;
    // Below Vulkan 1.1 the module cannot run (it needs 1.1's core functions).
    d.score = p.apiVersion >= VK_API_VERSION_1_1 ? device_score(p.deviceType) : 0;
    return d;
}

} // namespace

int device_score(VkPhysicalDeviceType type) {
    switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 100;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 50;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 20;
    default: return 1;
    }
}

std::vector<DeviceInfo> Device::list() {
    Api api = api_or_fail();
    VkInstance inst = make_instance(api, false);
    std::vector<DeviceInfo> out;
    try {
        load_instance_fns(api, inst);
        for (VkPhysicalDevice pd : physical_devices(api, inst)) out.push_back(describe(api, pd));
    } catch (...) {
        if (api.vkDestroyInstance) api.vkDestroyInstance(inst, nullptr);
        throw;
    }
    api.vkDestroyInstance(inst, nullptr);
    for (DeviceInfo &d : out) d.pd = VK_NULL_HANDLE;  // gone with the instance
    return out;
}

Device::Device(const OpenParams &p) : api_(api_or_fail()) {
    const bool app_handles = p.instance || p.pd || p.device || p.queue;
    if (app_handles && !(p.instance && p.pd && p.device && p.queue))
        fail(EMBER_ERR_INVALID_ARGUMENT, "vulkan: pass all of VkInstance, VkPhysicalDevice, VkDevice and VkQueue, or none");
    try {
        if (app_handles) {
            own_instance_ = own_device_ = false;
            instance_ = p.instance;
            load_instance_fns(api_, instance_);
            pd_ = p.pd;
            device_ = p.device;
            queue_ = p.queue;
            family_ = p.queue_family;
            load_device_fns(api_, device_, d_);
            // Physical-device queries of a device extension need only its support, not its enabling.
            memory_budget_ = has_device_extension(api_, pd_, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
        } else {
            create_instance(env_on("EMBER_VULKAN_VALIDATION"));
            pick_device(p);
            create_device();
        }
        api_.vkGetPhysicalDeviceMemoryProperties(pd_, &mem_props_);
        VkPhysicalDeviceProperties props{};
        api_.vkGetPhysicalDeviceProperties(pd_, &props);
        max_range_ = props.limits.maxStorageBufferRange;
        if (description_.empty()) description_ = std::string(props.deviceName) + " [" + type_name(props.deviceType) + ", app-provided]";
        create_layouts();
        VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
        pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
        pci.queueFamilyIndex = family_;
        check(d_.vkCreateCommandPool(device_, &pci, nullptr, &once_pool_), "vkCreateCommandPool");
        VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        check(d_.vkCreateFence(device_, &fci, nullptr, &once_fence_), "vkCreateFence");
        throw_if_validation();
    } catch (...) {
        release();
        throw;
    }
}

Device::~Device() { release(); }

void Device::release() {
    if (device_) {
        if (d_.vkDeviceWaitIdle) d_.vkDeviceWaitIdle(device_);
        if (once_fence_) d_.vkDestroyFence(device_, once_fence_, nullptr);
        if (once_pool_) d_.vkDestroyCommandPool(device_, once_pool_, nullptr);
        for (VkPipeline &pl : pipes_)
            if (pl) d_.vkDestroyPipeline(device_, pl, nullptr), pl = VK_NULL_HANDLE;
        if (layout_) d_.vkDestroyPipelineLayout(device_, layout_, nullptr);
        if (set_layout_) d_.vkDestroyDescriptorSetLayout(device_, set_layout_, nullptr);
        if (own_device_ && d_.vkDestroyDevice) d_.vkDestroyDevice(device_, nullptr);
        once_fence_ = VK_NULL_HANDLE, once_pool_ = VK_NULL_HANDLE, layout_ = VK_NULL_HANDLE;
        set_layout_ = VK_NULL_HANDLE, device_ = VK_NULL_HANDLE;
    }
    if (instance_ && own_instance_) {
        if (messenger_ && api_.vkDestroyDebugUtilsMessengerEXT) api_.vkDestroyDebugUtilsMessengerEXT(instance_, messenger_, nullptr);
        api_.vkDestroyInstance(instance_, nullptr);
    }
    messenger_ = VK_NULL_HANDLE, instance_ = VK_NULL_HANDLE;
}

void Device::create_instance(bool validation) {
    instance_ = make_instance(api_, validation);
    load_instance_fns(api_, instance_);
    if (!validation) return;
    if (!api_.vkCreateDebugUtilsMessengerEXT) fail(EMBER_ERR_UNSUPPORTED, "vulkan: validation needs VK_EXT_debug_utils");
    VkDebugUtilsMessengerCreateInfoEXT mci{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    mci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    mci.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    mci.pfnUserCallback = &Device::on_message;
    mci.pUserData = this;
    check(api_.vkCreateDebugUtilsMessengerEXT(instance_, &mci, nullptr, &messenger_), "vkCreateDebugUtilsMessengerEXT");
}

VKAPI_ATTR VkBool32 VKAPI_CALL Device::on_message(VkDebugUtilsMessageSeverityFlagBitsEXT,
                                                 VkDebugUtilsMessageTypeFlagsEXT,
                                                 const VkDebugUtilsMessengerCallbackDataEXT *data, void *self) {
    auto *d = static_cast<Device *>(self);
    std::lock_guard<std::mutex> lock(d->messages_mutex_);
    if (d->messages_.size() < 4096) {
        if (!d->messages_.empty()) d->messages_ += " | ";
        d->messages_ += data && data->pMessage ? data->pMessage : "(no message)";
    }
    return VK_FALSE;
}

void Device::throw_if_validation() {
    std::string m;
    {
        std::lock_guard<std::mutex> lock(messages_mutex_);
        m.swap(messages_);
    }
    if (!m.empty()) fail(EMBER_ERR_BACKEND, "vulkan validation: %s", m.c_str());
}

void Device::provoke_validation_error() {
    VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bi.size = 256;
    bi.usage = 0;  // VUID-VkBufferCreateInfo-usage-requiredbitmask
    VkBuffer b = VK_NULL_HANDLE;
    if (d_.vkCreateBuffer(device_, &bi, nullptr, &b) == VK_SUCCESS && b) d_.vkDestroyBuffer(device_, b, nullptr);
}

void Device::pick_device(const OpenParams &p) {
    std::vector<VkPhysicalDevice> pds = physical_devices(api_, instance_);
    if (pds.empty()) fail(EMBER_ERR_UNSUPPORTED, "vulkan: no device");
    std::vector<DeviceInfo> infos;
    for (VkPhysicalDevice pd : pds) infos.push_back(describe(api_, pd));
    size_t pick = 0;
    if (p.device_index >= 0) {
        if (static_cast<size_t>(p.device_index) >= infos.size())
            fail(EMBER_ERR_INVALID_ARGUMENT, "vulkan: device %d requested, %zu present", p.device_index, infos.size());
        pick = static_cast<size_t>(p.device_index);
    } else {
        for (size_t i = 1; i < infos.size(); ++i)
            if (infos[i].score > infos[pick].score) pick = i;
    }
    if (infos[pick].score <= 0) fail(EMBER_ERR_UNSUPPORTED, "vulkan: device '%s' is below Vulkan 1.1", infos[pick].name.c_str());
    pd_ = infos[pick].pd;
    description_ = infos[pick].name + " [" + type_name(infos[pick].type) + "]";
}

void Device::create_device() {
    uint32_t n = 0;
    api_.vkGetPhysicalDeviceQueueFamilyProperties(pd_, &n, nullptr);
    std::vector<VkQueueFamilyProperties> fams(n);
    api_.vkGetPhysicalDeviceQueueFamilyProperties(pd_, &n, fams.data());
    bool found = false;
    for (uint32_t i = 0; i < n && !found; ++i)
        if (fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT) family_ = i, found = true;
    if (!found) fail(EMBER_ERR_UNSUPPORTED, "vulkan: device has no compute queue");

    // Optional features: detected and reported; no shader requires them (see vk_device.hpp).
    VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    VkPhysicalDeviceProperties base{};
    api_.vkGetPhysicalDeviceProperties(pd_, &base);
    base.apiVersion = std::min(base.apiVersion, instance_version(api_));  // the effective version
    if (base.apiVersion >= VK_API_VERSION_1_2) {
        f2.pNext = &f11;
        f11.pNext = &f12;
        api_.vkGetPhysicalDeviceFeatures2(pd_, &f2);
        features_.float16 = f12.shaderFloat16;
        features_.int8 = f12.shaderInt8;
        features_.storage8 = f12.storageBuffer8BitAccess;
        features_.storage16 = f11.storageBuffer16BitAccess;
    }
    if (base.apiVersion >= VK_API_VERSION_1_3) {
        VkPhysicalDeviceVulkan13Properties p13{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES};
        VkPhysicalDeviceShaderIntegerDotProductProperties dotp{
            VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES};
        VkPhysicalDeviceVulkan13Features f13{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
        VkPhysicalDeviceFeatures2 g2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
        g2.pNext = &f13;
        api_.vkGetPhysicalDeviceFeatures2(pd_, &g2);
        features_.int_dot = f13.shaderIntegerDotProduct;
        VkPhysicalDeviceProperties2 pp{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
        pp.pNext = &p13;
        p13.pNext = &dotp;
        api_.vkGetPhysicalDeviceProperties2(pd_, &pp);
        features_.min_subgroup = p13.minSubgroupSize;
        features_.max_subgroup = p13.maxSubgroupSize;
    }
    VkPhysicalDeviceSubgroupProperties sg{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 pp{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    pp.pNext = &sg;
    api_.vkGetPhysicalDeviceProperties2(pd_, &pp);
    features_.subgroup_size = sg.subgroupSize;
    description_ += format(" (subgroup %u, f16 %s, int8 %s, 16-bit storage %s, 8-bit storage %s, int dot %s)",
                           features_.subgroup_size, features_.float16 ? "yes" : "no", features_.int8 ? "yes" : "no",
                           features_.storage16 ? "yes" : "no", features_.storage8 ? "yes" : "no",
                           features_.int_dot ? "yes" : "no");

    const float prio = 1.0f;
    VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    qci.queueFamilyIndex = family_;
    qci.queueCount = 1;
    qci.pQueuePriorities = &prio;
    VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &qci;
    // VK_EXT_memory_budget where the driver has it: memory_available() then sees other processes' use.
    const char *budget_ext = VK_EXT_MEMORY_BUDGET_EXTENSION_NAME;
    memory_budget_ = has_device_extension(api_, pd_, budget_ext);
    if (memory_budget_) dci.enabledExtensionCount = 1, dci.ppEnabledExtensionNames = &budget_ext;
    check(api_.vkCreateDevice(pd_, &dci, nullptr, &device_), "vkCreateDevice");
    load_device_fns(api_, device_, d_);
    d_.vkGetDeviceQueue(device_, family_, 0, &queue_);
}

void Device::create_layouts() {
    VkDescriptorSetLayoutBinding b[kBindings]{};
    for (uint32_t i = 0; i < kBindings; ++i) {
        b[i].binding = i;
        b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        b[i].descriptorCount = 1;
        b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    VkDescriptorSetLayoutCreateInfo sli{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    sli.bindingCount = kBindings;
    sli.pBindings = b;
    check(d_.vkCreateDescriptorSetLayout(device_, &sli, nullptr, &set_layout_), "vkCreateDescriptorSetLayout");
    VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushBytes};
    VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    pli.setLayoutCount = 1;
    pli.pSetLayouts = &set_layout_;
    pli.pushConstantRangeCount = 1;
    pli.pPushConstantRanges = &range;
    check(d_.vkCreatePipelineLayout(device_, &pli, nullptr, &layout_), "vkCreatePipelineLayout");
}

VkPipeline Device::pipeline(Pipe p) {
    std::lock_guard<std::mutex> lock(pipes_mutex_);
    if (!pipes_[p]) {
        const Spirv code = shader_spirv(p);
        VkShaderModuleCreateInfo smi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
        smi.codeSize = code.words * sizeof(uint32_t);
        smi.pCode = code.code;
        VkShaderModule sm = VK_NULL_HANDLE;
        check(d_.vkCreateShaderModule(device_, &smi, nullptr, &sm), "vkCreateShaderModule");
        VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
        ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
        ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
        ci.stage.module = sm;
        ci.stage.pName = "main";
        ci.layout = layout_;
        const VkResult r = d_.vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &ci, nullptr, &pipes_[p]);
        d_.vkDestroyShaderModule(device_, sm, nullptr);
        check(r, "vkCreateComputePipelines");
    }
    return pipes_[p];
}

uint32_t Device::memory_type(uint32_t bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags fallback) const {
    for (VkMemoryPropertyFlags flags : {want, fallback})
        for (uint32_t i = 0; i < mem_props_.memoryTypeCount; ++i)
            if ((bits & (1u << i)) && (mem_props_.memoryTypes[i].propertyFlags & flags) == flags) return i;
    fail(EMBER_ERR_BACKEND, "vulkan: no suitable memory type");
}

Buffer Device::create_buffer(size_t size, bool host_visible) {
    // Every buffer is bound whole as a storage buffer (one descriptor set per context).
    if (size > max_range_)
        fail(EMBER_ERR_UNSUPPORTED, "vulkan: a buffer of %zu bytes exceeds the device's storage-buffer range (%u)", size,
             max_range_);
    Buffer b;
    b.size = size;
    VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bi.size = std::max<size_t>(size, 16);
    bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    check(d_.vkCreateBuffer(device_, &bi, nullptr, &b.buf), "vkCreateBuffer");
    VkMemoryRequirements req{};
    d_.vkGetBufferMemoryRequirements(device_, b.buf, &req);
    VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    ai.allocationSize = req.size;
    const VkMemoryPropertyFlags hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    ai.memoryTypeIndex = host_visible ? memory_type(req.memoryTypeBits, hv | VK_MEMORY_PROPERTY_HOST_CACHED_BIT, hv)
                                      : memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
    const VkResult r = d_.vkAllocateMemory(device_, &ai, nullptr, &b.mem);
    if (r != VK_SUCCESS) {
        d_.vkDestroyBuffer(device_, b.buf, nullptr);
        if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
            fail(EMBER_ERR_OUT_OF_MEMORY, "vulkan: cannot allocate %zu bytes of %s memory (%s)", size,
                 host_visible ? "host-visible" : "device", result_name(r));
        check(r, "vkAllocateMemory");
    }
    const uint32_t heap = mem_props_.memoryTypes[ai.memoryTypeIndex].heapIndex;
    if (mem_props_.memoryHeaps[heap].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) {
        b.device_bytes = req.size;
        device_bytes_ += req.size;
    }
    check(d_.vkBindBufferMemory(device_, b.buf, b.mem, 0), "vkBindBufferMemory");
    if (host_visible) check(d_.vkMapMemory(device_, b.mem, 0, VK_WHOLE_SIZE, 0, &b.map), "vkMapMemory");
    return b;
}

uint64_t Device::memory_available() const {
    VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
    VkPhysicalDeviceMemoryProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2};
    if (memory_budget_) props.pNext = &budget;
    api_.vkGetPhysicalDeviceMemoryProperties2(pd_, &props);
    const VkPhysicalDeviceMemoryProperties &mp = props.memoryProperties;
    const uint64_t held = device_bytes_.load();
    uint64_t best = 0;
    bool any = false;
    for (uint32_t h = 0; h < mp.memoryHeapCount; ++h) {
        if (!(mp.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)) continue;
        any = true;
        const uint64_t total = memory_budget_ ? budget.heapBudget[h] : mp.memoryHeaps[h].size;
        const uint64_t used = memory_budget_ ? budget.heapUsage[h] : held;
        best = std::max(best, total > used ? total - used : 0);
    }
    return any ? best : UINT64_MAX;  // a device with no device-local heap (none known): no check
}

void Device::destroy(Buffer &b) {
    device_bytes_ -= b.device_bytes;
    if (b.map) d_.vkUnmapMemory(device_, b.mem);
    if (b.buf) d_.vkDestroyBuffer(device_, b.buf, nullptr);
    if (b.mem) d_.vkFreeMemory(device_, b.mem, nullptr);
    b = Buffer{};
}

void Device::submit_wait(VkCommandBuffer cb, VkFence fence) {
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cb;
    {
        std::lock_guard<std::mutex> lock(queue_mutex_);
        check(d_.vkQueueSubmit(queue_, 1, &si, fence), "vkQueueSubmit");
    }
    check(d_.vkWaitForFences(device_, 1, &fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
    check(d_.vkResetFences(device_, 1, &fence), "vkResetFences");
}

void Device::run_once(const std::function<void(VkCommandBuffer)> &record) {
    static std::mutex once_mutex;  // one-off command buffer and fence shared by all callers
    std::lock_guard<std::mutex> lock(once_mutex);
    VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = once_pool_;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    VkCommandBuffer cb = VK_NULL_HANDLE;
    check(d_.vkAllocateCommandBuffers(device_, &ai, &cb), "vkAllocateCommandBuffers");
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    try {
        check(d_.vkBeginCommandBuffer(cb, &bi), "vkBeginCommandBuffer");
        record(cb);
        check(d_.vkEndCommandBuffer(cb), "vkEndCommandBuffer");
        submit_wait(cb, once_fence_);
    } catch (...) {
        d_.vkFreeCommandBuffers(device_, once_pool_, 1, &cb);
        throw;
    }
    d_.vkFreeCommandBuffers(device_, once_pool_, 1, &cb);
    throw_if_validation();
}

void Device::upload(Buffer &dst, size_t dst_off, const void *src, size_t n) {
    if (n == 0) return;
    Buffer st = create_buffer(n, true);
    std::memcpy(st.map, src, n);
    try {
        run_once([&](VkCommandBuffer cb) {
            VkBufferCopy c{0, dst_off, n};
            d_.vkCmdCopyBuffer(cb, st.buf, dst.buf, 1, &c);
        });
    } catch (...) {
        destroy(st);
        throw;
    }
    destroy(st);
}

void Device::download(const Buffer &src, size_t src_off, void *dst, size_t n) {
    if (n == 0) return;
    Buffer st = create_buffer(n, true);
    try {
        run_once([&](VkCommandBuffer cb) {
            VkBufferCopy c{src_off, 0, n};
            d_.vkCmdCopyBuffer(cb, src.buf, st.buf, 1, &c);
        });
        std::memcpy(dst, st.map, n);
    } catch (...) {
        destroy(st);
        throw;
    }
    destroy(st);
}

} // namespace ember::vk
