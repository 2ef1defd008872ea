/* test_vulkan_app_device.c — the public device API of the Vulkan backend: listing devices, and running
 * on the application's own VkInstance/VkDevice/VkQueue (made here on the first device, lavapipe in CI):
 * the output equals the CPU backend's, ember destroys none of the application's objects, and once the
 * model is freed the application can destroy its device. Skips (77) without a Vulkan loader or device. */
#include "test_api_util.h"

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static PFN_vkGetInstanceProcAddr gipa;
#define IFN(inst, name) ((PFN_##name)gipa(inst, #name))

struct app_vk {
    VkInstance instance;
    VkPhysicalDevice pd;
    VkDevice device;
    VkQueue queue;
    uint32_t family;
};

/* The application's Vulkan setup; returns 0 where there is no loader or device. */
static int app_vk_create(struct app_vk *v) {
    void *lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return 0;
    gipa = (PFN_vkGetInstanceProcAddr)dlsym(lib, "vkGetInstanceProcAddr");
    if (!gipa) return 0;
    VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.apiVersion = VK_API_VERSION_1_1;
    VkInstanceCreateInfo ci = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ci.pApplicationInfo = &app;
    if (IFN(NULL, vkCreateInstance)(&ci, NULL, &v->instance) != VK_SUCCESS) return 0;
    uint32_t n = 1;
    VkResult r = IFN(v->instance, vkEnumeratePhysicalDevices)(v->instance, &n, &v->pd);
    if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || n == 0) return 0;
    VkQueueFamilyProperties fams[16];
    uint32_t nf = 16;
    IFN(v->instance, vkGetPhysicalDeviceQueueFamilyProperties)(v->pd, &nf, fams);
    v->family = UINT32_MAX;
    for (uint32_t i = 0; i < nf && v->family == UINT32_MAX; ++i)
        if (fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT) v->family = i;
    assert_true(v->family != UINT32_MAX);
    const float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    qci.queueFamilyIndex = v->family;
    qci.queueCount = 1;
    qci.pQueuePriorities = &prio;
    VkDeviceCreateInfo dci = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &qci;
    assert_int_equal(IFN(v->instance, vkCreateDevice)(v->pd, &dci, NULL, &v->device), VK_SUCCESS);
    PFN_vkGetDeviceProcAddr gdpa = IFN(v->instance, vkGetDeviceProcAddr);
    ((PFN_vkGetDeviceQueue)gdpa(v->device, "vkGetDeviceQueue"))(v->device, v->family, 0, &v->queue);
    return 1;
}

static void app_vk_destroy(struct app_vk *v) {
    PFN_vkGetDeviceProcAddr gdpa = IFN(v->instance, vkGetDeviceProcAddr);
    ((PFN_vkDeviceWaitIdle)gdpa(v->device, "vkDeviceWaitIdle"))(v->device);
    ((PFN_vkDestroyDevice)gdpa(v->device, "vkDestroyDevice"))(v->device, NULL);
    IFN(v->instance, vkDestroyInstance)(v->instance, NULL);
}

static void greedy(ember_model *m, ember_backend_kind backend, ember_token *out, size_t n) {
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.n_ctx = 64;
    sp.backend = backend;
    ember_session *s = NULL;
    const ember_status st = ember_session_create(m, &sp, &s);
    if (st != EMBER_OK) fprintf(stderr, "%s\n", ember_last_error());
    assert_int_equal(st, EMBER_OK);
    ember_token prompt[16];
    const size_t np = test_tokenize(m, "Once upon a time", prompt, 16);
    assert_int_equal(ember_session_feed(s, prompt, np), EMBER_OK);
    ember_sampler *smp = test_greedy_sampler();
    for (size_t i = 0; i < n; ++i) {
        const char *piece;
        size_t len;
        assert_int_equal(ember_generate_next(s, smp, &out[i], &piece, &len), EMBER_OK);
    }
    ember_sampler_free(smp);
    ember_session_free(s);
}

static void test_devices_listed(void **state) {
    (void)state;
    ember_device_info devs[8];
    for (int i = 0; i < 8; ++i) ember_device_info_init(&devs[i]);
    size_t n = 0;
    assert_int_equal(ember_backend_devices(EMBER_BACKEND_VULKAN, devs, 8, &n), EMBER_OK);
    assert_true(n >= 1);
    for (size_t i = 0; i < n && i < 8; ++i) {
        printf("device %u: %s (type %u, score %d)\n", devs[i].index, devs[i].name, devs[i].type, devs[i].score);
        assert_true(devs[i].name[0] != 0);
        assert_true(devs[i].score > 0);
    }
    assert_int_equal(ember_backend_devices(EMBER_BACKEND_CPU, NULL, 0, &n), EMBER_ERR_INVALID_ARGUMENT);
    /* some handles but not all */
    ember_vulkan_device_params p;
    ember_vulkan_device_params_init(&p);
    assert_int_equal(p.device_index, -1);
    p.instance = (void *)devs;
    assert_int_equal(ember_vulkan_set_device(&p), EMBER_ERR_INVALID_ARGUMENT);
}

static void test_app_device(void **state) {
    (void)state;
    const char *path = test_repo_model("stories15M-q8_0.gguf");
    test_require(path, "models/stories15M-q8_0.gguf");
    struct app_vk v;
    memset(&v, 0, sizeof v);
    assert_true(app_vk_create(&v));
    ember_vulkan_device_params p;
    ember_vulkan_device_params_init(&p);
    p.instance = v.instance, p.physical_device = v.pd, p.device = v.device, p.queue = v.queue;
    p.queue_family = v.family;
    assert_int_equal(ember_vulkan_set_device(&p), EMBER_OK);

    ember_model *m = NULL;
    assert_int_equal(ember_model_load(path, NULL, &m), EMBER_OK);
    ember_token cpu[12], vk[12];
    greedy(m, EMBER_BACKEND_CPU, cpu, 12);
    greedy(m, EMBER_BACKEND_VULKAN, vk, 12);
    assert_memory_equal(cpu, vk, sizeof cpu);
    /* While the model holds the device, it cannot be switched. */
    assert_int_equal(ember_vulkan_set_device(&p), EMBER_ERR_INVALID_STATE);
    ember_model_free(m);
    /* Ember's objects are gone with the model: the device may be chosen again, and destroyed. */
    assert_int_equal(ember_vulkan_set_device(&p), EMBER_OK);
    app_vk_destroy(&v);
}

int main(void) {
    size_t n = 0;
    if (ember_backend_devices(EMBER_BACKEND_VULKAN, NULL, 0, &n) != EMBER_OK || n == 0) {
        printf("SKIP: no Vulkan device: %s\n", ember_last_error());
        return EMBER_TEST_SKIP;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_devices_listed),
        cmocka_unit_test(test_app_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
