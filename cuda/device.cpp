// device.cpp — driver detection, device listing and scoring, opening.
#include "device.hpp"

#include "cu_check.hpp"
#include "kernels.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace ember::cu {

namespace {

// Minimum compute capability: the Q8_0/Q4_0 products use the int8 mma.sync of 8.0 (matmul_mma.cu), and
// the module is built for CMAKE_CUDA_ARCHITECTURES (80-virtual by default: PTX for 8.0, which the driver
// compiles for 8.0 and later).
constexpr int kMinCc = 80;

void require_driver() {
    static std::string why;
    static std::once_flag once;
    std::call_once(once, [] {
        const char *env = std::getenv("EMBER_CUDA_DRIVER");
        const char *path = env && env[0] ? env : "libcuda.so.1";
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *e = dlerror();
            why = format("no CUDA driver (cannot load %s: %s)", path, e ? e : "unknown error");
            return;
        }
        // The runtime keeps its own reference; this one only asked whether the file is there.
        dlclose(h);
    });
    if (!why.empty()) fail(EMBER_ERR_UNSUPPORTED, "cuda: %s", why.c_str());
}

} // namespace

std::vector<DeviceInfo> device_list() {
    require_driver();
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    switch (e) {
    case cudaSuccess: break;
    case cudaErrorStubLibrary:
        fail(EMBER_ERR_UNSUPPORTED, "cuda: no CUDA driver (only the toolkit's stub libcuda.so was found)");
    case cudaErrorInsufficientDriver:
        fail(EMBER_ERR_UNSUPPORTED, "cuda: no CUDA driver, or one older than this build's CUDA runtime %d.%d (%s)",
             CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10, cudaGetErrorString(e));
    case cudaErrorNoDevice: fail(EMBER_ERR_UNSUPPORTED, "cuda: no CUDA device (%s)", cudaGetErrorString(e));
    default: fail_cuda(e, "cudaGetDeviceCount");
    }
    if (n <= 0) fail(EMBER_ERR_UNSUPPORTED, "cuda: no CUDA device");
    std::vector<DeviceInfo> out;
    for (int i = 0; i < n; ++i) {
        cudaDeviceProp p{};
        EMBER_CU(cudaGetDeviceProperties(&p, i));
        DeviceInfo d;
        d.ordinal = i;
        d.name = p.name;
        d.cc_major = p.major, d.cc_minor = p.minor;
        d.memory = p.totalGlobalMem;
        d.integrated = p.integrated != 0;
        const int cc = p.major * 10 + p.minor;
        if (cc < kMinCc) {
            d.why = format("%s has compute capability %d.%d; this backend needs %d.%d", p.name, p.major, p.minor,
                           kMinCc / 10, kMinCc % 10);
        } else {
            EMBER_CU(cudaSetDevice(i));
            cudaError_t img = cudaSuccess;
            if (!image_runs_here(&img))
                d.why = format("%s (compute capability %d.%d) cannot run this build's kernels: %s; rebuild with "
                               "CMAKE_CUDA_ARCHITECTURES including %d%d",
                               p.name, p.major, p.minor, cudaGetErrorString(img), p.major, p.minor);
            else
                d.score = d.integrated ? 60 : 200;  // above Vulkan's 100 for the same discrete GPU
        }
        out.push_back(d);
    }
    return out;
}

Device::Device(const OpenParams &p) {
    const std::vector<DeviceInfo> devs = device_list();
    int pick = p.ordinal;
    if (pick < 0)
        if (const char *env = std::getenv("EMBER_CUDA_DEVICE"); env && env[0]) pick = std::atoi(env);
    if (pick >= 0) {
        if (pick >= static_cast<int>(devs.size()))
            fail(EMBER_ERR_INVALID_ARGUMENT, "cuda: device %d requested, %zu present", pick, devs.size());
        if (devs[pick].score <= 0) fail(EMBER_ERR_UNSUPPORTED, "cuda: %s", devs[pick].why.c_str());
        info_ = devs[pick];
    } else {
        int best = -1;
        for (const DeviceInfo &d : devs)
            if (d.score > 0 && (best < 0 || d.score > devs[best].score)) best = d.ordinal;
        if (best < 0) fail(EMBER_ERR_UNSUPPORTED, "cuda: no usable device: %s", devs[0].why.c_str());
        info_ = devs[best];
    }
    app_stream_ = p.stream;
    make_current();
    int rt = 0, drv = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    desc_ = format("%s (compute %d.%d, %.1f GiB, driver %d.%d, runtime %d.%d)", info_.name.c_str(), info_.cc_major,
                   info_.cc_minor, static_cast<double>(info_.memory) / (1u << 30), drv / 1000, drv % 1000 / 10,
                   rt / 1000, rt % 1000 / 10);
}

Device::~Device() = default;

void Device::make_current() const { EMBER_CU(cudaSetDevice(info_.ordinal)); }

} // namespace ember::cu
