// device.hpp — finding and opening a CUDA device.
//
// libember-cuda.so links the CUDA runtime statically; the runtime opens the driver (libcuda.so.1) at
// its first call. Before that call the module looks for the driver itself, so that a machine without
// one is told "no CUDA driver" rather than a runtime error code, and the toolkit's stub libcuda (which
// links but runs nothing) is named as such.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

namespace ember::cu {

struct DeviceInfo {
    int ordinal = 0;
    std::string name;
    int cc_major = 0, cc_minor = 0;
    size_t memory = 0;
    bool integrated = false;
    int score = 0;       // 0: unusable (why says why)
    std::string why;
};

// Every CUDA device; throws EMBER_ERR_UNSUPPORTED with the reason when there is no driver, only the
// stub, a driver too old for this runtime, or no device. $EMBER_CUDA_DRIVER replaces the driver's file
// name (tests point it at a missing file).
std::vector<DeviceInfo> device_list();

struct OpenParams {
    int ordinal = -1;              // -1: the best-scoring device ($EMBER_CUDA_DEVICE if set)
    cudaStream_t stream = nullptr; // an app's stream: all work goes there (nullptr: the module's own)
};

class Device {
public:
    explicit Device(const OpenParams &p);
    ~Device();
    Device(const Device &) = delete;
    Device &operator=(const Device &) = delete;
    int ordinal() const { return info_.ordinal; }
    const DeviceInfo &info() const { return info_; }
    const std::string &description() const { return desc_; }
    // Makes this device current on the calling thread (every entry point calls it first).
    void make_current() const;
    // The app's stream, or nullptr (each context then makes its own).
    cudaStream_t app_stream() const { return app_stream_; }

private:
    DeviceInfo info_;
    std::string desc_;
    cudaStream_t app_stream_ = nullptr;
};

} // namespace ember::cu
